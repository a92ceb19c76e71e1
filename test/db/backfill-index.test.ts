/**
 * Creating a pricing metric backfills its totals from the events already stored under its event
 * name while it holds the environment's lock (ingestion of that environment waits). On MariaDB
 * that read must use the (environment_id, event_name) index and touch only that name's events,
 * not every event of the environment (1.5 M events took 4 s before the index).
 */
import { BACKFILL_PAGE_SQL } from "../../src/db/stores/usage-sql.js";
import { withMigratedDatabase } from "../helpers/db.js";
import { mysqlOnly } from "../helpers/mysql-only.js";

mysqlOnly("mysql: a new metric's backfill reads its event name's events through the (environment, event_name) index", async (t) => {
  await withMigratedDatabase("mysql", async (db) => {
    // 20,000 events of other names in the environment, 50 of the metric's name.
    const rows: unknown[][] = [];
    for (let i = 0; i < 20_050; i++) {
      const name = i % 401 === 0 ? "target" : `other${i % 7}`;
      rows.push([`ue_${i}`, "env_a", `k${i}`, "f".repeat(64), "subj_a", name, "2026-01-01 00:00:00.000", "{}", "2026-01-01 00:00:00.000"]);
    }
    for (let k = 0; k < rows.length; k += 2000) {
      const part = rows.slice(k, k + 2000);
      await db.dataSource.query(
        `INSERT INTO usage_events (id, environment_id, idempotency_key, fingerprint, subject_id, event_name, occurred_at, data, created_at) VALUES ${part.map(() => "(?, ?, ?, ?, ?, ?, ?, ?, ?)").join(", ")}`,
        part.flat(),
      );
    }
    await db.dataSource.query("ANALYZE TABLE usage_events");
    const [plan] = await db.dataSource.query(`EXPLAIN ${BACKFILL_PAGE_SQL}`, ["env_a", "target", "0"]);
    t.is(plan.key, "ix_usage_events_env_name", JSON.stringify(plan));
    t.true(Number(plan.rows) < 1000, `rows examined: ${plan.rows}`);
    const found = await db.dataSource.query(BACKFILL_PAGE_SQL, ["env_a", "target", "0"]);
    t.is(found.length, rows.filter((r) => r[5] === "target").length);
  });
});
