/**
 * Idempotency keys another transaction holds, uncommitted, when a batch is ingested (MariaDB).
 * A transaction of the test's own inserts rows under two of the batch's keys and keeps them
 * uncommitted: the server's INSERT (ON DUPLICATE KEY UPDATE … RETURNING) waits on those keys.
 * When the test commits, the rows that won decide: the event with the same payload is a duplicate
 * of the row under its key, the one with another payload a 409-style rejection, the others are
 * accepted, one row per key is stored, and the totals count exactly the accepted events.
 *
 * (Tried this session and dropped: looking the keys up first and sending the INSERT with the
 * totals and the COMMIT, one round trip fewer. Batches lost 3–9% of their events/s to the extra
 * lookup in MariaDB, and single events gained nothing measurable; this test passed on both.)
 */
import mysql from "mysql2/promise";
import { ok } from "../helpers/clients.js";
import { mysqlOnly } from "../helpers/mysql-only.js";
import { startTestServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

mysqlOnly("mysql: keys another transaction holds while a batch is inserted are a duplicate and a conflict once it commits; the totals count each event once", async (t) => {
  const server = await startTestServer("mysql");
  const conn = await mysql.createConnection(server.db.url);
  try {
    const key = await server.freshKey();
    const subject = await ok(server, key, "POST", "/subjects", { external_id: "racer" });
    const count = await ok(server, key, "POST", "/pricing-metrics", { event_name: "api", name: "API", unit: "call", aggregation: { aggregation_type: "count" } });
    const sum = await ok(server, key, "POST", "/pricing-metrics", { event_name: "api", name: "API", unit: "call", aggregation: { aggregation_type: "sum", value_field: "n" } });
    const event = (k: string, n: string) => ({ idempotency_key: k, subject_id: subject.id, event_name: "api", data: { n }, timestamp: "2026-03-01T10:00:00Z" });
    // A committed event whose stored row (its fingerprint: the payload's, not the key's) the racing rows copy.
    const first = await ok(server, key, "POST", "/usage-events", event("seen", "2"));
    t.is(first.status, "accepted");
    const [rows] = await conn.query("SELECT * FROM usage_events WHERE id = ?", [first.id]);
    const model = (rows as Record<string, unknown>[])[0] as Record<string, unknown>;

    // The racing transaction: uncommitted rows under "same" (the payload of "seen") and "other"
    // (another fingerprint), holding their unique keys.
    await conn.query("SET SESSION innodb_lock_wait_timeout = 50");
    await conn.beginTransaction();
    const copy = (id: string, k: string, fingerprint: unknown) =>
      conn.query("INSERT INTO usage_events (id, environment_id, idempotency_key, fingerprint, subject_id, event_name, occurred_at, data, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", [
        id,
        model.environment_id,
        k,
        fingerprint,
        model.subject_id,
        model.event_name,
        model.occurred_at,
        model.data,
        model.created_at,
      ]);
    await copy("ue_racer00000000000000001", "same", model.fingerprint);
    await copy("ue_racer00000000000000002", "other", "0".repeat(64));

    const answer = ok(server, key, "POST", "/usage-events/batch", { events: [event("a", "3"), event("same", "2"), event("other", "5"), event("b", "7")] });
    // Wait until the server's INSERT runs (it cannot finish while those keys are held), then let
    // the racing transaction win.
    let waiting = 0;
    for (let i = 0; i < 400 && waiting === 0; i++) {
      const [w] = await conn.query("SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND DB = DATABASE() AND INFO LIKE 'INSERT INTO usage_events %'");
      waiting = Number((w as { n: unknown }[])[0]?.n);
      if (waiting === 0) await new Promise((r) => setTimeout(r, 25));
    }
    t.true(waiting > 0, "the server's INSERT waited on the racing transaction's keys");
    await conn.commit();

    const r = await answer;
    t.deepEqual(
      r.results.map((x: Json) => [x.status, x.id, x.error?.code ?? null]),
      [
        ["accepted", r.results[0].id, null],
        ["duplicate", "ue_racer00000000000000001", null],
        ["rejected", null, "already_exists"],
        ["accepted", r.results[3].id, null],
      ],
    );
    t.regex(r.results[2].error.message, /^events\[2\]\.idempotency_key: "other" was already used for an event with another payload$/);
    t.deepEqual([r.accepted, r.duplicate, r.rejected], [2, 1, 1]);

    const [stored] = await conn.query("SELECT idempotency_key AS k, id FROM usage_events WHERE environment_id = ? ORDER BY idempotency_key", [model.environment_id]);
    t.deepEqual(
      (stored as { k: string; id: string }[]).map((x) => x.k),
      ["a", "b", "other", "same", "seen"],
      "one row per key",
    );
    // The totals hold "seen", "a" and "b" (the racing rows were written without totals, as no
    // ingest would: that keeps them out of these sums, so a double count would show).
    const total = async (m: Json) =>
      (await ok(server, key, "POST", `/pricing-metrics/${m.id}/summary`, { subject_id: subject.id, period: { start: "2026-01-01T00:00:00Z", end: "2026-06-01T00:00:00Z" } }))[0].value;
    t.is(await total(count), "3");
    t.is(await total(sum), "12");
  } finally {
    await conn.end().catch(() => undefined);
    await server.stop();
  }
});
