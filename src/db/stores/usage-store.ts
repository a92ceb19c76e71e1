/**
 * Storage of usage: the append-only event table and the exact hourly totals kept in the same
 * transaction as each insert. Hot paths are plain SQL with `?` placeholders (both stores).
 */
import type { EntityManager } from "typeorm";
import type { AggregationType, PricingMetric } from "../../billing/catalog/types.js";
import { type Candidate, type Contribution, type Grain, type IngestDecision, type Outcome, type PreparedEvent, contributionsOf, mergeContributions } from "../../billing/metering/events.js";
import type { EventsSince, RawEvent, RejectedEvent, StoredEvent, StoredRollup, StoredTotal, StoredUniqueCount, UsageStore } from "../../billing/metering/usage-store.js";
import { type LevelRead, type ValueMark, mergeMarks, valueMarksOf } from "../../billing/metering/unique.js";
import { LAST_SEQ_SQL, countStatement, eventsSinceStatement, markStatements, pairsStatement } from "./unique-sql.js";
import { type Page, type PageResult, toPageResult } from "../../billing/pagination.js";
import type { Entities } from "../entities/index.js";
import type { RejectedUsageEventRow } from "../entities/usage.js";
import { dbTime, fromDbTime, fromJsonText, mayBeSubjectId } from "../raw.js";
import type { Dialect } from "../columns.js";
import { isRefusedValue, isTransient, isUnavailable } from "../errors.js";
import { nextTurn } from "../../billing/yielding.js";
import { type Pipeline, STATEMENT_BYTES, type Sql, type Statement, chunks, groupBySize, paramsBytes, placeholders } from "../sql.js";
import { TotalsReads } from "./usage-totals.js";
import { BACKFILL_PAGE_SQL, CHUNK, SQLITE_CHUNK, TOTALS_TABLE, eventInsertStatements, hourOf, ingestHourStatement, rollupStatements, rollupStatementsInline } from "./usage-sql.js";

/** An ingest of at least this many events lets the event loop turn between its steps. */
const LARGE_INGEST = 100;

export interface MetricRow {
  id: string;
  environment_id: string;
  event_name: string;
  dimensions: unknown;
  aggregation_type: string;
  value_field: string | null;
}

export function metricFromLookupRow(r: MetricRow): PricingMetric {
  return {
    id: r.id,
    environmentId: r.environment_id,
    eventName: r.event_name,
    name: "",
    unit: "",
    dimensions: fromJsonText<string[]>(r.dimensions) ?? [],
    aggregation: { type: r.aggregation_type as AggregationType, valueField: r.value_field },
    createdAt: new Date(0),
    archivedAt: null,
  };
}

/** Adds contributions to the hourly and minute totals (insert or add), in the caller's transaction. */
export async function upsertRollups(em: EntityManager, dialect: Dialect, contributions: Contribution[]): Promise<void> {
  for (const [sql, params] of rollupStatements(dialect, contributions)) await em.query(sql, [...params]);
}

/**
 * Adds the events already stored under a metric's event name to its totals and, for a
 * unique_count metric, its distinct values, in the caller's transaction, 5,000 events at a time;
 * `parts` limits what is added (a migration adding one grain, or the distinct values' table).
 * `onPage` is told the events added so far after each page (progress of a long backfill).
 */
export async function backfillTotals(
  em: EntityManager,
  dialect: Dialect,
  metric: PricingMetric,
  parts: readonly (Grain | "values")[] = ["hour", "minute", "values"],
  onPage?: (events: number) => void,
): Promise<void> {
  let after = "0";
  let done = 0;
  const values = parts.includes("values") && metric.aggregation.type === "unique_count";
  for (;;) {
    const rows: { seq: unknown; subject_id: string; occurred_at: unknown; idempotency_key: string; data: unknown }[] = await em.query(BACKFILL_PAGE_SQL, [
      metric.environmentId,
      metric.eventName,
      after,
    ]);
    if (rows.length === 0) return;
    after = String(rows[rows.length - 1]?.seq);
    const contributions: Contribution[] = [];
    const marks: ValueMark[] = [];
    for (const r of rows) {
      const e = { eventName: metric.eventName, data: fromJsonText<Record<string, string>>(r.data), occurredAt: fromDbTime(r.occurred_at).getTime(), idempotencyKey: r.idempotency_key };
      for (const c of contributionsOf([metric], r.subject_id, e)) if (parts.includes(c.grain)) contributions.push(c);
      if (values) marks.push(...valueMarksOf([metric], r.subject_id, e));
    }
    await upsertRollups(em, dialect, mergeContributions(contributions));
    for (const [sql, params] of markStatements(dialect, mergeMarks(marks))) await em.query(sql, [...params]);
    done += rows.length;
    onPage?.(done);
  }
}

/** Rejected events written for an environment between two prunes of its oldest (recordRejected). */
const PRUNE_EVERY = 1000;

export class SqlUsageStore implements UsageStore {
  /** Per environment, rejected events written since this process last pruned its oldest. */
  private readonly rejectedSincePrune = new Map<string, number>();
  private readonly totals: TotalsReads | undefined;

  constructor(
    private readonly sql: Sql,
    _entities: Entities,
    /** Told about each retried transaction (deadlock, lock timeout), e.g. to log it. */
    private readonly onRetry?: (err: unknown, attempt: number) => void,
  ) {
    this.totals = sql.dialect === "mysql" ? new TotalsReads(sql) : undefined;
  }

  async ingest(environmentId: string, events: PreparedEvent[], decision: IngestDecision): Promise<Outcome[]> {
    for (let attempt = 1; ; attempt++) {
      try {
        // READ COMMITTED: the key lookup after the insert must see events other transactions
        // committed meanwhile, and a plain read does that without share-locking index ranges
        // (which deadlocked concurrent ingests).
        return await this.sql.pipelined((p) => this.ingestInTransaction(p, environmentId, events, decision), { readCommitted: true });
      } catch (err) {
        if (!isTransient(err) || attempt >= 5) throw err;
        this.onRetry?.(err, attempt);
        await new Promise((r) => setTimeout(r, 5 * attempt + Math.random() * 10));
      }
    }
  }

  /**
   * On MySQL three round trips whatever the number of events (up to 500): the lock and the
   * lookups (with BEGIN), the insert (its RETURNING decides each event), the totals (with COMMIT).
   */
  private async ingestInTransaction(p: Pipeline, environmentId: string, events: PreparedEvent[], decision: IngestDecision): Promise<Outcome[]> {
    const mysql = this.sql.dialect === "mysql";
    const reads: Statement[] = [];
    // Shared lock: metric creation (with its backfill) holds this row exclusively.
    if (mysql) reads.push(["SELECT id FROM environments WHERE id = ? LOCK IN SHARE MODE", [environmentId]]);
    const names = [...new Set(events.map((e) => e.eventName))];
    reads.push([
      `SELECT id, environment_id, event_name, dimensions, aggregation_type, value_field FROM pricing_metrics WHERE environment_id = ? AND event_name IN (${names.map(() => "?").join(", ")})`,
      [environmentId, ...names],
    ]);
    // Every key by external ID, the keys shaped like an ID also by ID: two unique-key lookups
    // (as findSubjectRow does; `id IN (…) OR external_id_key IN (…)` ran as a slower index merge).
    const keys = [...new Set(events.map((e) => e.subjectKey))];
    const subjectsWhere = (column: string, part: string[]): Statement => [
      `SELECT s.id, s.external_id_key, c.frozen_time FROM subjects s LEFT JOIN test_clocks c ON c.environment_id = s.environment_id AND c.id = s.test_clock_id WHERE s.environment_id = ? AND s.deleted_at IS NULL AND s.${column} IN (${part.map(() => "?").join(", ")})`,
      [environmentId, ...part],
    ];
    for (const part of chunks(keys)) reads.push(subjectsWhere("external_id_key", part));
    for (const part of chunks(keys.filter(mayBeSubjectId))) reads.push(subjectsWhere("id", part));
    const [metricRows, ...subjectParts] = (await p.run(reads)).slice(mysql ? 1 : 0) as [MetricRow[], ...{ id: string; external_id_key: string | null; frozen_time: unknown }[][]];

    const metricsByName = new Map<string, PricingMetric[]>();
    for (const m of metricRows.map(metricFromLookupRow)) metricsByName.set(m.eventName, [...(metricsByName.get(m.eventName) ?? []), m]);
    const subjectIds = new Map<string, { id: string; clockTime: number | null }>();
    const rows = subjectParts.flat();
    const value = (r: (typeof rows)[number]) => ({ id: r.id, clockTime: r.frozen_time == null ? null : fromDbTime(r.frozen_time).getTime() });
    for (const r of rows) if (r.external_id_key !== null && !subjectIds.has(r.external_id_key)) subjectIds.set(r.external_id_key, value(r));
    for (const r of rows) subjectIds.set(r.id, value(r)); // an ID match wins over an external-ID match

    const decided = decision.decide(events, metricsByName, subjectIds);
    // Judging a large batch took its share of the event loop: let other requests in before its
    // rows are built and written (safe inside the transaction: see Sql.transaction).
    if (events.length >= LARGE_INGEST) await nextTurn();
    const candidates = decided.filter((d): d is Candidate => "id" in d);
    const outcomes = new Map<PreparedEvent, Outcome>();
    for (const d of decided) if ("error" in d) outcomes.set(d.event, { status: "rejected", error: d.error });

    if (candidates.length > 0) {
      const now = dbTime(new Date());
      // MariaDB answers the insert with the stored row of every input row, in order (the new one,
      // or the one already under that key), which saves the lookup below.
      const returning = this.sql.dataSource.driver.options.type === "mariadb" ? " RETURNING id, idempotency_key, fingerprint" : "";
      const stored = new Map<string, { id: string; fingerprint: string }>();
      const { statements, partSizes } = eventInsertStatements(this.sql.dialect, environmentId, candidates, now, returning);
      const inserted = await p.run(statements);
      if (returning) {
        inserted.forEach((result, i) => {
          if (!Array.isArray(result) || result.length !== partSizes[i]) return;
          for (const r of result as { id: string; idempotency_key: string; fingerprint: string }[]) stored.set(r.idempotency_key, { id: r.id, fingerprint: r.fingerprint });
        });
      }
      // What is stored under each key now decides: ours (accepted), a twin (duplicate) or not (conflict).
      const uniqueKeys = [...new Set(candidates.map((c) => c.event.idempotencyKey))].filter((k) => !stored.has(k));
      // At most 200 keys per lookup: beyond MariaDB's eq_range_index_dive_limit the IN list may be
      // planned as a range scan.
      const lookups: Statement[] = chunks(uniqueKeys, 200).map((part) => [
        `SELECT id, idempotency_key, fingerprint FROM usage_events WHERE environment_id = ? AND idempotency_key IN (${part.map(() => "?").join(", ")})`,
        [environmentId, ...part],
      ]);
      if (lookups.length > 0) {
        for (const found of (await p.run(lookups)) as { id: string; idempotency_key: string; fingerprint: string }[][]) {
          for (const r of found) stored.set(r.idempotency_key, { id: r.id, fingerprint: r.fingerprint });
        }
      }
      // Writing took a round trip; what follows (each outcome, the totals' statements) is the
      // transaction's other long stretch of work for a large batch: let other requests in first.
      if (candidates.length >= LARGE_INGEST) await nextTurn();
      const accepted: Contribution[] = [];
      const marks: ValueMark[] = [];
      for (const c of candidates) {
        const outcome = decision.classify(c, stored.get(c.event.idempotencyKey));
        outcomes.set(c.event, outcome);
        if (outcome.status === "accepted") {
          accepted.push(...c.contributions);
          if (c.marks.length > 0) marks.push(...c.marks);
        }
      }
      // Nothing reads the totals' answers: they go with the COMMIT. The totals, then the distinct
      // values, each sorted: every ingest takes their row locks in one order.
      const merged = mergeContributions(accepted);
      for (const st of mysql ? rollupStatementsInline(merged) : rollupStatements(this.sql.dialect, merged)) p.defer(st);
      if (marks.length > 0) for (const st of markStatements(this.sql.dialect, mergeMarks(marks))) p.defer(st);
      // The environment's events accepted this hour (of arrival), last: every ingest transaction
      // of the environment takes this row's lock just before its COMMIT, so it waits on no other.
      const acceptedCount = candidates.reduce((n, c) => n + (outcomes.get(c.event)?.status === "accepted" ? 1 : 0), 0);
      if (acceptedCount > 0) p.defer(ingestHourStatement(this.sql.dialect, environmentId, hourOf(now), acceptedCount));
    }
    return events.map((e) => outcomes.get(e) as Outcome);
  }

  /**
   * One INSERT of the call's rejected events (more only past the statement's size); then, once
   * per 1,000 rejected events written for an environment by this process (and at its first), the
   * rows beyond the environment's newest `keep` are deleted, 5,000 at most at a time, both over
   * ix_rejected_usage_events_env_seq.
   */
  async recordRejected(environmentId: string, events: RejectedEvent[], keep: number): Promise<void> {
    const rows = events.map((e) => [environmentId, dbTime(e.receivedAt), e.idempotencyKey, e.subjectId, e.eventName, e.timestamp, e.reason, e.message, e.field]);
    for (const part of groupBySize(rows, paramsBytes, STATEMENT_BYTES, this.sql.dialect === "mysql" ? CHUNK : SQLITE_CHUNK)) {
      await this.sql.query(
        `INSERT INTO rejected_usage_events (environment_id, received_at, idempotency_key, subject_id, event_name, event_time, reason, message, field) VALUES ${placeholders(part.length, 9)}`,
        part.flat(),
      );
    }
    const since = this.rejectedSincePrune.get(environmentId);
    const written = (since ?? PRUNE_EVERY) + events.length;
    if (written < PRUNE_EVERY) {
      this.rejectedSincePrune.set(environmentId, written);
      return;
    }
    this.rejectedSincePrune.set(environmentId, 0);
    const edge: { seq: unknown }[] = await this.sql.query(`SELECT seq FROM rejected_usage_events WHERE environment_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ${Number(keep)}`, [environmentId]);
    const oldest = edge[0];
    if (!oldest) return;
    const limit = this.sql.dialect === "mysql" ? " ORDER BY seq LIMIT 5000" : "";
    await this.sql.query(`DELETE FROM rejected_usage_events WHERE environment_id = ? AND seq <= ?${limit}`, [environmentId, String(oldest.seq)]);
  }

  /** Over ix_rejected_usage_events_env_seq (environment, seq), newest first. */
  async rejectedEvents(environmentId: string, page: Page): Promise<PageResult<RejectedEvent>> {
    const rows: (Omit<RejectedUsageEventRow, "seq" | "environment_id" | "received_at"> & { received_at: unknown })[] = await this.sql.query(
      `SELECT received_at, idempotency_key, subject_id, event_name, event_time, reason, message, field FROM rejected_usage_events WHERE environment_id = ? ORDER BY seq DESC LIMIT ${Number(page.limit) + 1} OFFSET ${Number(page.offset)}`,
      [environmentId],
    );
    return toPageResult(
      rows.map((r) => ({
        receivedAt: fromDbTime(r.received_at),
        idempotencyKey: r.idempotency_key,
        subjectId: r.subject_id,
        eventName: r.event_name,
        timestamp: r.event_time,
        reason: r.reason,
        message: r.message,
        field: r.field,
      })),
      page,
    );
  }

  /** The database refused a value (see isRefusedValue), rather than being unreachable or busy. */
  failedOnData(err: unknown): boolean {
    return isRefusedValue(err, this.sql.dialect);
  }

  /** The database unreachable, or past its time limit (see isUnavailable). */
  failedUnreachable(err: unknown): boolean {
    return isUnavailable(err);
  }

  async rollups(metricId: string, subjectId: string, from: number, to: number, grain: Grain = "hour"): Promise<StoredRollup[]> {
    const table = TOTALS_TABLE[grain];
    const rows: {
      bucket_start: unknown;
      dims: unknown;
      sum_value: unknown;
      event_count: unknown;
      max_value: unknown;
      last_value: unknown;
      last_at: unknown;
      last_key: string | null;
    }[] = await this.sql.query(
      `SELECT bucket_start, dims, sum_value, event_count, max_value, last_value, last_at, last_key FROM ${table} WHERE metric_id = ? AND subject_id = ? AND bucket_start >= ? AND bucket_start < ?`,
      [metricId, subjectId, dbTime(new Date(from)), dbTime(new Date(to))],
    );
    return rows.map((r) => ({
      bucketStart: fromDbTime(r.bucket_start).getTime(),
      dims: fromJsonText<Record<string, string>>(r.dims),
      sum: String(r.sum_value),
      count: String(r.event_count),
      max: r.max_value === null ? null : String(r.max_value),
      last: r.last_at === null || r.last_value === null ? null : { at: fromDbTime(r.last_at).getTime(), key: r.last_key ?? "", value: String(r.last_value) },
    }));
  }

  async totalsByDims(metricId: string, subjectId: string, from: number, to: number, grain: Grain): Promise<StoredTotal[]> {
    // MySQL: with the other subjects' reads of this turn, in one statement (usage-totals.ts).
    if (this.totals) return this.totals.totalsByDims(metricId, subjectId, from, to, grain);
    // Exact on both stores: DECIMAL arithmetic on MySQL, decimal-text aggregates on SQLite.
    const [sum, max] = this.sql.dialect === "mysql" ? ["SUM", "MAX"] : ["dec_sum", "dec_max_of"];
    const rows: { dims: unknown; sum_value: unknown; event_count: unknown; max_value: unknown }[] = await this.sql.query(
      `SELECT MIN(dims) AS dims, ${sum}(sum_value) AS sum_value, ${sum}(event_count) AS event_count, ${max}(max_value) AS max_value FROM ${TOTALS_TABLE[grain]} WHERE metric_id = ? AND subject_id = ? AND bucket_start >= ? AND bucket_start < ? GROUP BY dims_hash`,
      [metricId, subjectId, dbTime(new Date(from)), dbTime(new Date(to))],
    );
    return rows.map((r) => ({
      dims: fromJsonText<Record<string, string>>(r.dims),
      sum: String(r.sum_value),
      count: String(r.event_count),
      max: r.max_value === null ? null : String(r.max_value),
    }));
  }

  /** Events accepted per hour of arrival in [from, to), hours without events left out. */
  async ingestedPerHour(environmentId: string, from: Date, to: Date): Promise<{ hour: Date; accepted: number }[]> {
    const rows: { hour: unknown; accepted: unknown }[] = await this.sql.query("SELECT hour, accepted FROM environment_ingest_hours WHERE environment_id = ? AND hour >= ? AND hour < ? ORDER BY hour", [
      environmentId,
      dbTime(from),
      dbTime(to),
    ]);
    return rows.map((r) => ({ hour: fromDbTime(r.hour), accepted: Number(r.accepted) }));
  }

  /** Over ix_usage_events_env_seq (environment, seq), newest first. */
  async recentEvents(environmentId: string, page: Page): Promise<PageResult<StoredEvent>> {
    // limit and offset are checked integers (checkPage), written into the statement.
    const rows: { id: string; idempotency_key: string; subject_id: string; event_name: string; occurred_at: unknown; created_at: unknown; data: unknown }[] = await this.sql.query(
      `SELECT id, idempotency_key, subject_id, event_name, occurred_at, created_at, data FROM usage_events WHERE environment_id = ? ORDER BY seq DESC LIMIT ${Number(page.limit) + 1} OFFSET ${Number(page.offset)}`,
      [environmentId],
    );
    return toPageResult(
      rows.map((r) => ({
        id: r.id,
        idempotencyKey: r.idempotency_key,
        subjectId: r.subject_id,
        eventName: r.event_name,
        occurredAt: fromDbTime(r.occurred_at),
        createdAt: fromDbTime(r.created_at),
        data: fromJsonText<Record<string, unknown>>(r.data),
      })),
      page,
    );
  }

  async uniqueCounts(metricId: string, subjectId: string, reads: readonly LevelRead[], byDims: boolean): Promise<StoredUniqueCount[]> {
    const out: StoredUniqueCount[] = [];
    // Up to 50 reads per statement (a summary's day buckets, for one): one round trip each.
    for (let i = 0; i < reads.length; i += 50) {
      const [sql, params] = countStatement(metricId, subjectId, reads.slice(i, i + 50), byDims);
      const rows: { r: unknown; dims: unknown; n: unknown }[] = await this.sql.query(sql, [...params]);
      for (const row of rows) out.push({ read: i + Number(row.r), dims: row.dims == null ? null : fromJsonText<Record<string, string>>(row.dims), count: Number(row.n) });
    }
    return out;
  }

  async uniquePairs(metricId: string, subjectId: string, read: LevelRead): Promise<{ dims: Record<string, string>; valueKey: string }[]> {
    const [sql, params] = pairsStatement(metricId, subjectId, read);
    const rows: { dims: unknown; value_key: string }[] = await this.sql.query(sql, [...params]);
    return rows.map((r) => ({ dims: fromJsonText<Record<string, string>>(r.dims), valueKey: r.value_key }));
  }

  async rawEvents(subjectId: string, eventName: string, from: number, to: number): Promise<RawEvent[]> {
    const rows: { occurred_at: unknown; idempotency_key: string; data: unknown }[] = await this.sql.query(
      "SELECT occurred_at, idempotency_key, data FROM usage_events WHERE subject_id = ? AND event_name = ? AND occurred_at >= ? AND occurred_at <= ?",
      [subjectId, eventName, dbTime(new Date(from)), dbTime(new Date(to))],
    );
    return rows.map((r) => ({ occurredAt: fromDbTime(r.occurred_at).getTime(), idempotencyKey: r.idempotency_key, data: fromJsonText(r.data) }));
  }

  async lastSeq(environmentId: string): Promise<string> {
    const [row]: { s: unknown }[] = await this.sql.query(LAST_SEQ_SQL, [environmentId]);
    return row?.s == null ? "0" : String(row.s);
  }

  async eventsSince(environmentId: string, subjectId: string, eventName: string, after: string, from: number, to: number, most: number): Promise<EventsSince | undefined> {
    const [sql, params] = eventsSinceStatement(environmentId, subjectId, eventName, after, from, to, most);
    const rows: { k: unknown; seq: unknown; occurred_at: unknown; data: unknown }[] = await this.sql.query(sql, [...params]);
    let last = BigInt(after);
    const events: EventsSince["events"] = [];
    for (const r of rows) {
      if (r.seq == null) continue;
      const k = Number(r.k);
      if (k === 2) {
        if (Number(r.seq) > most) return undefined;
        continue;
      }
      const seq = BigInt(String(r.seq));
      if (seq > last) last = seq;
      if (k === 0) events.push({ seq: String(r.seq), occurredAt: fromDbTime(r.occurred_at).getTime(), data: fromJsonText(r.data) });
    }
    return { last: String(last), events };
  }
}
