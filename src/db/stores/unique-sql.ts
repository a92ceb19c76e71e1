/**
 * The SQL of unique_count metrics' distinct values (src/billing/metering/unique.ts): the upsert
 * of an ingest's marks (the earliest first, the latest last) and the COUNT(DISTINCT) of a level's
 * buckets. Values go as `?` parameters on both stores.
 */
import type { LevelRead, ValueMark } from "../../billing/metering/unique.js";
import type { Dialect } from "../columns.js";
import { dbTimeOfMs } from "../raw.js";
import { STATEMENT_BYTES, type Statement, groupBySize, paramsBytes, placeholders } from "../statements.js";

const COLUMNS = "metric_id, subject_id, level, bucket, dims_hash, value_key, dims, value_text, first_at, last_at";
const UPDATE: Record<Dialect, string> = {
  mysql: "ON DUPLICATE KEY UPDATE first_at = LEAST(first_at, VALUES(first_at)), last_at = GREATEST(last_at, VALUES(last_at))",
  // Times are fixed-width text on SQLite: min and max compare them as instants.
  sqlite: "ON CONFLICT (metric_id, subject_id, level, bucket, dims_hash, value_key) DO UPDATE SET first_at = min(first_at, excluded.first_at), last_at = max(last_at, excluded.last_at)",
};

/** The statements that add marks (insert, or widen first and last), at most 500 rows and about 1 MB each. */
export function markStatements(dialect: Dialect, marks: readonly ValueMark[]): Statement[] {
  const rows = marks.map((m) => [m.metricId, m.subjectId, m.level, m.bucket, m.dimsHash, m.valueKey, JSON.stringify(m.dims), m.valueText, dbTimeOfMs(m.first), dbTimeOfMs(m.last)]);
  return groupBySize(rows, paramsBytes, STATEMENT_BYTES, dialect === "mysql" ? 500 : 100).map(
    (part) => [`INSERT INTO usage_unique_values (${COLUMNS}) VALUES ${placeholders(part.length, 10)} ${UPDATE[dialect]}`, part.flat()] as const,
  );
}

/** A level read's rows (the primary key's range): its first bucket's from lo on, its last bucket's up to hi. */
function where(metricId: string, subjectId: string, r: LevelRead): Statement {
  return [
    "metric_id = ? AND subject_id = ? AND level = ? AND bucket BETWEEN ? AND ? AND (bucket > ? OR last_at >= ?) AND (bucket < ? OR first_at <= ?)",
    [metricId, subjectId, r.level, r.first, r.last, r.first, dbTimeOfMs(r.lo), r.last, dbTimeOfMs(r.hi)],
  ];
}

/**
 * One statement for many reads: per read (its position as `r`), the distinct values, per
 * combination of dimensions (`byDims`, a read without values answering no row) or in all (a
 * row whose count may be 0).
 */
export function countStatement(metricId: string, subjectId: string, reads: readonly LevelRead[], byDims: boolean): Statement {
  const parts = reads.map((r, i) => {
    const [sql, params] = where(metricId, subjectId, r);
    return [
      byDims
        ? `SELECT ${i} AS r, MIN(dims) AS dims, COUNT(DISTINCT value_key) AS n FROM usage_unique_values WHERE ${sql} GROUP BY dims_hash`
        : `SELECT ${i} AS r, NULL AS dims, COUNT(DISTINCT value_key) AS n FROM usage_unique_values WHERE ${sql}`,
      params,
    ] as const;
  });
  return [parts.map(([sql]) => sql).join(" UNION ALL "), parts.flatMap(([, params]) => params)];
}

/** A read's distinct (combination, value) pairs: for a grouping by some of the dimensions only. */
export function pairsStatement(metricId: string, subjectId: string, r: LevelRead): Statement {
  const [sql, params] = where(metricId, subjectId, r);
  return [`SELECT MIN(dims) AS dims, value_key FROM usage_unique_values WHERE ${sql} GROUP BY dims_hash, value_key`, params];
}

/** The environment's last event sequence number (over ix_usage_events_env_seq). */
export const LAST_SEQ_SQL = "SELECT MAX(seq) AS s FROM usage_events WHERE environment_id = ?";

/**
 * A subject's events of one name in [from, to] among the environment's first `most` + 1 events
 * stored after sequence number `after` (over ix_usage_events_env_seq), with the greatest sequence
 * number (`k` 1) and the number (`k` 2) of those: more than `most` means the read did not cover
 * every event since `after`.
 */
export function eventsSinceStatement(environmentId: string, subjectId: string, eventName: string, after: string, from: number, to: number, most: number): Statement {
  const since = (columns: string) => `SELECT ${columns} FROM usage_events WHERE environment_id = ? AND seq > ? ORDER BY seq LIMIT ${Number(most) + 1}`;
  return [
    `SELECT 0 AS k, seq, occurred_at, data FROM (${since("seq, subject_id, event_name, occurred_at, data")}) e WHERE subject_id = ? AND event_name = ? AND occurred_at >= ? AND occurred_at <= ? ` +
      `UNION ALL SELECT 1 AS k, MAX(seq) AS seq, NULL AS occurred_at, NULL AS data FROM (${since("seq")}) f ` +
      `UNION ALL SELECT 2 AS k, COUNT(*) AS seq, NULL AS occurred_at, NULL AS data FROM (${since("seq")}) g`,
    [environmentId, after, subjectId, eventName, dbTimeOfMs(from), dbTimeOfMs(to), environmentId, after, environmentId, after],
  ];
}
