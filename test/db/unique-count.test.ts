/**
 * The distinct values' table of unique_count metrics on MariaDB and SQLite: the upsert keeps the
 * earliest first and the latest last instant whatever the order the marks come in; values compare
 * byte for byte; a long value is keyed by its hash with its text kept; a level read counts a value
 * of an edge bucket by the instant that bounds it.
 */
import test from "ava";
import { DAY, MAX_KEY_VALUE, type ValueMark, mergeMarks, planRead, valueMarksOf } from "../../src/billing/metering/unique.js";
import type { PricingMetric } from "../../src/billing/catalog/types.js";
import { fromDbTime } from "../../src/db/raw.js";
import { markStatements } from "../../src/db/stores/unique-sql.js";
import { SqlUsageStore } from "../../src/db/stores/usage-store.js";
import { STORES, withMigratedDatabase } from "../helpers/db.js";

const metric: PricingMetric = {
  id: "pm_u",
  environmentId: "env_1",
  eventName: "visit",
  name: "",
  unit: "",
  dimensions: [],
  aggregation: { type: "unique_count", valueField: "user" },
  createdAt: new Date(0),
  archivedAt: null,
};
const at = (iso: string) => Date.parse(iso);
const marks = (user: string, iso: string): ValueMark[] => valueMarksOf([metric], "subj_1", { eventName: "visit", data: { user }, occurredAt: at(iso) });

for (const store of STORES) {
  test(`${store}: marks widen first and last in any order; values compare byte for byte; long values by hash`, async (t) => {
    await withMigratedDatabase(store, async (db) => {
      const write = async (list: ValueMark[]) => {
        for (const [sql, params] of markStatements(db.dialect, mergeMarks(list))) await db.dataSource.query(sql, [...params]);
      };
      const long = "é".repeat(MAX_KEY_VALUE + 1);
      await write(marks("ann", "2026-03-10T12:00:00.000Z"));
      await write([...marks("ann", "2026-03-10T08:00:00.001Z"), ...marks("ann", "2026-03-10T20:00:00.000Z")]);
      await write(marks("ann", "2026-03-10T09:00:00.000Z"));
      await write([...marks("Ann", "2026-03-10T10:00:00Z"), ...marks("ann ", "2026-03-10T10:00:00Z"), ...marks(long, "2026-03-10T10:00:00Z")]);
      const rows: { value_key: string; value_text: string | null; first_at: unknown; last_at: unknown }[] = await db.dataSource.query(
        "SELECT value_key, value_text, first_at, last_at FROM usage_unique_values WHERE level = 0 ORDER BY value_key",
      );
      t.deepEqual(
        rows.map((r) => [r.value_key.length > MAX_KEY_VALUE ? "hash" : r.value_key, r.value_text, fromDbTime(r.first_at).toISOString(), fromDbTime(r.last_at).toISOString()]),
        [
          ["Ann", null, "2026-03-10T10:00:00.000Z", "2026-03-10T10:00:00.000Z"],
          ["ann", null, "2026-03-10T08:00:00.001Z", "2026-03-10T20:00:00.000Z"],
          ["ann ", null, "2026-03-10T10:00:00.000Z", "2026-03-10T10:00:00.000Z"],
          ["hash", long, "2026-03-10T10:00:00.000Z", "2026-03-10T10:00:00.000Z"],
        ].sort((a, b) => ((a[0] as string) < (b[0] as string) ? -1 : 1)),
      );
      const [levels] = await db.dataSource.query("SELECT COUNT(DISTINCT level) AS n, COUNT(*) AS rows_ FROM usage_unique_values");
      t.is(Number(levels.n), 7);
      t.is(Number(levels.rows_), 28, "4 values × 7 levels");

      // Counted by level reads: from 2026-03-10T20:00:00.000Z (ann's last) on, ann only; a millisecond later, none.
      const usage = new SqlUsageStore(db.sql, db.entities);
      const count = async (lo: number, hi: number) => {
        const plan = planRead(lo, hi);
        if ("raw" in plan) throw new Error("expected a level read");
        return (await usage.uniqueCounts(metric.id, "subj_1", [plan], false))[0]?.count;
      };
      t.is(await count(at("2026-03-10T20:00:00.000Z"), at("2026-03-12T00:00:00Z")), 1);
      t.is(await count(at("2026-03-10T20:00:00.001Z"), at("2026-03-12T00:00:00Z")), 0);
      t.is(await count(at("2026-03-01T00:00:00Z"), at("2026-03-10T08:00:00.001Z")), 1, "ann's first is the end");
      t.is(await count(at("2026-03-01T00:00:00Z"), at("2026-03-10T08:00:00.000Z")), 0);
      t.is(await count(at("2026-03-09T00:00:00Z"), at("2026-03-11T00:00:00Z")), 4);
      t.is(await count(at("2026-03-10T00:00:00Z") - 30 * DAY, at("2026-03-10T00:00:00Z") + 30 * DAY), 4);
    });
  });
}
