/**
 * GET /events (ListEvents) through the real server, on MariaDB and SQLite, when other
 * environments wrote many events after the caller's cursor (DESIGN §4: `has_more` is true exactly
 * when another page exists; §10): the caller's next event is listed, not an empty final-looking
 * page. The feed's horizon reads every environment's events a window at a time; a window full of
 * other environments' events is read past.
 */
import test from "ava";
import mysql from "mysql2/promise";
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

  test.serial(`${store}: an environment's first page lists its events after 60,000 older events of another environment`, async (t) => {
    const server = await startTestServer(store);
    t.teardown(() => server.stop());
    const a = await server.freshKey();
    const b = await server.freshKey();
    await rest(server.url, "POST", "/subjects", b, { name: "first in B" });
    const envB = ((await rest(server.url, "GET", "/events", b)).body as { events: { environment_id: string }[] }).events[0]?.environment_id as string;
    // 60,000 events of environment B written a minute ago (a shared deployment's history), then one of A's.
    await withDatabase(server.db.url, async (db) => {
      const at = dbTime(new Date(Date.now() - 60_000));
      for (let i = 0; i < 60_000; i += 1000) {
        const rows = Array.from({ length: 1000 }, () => [newId("evt"), envB, "subject.updated", "{}", at, 0]);
        await db.sql.query(`INSERT INTO events (id, environment_id, type, data, created_at, fanout) VALUES ${rows.map(() => "(?, ?, ?, ?, ?, ?)").join(", ")}`, rows.flat());
      }
    });
    const made = (await rest(server.url, "POST", "/subjects", a, { name: "first in A" })).body as { id: string };
    // No cursor: from A's first event, at once (the walk reads only the events younger than the gap wait).
    const page = (await rest(server.url, "GET", "/events", a)).body as { events: { data: { id: string } }[]; has_more: boolean };
    t.deepEqual(
      page.events.map((e) => e.data.id),
      [made.id],
    );
    t.false(page.has_more);
  });

  if (store === "mysql") {
    test.serial("mysql: a page stops below an event number still being written, and lists it and the rest once it commits", async (t) => {
      const server = await startTestServer(store);
      t.teardown(() => server.stop());
      const a = await server.freshKey();
      const list = async (after: string) => ((await rest(server.url, "GET", `/events?after=${after}`, a)).body as { events: { id: string; type: string }[]; has_more: boolean }).events;
      await rest(server.url, "POST", "/subjects", a, { name: "first in A" });
      const [first] = await list("");
      const envA = ((await rest(server.url, "GET", `/events/${first?.id}`, a)).body as { environment_id: string }).environment_id;
      const conn = await mysql.createConnection(server.db.url);
      t.teardown(() => conn.end());
      // A transaction takes the next event number and holds it, uncommitted; a later one commits.
      await conn.query("START TRANSACTION");
      const held = newId("evt");
      await conn.query("INSERT INTO events (id, environment_id, type, data, created_at, fanout) VALUES (?, ?, 'subject.updated', '{}', ?, 0)", [held, envA, dbTime(new Date())]);
      await rest(server.url, "POST", "/subjects", a, { name: "second in A" });
      t.deepEqual(await list(first?.id as string), [], "nothing past the number not yet committed");
      await conn.query("COMMIT");
      t.deepEqual(
        (await list(first?.id as string)).map((e) => [e.id === held ? "held" : "later", e.type]),
        [
          ["held", "subject.updated"],
          ["later", "subject.created"],
        ],
      );
    });
  }
}
