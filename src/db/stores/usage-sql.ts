/**
 * The SQL of the usage store (usage-store.ts): the events' INSERT, the hourly and minute totals'
 * upserts, the environment's ingest hours, and the backfill's page. Values go as `?` parameters,
 * except on MySQL's ingest path, where they are written inline with the driver's escaping
 * (mysql-escape.ts mysqlText).
 */
import type { Candidate, Contribution, Grain } from "../../billing/metering/events.js";
import { formatDecimal } from "../../billing/money.js";
import type { Dialect } from "../columns.js";
import { mysqlText } from "../mysql-escape.js";
import { dbTimeOfMs } from "../raw.js";
import { STATEMENT_BYTES, type Statement, groupBySize, paramsBytes, placeholders } from "../statements.js";

export const CHUNK = 500;
/**
 * Rows per statement on SQLite: statements there cost no round trip, and each runs synchronously
 * on the event loop, so smaller ones let the transaction yield between them (Sql.transaction).
 */
export const SQLITE_CHUNK = 100;

/** Each grain's totals table. */
export const TOTALS_TABLE: Record<Grain, string> = { hour: "usage_rollups", minute: "usage_rollups_minute" };

/** `2026-01-31 12:34:56.789` → `2026-01-31 12:00:00.000`. */
export const hourOf = (dbNow: string) => `${dbNow.slice(0, 13)}:00:00.000`;

/** Adds `accepted` events to an environment's hour (insert or add). */
export function ingestHourStatement(dialect: Dialect, environmentId: string, hour: string, accepted: number): Statement {
  return [
    `INSERT INTO environment_ingest_hours (environment_id, hour, accepted) VALUES (?, ?, ?) ${
      dialect === "mysql" ? "ON DUPLICATE KEY UPDATE accepted = accepted + VALUES(accepted)" : "ON CONFLICT (environment_id, hour) DO UPDATE SET accepted = accepted + excluded.accepted"
    }`,
    [environmentId, hour, accepted],
  ];
}

/** The statements that add contributions to the hourly and minute totals (insert or add). */
export function rollupStatements(dialect: Dialect, contributions: Contribution[]): Statement[] {
  return (["hour", "minute"] as const).flatMap((grain) =>
    upsertInto(
      dialect,
      TOTALS_TABLE[grain],
      contributions.filter((c) => c.grain === grain),
    ),
  );
}

export const ROLLUP_COLUMNS = "metric_id, subject_id, bucket_start, dims_hash, dims, sum_value, event_count, max_value, last_value, last_at, last_key";

/** What a totals row already there gets from the new one: sums added, max and last kept. */
function rollupUpdate(dialect: Dialect): string {
  const newer =
    dialect === "mysql"
      ? "(last_at IS NULL OR (VALUES(last_at) IS NOT NULL AND (VALUES(last_at) > last_at OR (VALUES(last_at) = last_at AND VALUES(last_key) > last_key))))"
      : "(last_at IS NULL OR (excluded.last_at IS NOT NULL AND (excluded.last_at > last_at OR (excluded.last_at = last_at AND excluded.last_key > last_key))))";
  // MySQL applies assignments left to right with the new values, so last_at is set last.
  return dialect === "mysql"
    ? `ON DUPLICATE KEY UPDATE sum_value = sum_value + VALUES(sum_value), event_count = event_count + VALUES(event_count),
         max_value = CASE WHEN max_value IS NULL OR (VALUES(max_value) IS NOT NULL AND VALUES(max_value) > max_value) THEN VALUES(max_value) ELSE max_value END,
         last_value = CASE WHEN ${newer} THEN VALUES(last_value) ELSE last_value END,
         last_key = CASE WHEN ${newer} THEN VALUES(last_key) ELSE last_key END,
         last_at = CASE WHEN ${newer} THEN VALUES(last_at) ELSE last_at END`
    : `ON CONFLICT (metric_id, subject_id, bucket_start, dims_hash) DO UPDATE SET sum_value = dec_add(sum_value, excluded.sum_value),
         event_count = event_count + excluded.event_count, max_value = dec_max(max_value, excluded.max_value),
         last_value = CASE WHEN ${newer} THEN excluded.last_value ELSE last_value END,
         last_key = CASE WHEN ${newer} THEN excluded.last_key ELSE last_key END,
         last_at = CASE WHEN ${newer} THEN excluded.last_at ELSE last_at END`;
}
const ROLLUP_UPDATE: Record<Dialect, string> = { mysql: rollupUpdate("mysql"), sqlite: rollupUpdate("sqlite") };

function upsertInto(dialect: Dialect, table: string, contributions: Contribution[]): Statement[] {
  const rows = contributions.map((c) => [
    c.metricId,
    c.subjectId,
    dbTimeOfMs(c.bucketStart),
    c.dimsHash,
    JSON.stringify(c.dims),
    formatDecimal(c.agg.sum),
    formatDecimal(c.agg.count),
    c.agg.max === null ? null : formatDecimal(c.agg.max),
    c.agg.last ? formatDecimal(c.agg.last.value) : null,
    c.agg.last ? dbTimeOfMs(c.agg.last.at) : null,
    c.agg.last ? c.agg.last.key : null,
  ]);
  // Like the events' INSERT, by rows and by size: a row's dimension values may be long.
  return groupBySize(rows, paramsBytes, STATEMENT_BYTES, CHUNK).map(
    (part) => [`INSERT INTO ${table} (${ROLLUP_COLUMNS}) VALUES ${placeholders(part.length, 11)} ${ROLLUP_UPDATE[dialect]}`, part.flat()] as const,
  );
}

/** VALUES text's size at most: 3 bytes a character in UTF-8. */
const inlineBytes = (row: string) => 3 * row.length + 2;

/**
 * Rows' VALUES text as statements without parameters, at most CHUNK rows and about
 * STATEMENT_BYTES each (groupBySize). Appended one by one (V8 joins such text lazily and copies it
 * once, when the driver writes it).
 */
function inlineStatements(head: string, tail: string, parts: readonly (readonly string[])[]): Statement[] {
  return parts.map((part) => {
    let text = head + part[0];
    for (let k = 1; k < part.length; k++) text += `, ${part[k]}`;
    return [text + tail, []] as const;
  });
}

/**
 * MySQL: rollupStatements with the values written inline (mysqlText; decimals, times and hashes
 * are text the service made, needing no escape): the same rows, without the driver formatting
 * eleven placeholders per total.
 */
export function rollupStatementsInline(contributions: Contribution[]): Statement[] {
  const byGrain: Record<Grain, string[]> = { hour: [], minute: [] };
  for (const c of contributions) {
    const a = c.agg;
    const last = a.last;
    byGrain[c.grain].push(
      `(${mysqlText(c.metricId)}, ${mysqlText(c.subjectId)}, '${dbTimeOfMs(c.bucketStart)}', '${c.dimsHash}', ${mysqlText(JSON.stringify(c.dims))}, '${formatDecimal(a.sum)}', '${formatDecimal(a.count)}', ${
        a.max === null ? "NULL" : `'${formatDecimal(a.max)}'`
      }, ${last ? `'${formatDecimal(last.value)}', '${dbTimeOfMs(last.at)}', ${mysqlText(last.key)}` : "NULL, NULL, NULL"})`,
    );
  }
  return (["hour", "minute"] as const).flatMap((grain) =>
    inlineStatements(`INSERT INTO ${TOTALS_TABLE[grain]} (${ROLLUP_COLUMNS}) VALUES `, ` ${ROLLUP_UPDATE.mysql}`, groupBySize(byGrain[grain], inlineBytes, STATEMENT_BYTES, CHUNK)),
  );
}

/** One page of a new metric's backfill: its event name's events of one environment (index ix_usage_events_env_name). */
export const BACKFILL_PAGE_SQL = "SELECT seq, subject_id, occurred_at, idempotency_key, data FROM usage_events WHERE environment_id = ? AND event_name = ? AND seq > ? ORDER BY seq LIMIT 5000";

/**
 * The INSERT statements of an ingest's candidate events (`now`: their created_at), each with its
 * number of rows. At most 500 rows and about 1 MB per INSERT: a batch may carry up to 1,000 events
 * of up to 100 KB each, and a statement must stay under the server's max_allowed_packet. A key
 * already stored is left as it is; with `returning` (MariaDB) the insert answers the stored row
 * of every input row, in order.
 */
export function eventInsertStatements(dialect: Dialect, environmentId: string, candidates: readonly Candidate[], now: string, returning: string): { statements: Statement[]; partSizes: number[] } {
  const ignore = dialect === "mysql" ? "ON DUPLICATE KEY UPDATE id = id" : "ON CONFLICT (environment_id, idempotency_key) DO NOTHING";
  const head = "INSERT INTO usage_events (id, environment_id, idempotency_key, fingerprint, subject_id, event_name, occurred_at, data, created_at) VALUES ";
  const tail = ` ${ignore}${returning}`;
  if (dialect === "mysql") {
    // The values inline (mysqlText), rather than nine placeholders per event for the driver to format.
    const env = mysqlText(environmentId);
    const created = `'${now}'`;
    const rows = candidates.map(
      (c) =>
        `(${mysqlText(c.id)}, ${env}, ${mysqlText(c.event.idempotencyKey)}, '${c.fingerprint}', ${mysqlText(c.subjectId)}, ${mysqlText(c.event.eventName)}, '${dbTimeOfMs(c.occurredAt)}', ${mysqlText(
          JSON.stringify(c.event.data),
        )}, ${created})`,
    );
    const parts = groupBySize(rows, inlineBytes, STATEMENT_BYTES, CHUNK);
    return { statements: inlineStatements(head, tail, parts), partSizes: parts.map((part) => part.length) };
  }
  const rows = candidates.map((c) => [c.id, environmentId, c.event.idempotencyKey, c.fingerprint, c.subjectId, c.event.eventName, dbTimeOfMs(c.occurredAt), JSON.stringify(c.event.data), now]);
  const parts = groupBySize(rows, paramsBytes, STATEMENT_BYTES, SQLITE_CHUNK);
  return { statements: parts.map((part) => [`${head}${placeholders(part.length, 9)}${tail}`, part.flat()] as const), partSizes: parts.map((part) => part.length) };
}
