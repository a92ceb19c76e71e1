/**
 * GET /events (ListEvents) through the real server, on MariaDB and SQLite, when other
 * environments wrote many events after the caller's cursor (DESIGN §4: `has_more` is true exactly
 * when another page exists; §10): the caller's next event is listed, not an empty final-looking
 * page. The feed's horizon reads every environment's events a window at a time; a window full of
 * other environments' events is read past.
 */
import test from "ava";
import { newId } from "../../src/billing/ids.js";
import { dbTime } from "../../src/db/raw.js";
import { rest } from "../helpers/clients.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { startTestServer } from "../helpers/server.js";

for (const store of STORES) {
  test.serial(`${store}: an environment's next event is listed after 2,500 events of another environment`, async (t) => {
    const server = await startTestServer(store);
    t.teardown(() => server.stop());
    const a = await server.freshKey();
    const b = await server.freshKey();
    const call = async (key: string, method: string, path: string, body?: unknown) => {
      const r = await rest(server.url, method, path, key, body);
      if (r.status !== 200) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body;
    };
    await call(a, "POST", "/subjects", { name: "first in A" });
    const before = (await call(a, "GET", "/events")).events;
    t.is(before.length, 1);
    const cursor = before[0].id as string;

    await call(b, "POST", "/subjects", { name: "first in B" });
    const envB = (await call(b, "GET", "/events")).events[0].environment_id as string;
    // 2,500 more events of environment B, just written (none older than the gap wait).
    await withDatabase(server.db.url, async (db) => {
      const at = dbTime(new Date());
      for (let i = 0; i < 2500; i += 250) {
        const rows = Array.from({ length: 250 }, () => [newId("evt"), envB, "subject.updated", "{}", at, 0]);
        await db.sql.query(`INSERT INTO events (id, environment_id, type, data, created_at, fanout) VALUES ${rows.map(() => "(?, ?, ?, ?, ?, ?)").join(", ")}`, rows.flat());
      }
    });
    const made = await call(a, "POST", "/subjects", { name: "second in A" });

    const page = await call(a, "GET", `/events?after=${cursor}`);
    t.deepEqual(
      page.events.map((e: { type: string; data: { id: string } }) => [e.type, e.data.id]),
      [["subject.created", made.id]],
    );
    t.false(page.has_more);
    const typed = await call(a, "GET", `/events?after=${cursor}&types=subject.created`);
    t.deepEqual(
      typed.events.map((e: { data: { id: string } }) => e.data.id),
      [made.id],
      "with a types filter too",
    );
    // And B still lists its own, from its first event on.
    const ofB = await call(b, "GET", "/events?limit=100");
    t.is(ofB.events.length, 100);
    t.true(ofB.has_more);
  });
}
