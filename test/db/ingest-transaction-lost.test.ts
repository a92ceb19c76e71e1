/**
 * A transaction the server ends while its session is still sending statements (MariaDB).
 *
 * On a Galera cluster a replicated write that conflicts with a local transaction aborts it (a
 * brute-force abort). When that lands while the session runs a multi-statement packet, MariaDB
 * rolls the transaction back without an error and runs the packet's remaining statements, COMMIT
 * included, each on its own in autocommit mode: an ingest's events were rolled back while its
 * last statements committed, and the service answered the batch "accepted". A plain server ends
 * a transaction the same silent way when a statement of the packet is ROLLBACK, which is how
 * these tests put the session in that state: every statement after it must fail (a deadlock, so
 * that the transaction is run again), and nothing after it may commit.
 */
import type { Pipeline, Statement } from "../../src/db/sql.js";
import { SqlUsageStore } from "../../src/db/stores/usage-store.js";
import { ingestDecision, prepare } from "../../src/billing/metering/events.js";
import type { PreparedEvent } from "../../src/billing/metering/events.js";
import { StorageConflictError } from "../../src/billing/storage-errors.js";
import { ok } from "../helpers/clients.js";
import { withDatabase } from "../helpers/db.js";
import { mysqlOnly } from "../helpers/mysql-only.js";
import { startTestServer } from "../helpers/server.js";

mysqlOnly("mysql: statements after the server ended the transaction mid-packet fail, and none of them commits on its own", async (t) => {
  const server = await startTestServer("mysql");
  try {
    await withDatabase(server.db.url, async (db) => {
      await db.sql.query("CREATE TABLE lost_tx (n INT PRIMARY KEY) ENGINE=InnoDB", []);
      // The transaction ends inside a packet: the INSERT after the ROLLBACK, and the COMMIT.
      const within = db.sql.pipelined(async (p) => {
        await p.run([
          ["INSERT INTO lost_tx VALUES (1)", []],
          ["ROLLBACK", []],
          ["INSERT INTO lost_tx VALUES (2)", []],
        ]);
        await p.finish([["INSERT INTO lost_tx VALUES (3)", []]]);
      });
      await t.throwsAsync(within, { instanceOf: StorageConflictError });
      // The transaction ends with one packet; the next packet carries writes and the COMMIT.
      const between = db.sql.pipelined(async (p) => {
        await p.run([
          ["INSERT INTO lost_tx VALUES (4)", []],
          ["ROLLBACK", []],
        ]);
        p.defer(["INSERT INTO lost_tx VALUES (5)", []]);
        await p.finish([["INSERT INTO lost_tx VALUES (6)", []]]);
      });
      await t.throwsAsync(between, { instanceOf: StorageConflictError });
      t.deepEqual(await db.sql.query("SELECT n FROM lost_tx ORDER BY n", []), []);
      // An ordinary transaction still commits, its results in order.
      const out = await db.sql.pipelined(async (p) => {
        const [inserted, selected] = await p.run([
          ["INSERT INTO lost_tx VALUES (7)", []],
          ["SELECT n FROM lost_tx", []],
        ]);
        return { inserted: (inserted as { affectedRows: number }).affectedRows, selected };
      });
      t.deepEqual(JSON.parse(JSON.stringify(out)), { inserted: 1, selected: [{ n: 7 }] });
      t.deepEqual(JSON.parse(JSON.stringify(await db.sql.query("SELECT n FROM lost_tx", []))), [{ n: 7 }]);
    });
  } finally {
    await server.stop();
  }
});

mysqlOnly("mysql: an ingest whose transaction the server ended after its insert is run again; every accepted event is stored once and counted once", async (t) => {
  const server = await startTestServer("mysql");
  try {
    const key = await server.freshKey();
    const subject = await ok(server, key, "POST", "/subjects", { external_id: "lost" });
    await ok(server, key, "POST", "/pricing-metrics", { event_name: "api", name: "API", unit: "call", aggregation: { aggregation_type: "sum", value_field: "n" } });
    await withDatabase(server.db.url, async (db) => {
      const [row] = await db.sql.query<{ environment_id: string }[]>("SELECT environment_id FROM subjects WHERE id = ?", [subject.id]);
      const environmentId = row?.environment_id as string;
      // The first try's transaction ends right after its events' INSERT (the round trip that
      // answers them), as a brute-force abort ends it on Galera: the totals and the COMMIT follow.
      let ended = 0;
      const real = db.sql.pipelined.bind(db.sql);
      db.sql.pipelined = (<T>(fn: (p: Pipeline) => Promise<T>, options?: { readCommitted?: boolean }) =>
        real((p) => {
          const run = p.run.bind(p);
          const ending: Pipeline = Object.assign(Object.create(p) as Pipeline, {
            run: async (statements: readonly Statement[]) => {
              if (ended > 0 || !statements.some(([sql]) => sql.startsWith("INSERT INTO usage_events"))) return run(statements);
              ended++;
              return (await run([...statements, ["ROLLBACK", []]])).slice(0, statements.length);
            },
          });
          return fn(ending);
        }, options)) as typeof db.sql.pipelined;
      const retries: unknown[] = [];
      const store = new SqlUsageStore(db.sql, db.entities, (err) => retries.push(err));
      const events = Array.from({ length: 20 }, (_, i) =>
        prepare({ idempotencyKey: `k${i}`, subjectId: subject.id, eventName: "api", data: { n: "2" }, timestamp: new Date("2026-03-01T10:00:00Z") }, i, `events[${i}].`, Date.now()),
      ) as PreparedEvent[];
      const outcomes = await store.ingest(environmentId, events, ingestDecision);
      t.is(ended, 1);
      t.is(retries.length, 1);
      t.true(retries[0] instanceof StorageConflictError);
      t.deepEqual(
        outcomes.map((o) => o.status),
        events.map(() => "accepted"),
      );
      const [stored] = await db.sql.query<{ n: unknown; keys: unknown }[]>("SELECT COUNT(*) AS n, COUNT(DISTINCT idempotency_key) AS `keys` FROM usage_events WHERE environment_id = ?", [
        environmentId,
      ]);
      t.is(String(stored?.n), "20");
      t.is(String(stored?.keys), "20");
      const ids = await db.sql.query<{ id: string }[]>("SELECT id FROM usage_events WHERE environment_id = ?", [environmentId]);
      t.deepEqual(ids.map((r) => r.id).sort(), outcomes.map((o) => ("id" in o ? o.id : "")).sort());
      const [hours] = await db.sql.query<{ n: unknown }[]>("SELECT SUM(accepted) AS n FROM environment_ingest_hours WHERE environment_id = ?", [environmentId]);
      t.is(String(hours?.n), "20");
      const [totals] = await db.sql.query<{ n: unknown; s: unknown }[]>("SELECT SUM(event_count) AS n, SUM(sum_value) AS s FROM usage_rollups WHERE subject_id = ?", [subject.id]);
      t.is(String(totals?.n), "20");
      t.is(String(totals?.s), "40.000000000000");
    });
  } finally {
    await server.stop();
  }
});
