/**
 * Metering use cases: ingesting events (one, a batch, or a stream, all through one group-commit
 * path) and summarising a pricing metric over a period from hourly totals plus the raw events of
 * the partial hours at its edges.
 */
import { createHash } from "node:crypto";
import type { PricingMetricService } from "../catalog/metrics.js";
import type { AggregationType, PricingMetric } from "../catalog/types.js";
import { coordinatesKey } from "../catalog/rates.js";
import { type BillingError, Violations } from "../errors.js";
import { type Decimal, dec, formatDecimal } from "../money.js";
import type { SubjectService } from "../subjects.js";
import type { Caller } from "../tenancy.js";
import { checkInstant } from "../time.js";
import { type PageResult, checkPage } from "../pagination.js";
import { nextTurn } from "../yielding.js";
import { type Agg, aggOfEvent, combine, coordinatesOf, negated, valueOf } from "./aggregate.js";
import { type Grain, MAX_BATCH, type Outcome, type PreparedEvent, type UsageEventInput, ingestDecision, prepare } from "./events.js";
import { GroupCommit } from "./group-commit.js";
import { UniqueMeter } from "./unique-meter.js";
import { uniqueCounts } from "./unique-summary.js";
import { type RejectedEvent, type StoredEvent, type StoredRollup, type UsageStore, rejectedEvent } from "./usage-store.js";
import { GRANULARITIES, type Granularity, HOUR, MINUTE, type Range, bucketCount, buckets, contains, floorTo, splitByHours } from "./periods.js";

/** The newest rejected events an environment keeps (older ones are pruned as new ones come). */
export const REJECTED_KEPT = 10_000;

export interface IngestOptions {
  /** Ingest transactions of one environment in flight at once (group commit). */
  maxInFlightPerEnvironment: number;
  /** Told of each ingest call's outcomes (the metrics). */
  outcomes?: (accepted: number, duplicate: number, rejected: number) => void;
  /** Told when rejected events could not be stored (the ingest call answers as usual). */
  rejectedNotStored?: (err: unknown) => void;
  /** Told of each group commit: its environment, events, the calls sharing it and its duration (ms). */
  committed?: (environmentId: string, events: number, requests: number, ms: number) => void;
}

/** A batch at least this large lets the event loop turn between checking and writing it. */
const LARGE_BATCH = 100;

export class IngestService {
  private readonly batchers = new Map<string, GroupCommit<PreparedEvent, Outcome>>();

  constructor(
    private readonly store: UsageStore,
    private readonly now: () => Date,
    private readonly options: IngestOptions = { maxInFlightPerEnvironment: 2 },
  ) {}

  /**
   * Events the environment ingested (accepted) per hour over the `hours` hours up to the hour of
   * `now`, one entry per hour, 0 for an hour without any (the dashboard's chart).
   */
  async ingestedPerHour(caller: Caller, hours: number): Promise<{ hour: Date; accepted: number }[]> {
    const end = (Math.floor(this.now().getTime() / HOUR) + 1) * HOUR;
    const start = end - hours * HOUR;
    const found = new Map((await this.store.ingestedPerHour(caller.environmentId, new Date(start), new Date(end))).map((r) => [r.hour.getTime(), r.accepted]));
    return Array.from({ length: hours }, (_, i) => ({ hour: new Date(start + i * HOUR), accepted: found.get(start + i * HOUR) ?? 0 }));
  }

  /** The environment's stored events, newest first (the operator dashboard's events page). */
  async recentEvents(caller: Caller, limit?: number, offset?: number): Promise<PageResult<StoredEvent>> {
    const v = new Violations();
    const page = checkPage(limit, offset, v);
    v.throwIfAny();
    return this.store.recentEvents(caller.environmentId, page);
  }

  /** The environment's rejected events with their reasons, newest first (the dashboard's events page). */
  async rejectedEvents(caller: Caller, limit?: number, offset?: number): Promise<PageResult<RejectedEvent>> {
    const v = new Violations();
    const page = checkPage(limit, offset, v);
    v.throwIfAny();
    return this.store.rejectedEvents(caller.environmentId, page);
  }

  private batcher(environmentId: string): GroupCommit<PreparedEvent, Outcome> {
    let b = this.batchers.get(environmentId);
    if (!b) {
      b = new GroupCommit(
        (events) => this.store.ingest(environmentId, events, ingestDecision),
        MAX_BATCH,
        this.options.maxInFlightPerEnvironment,
        (err) => this.store.failedOnData(err),
        this.options.committed && ((events, requests, ms) => this.options.committed?.(environmentId, events, requests, ms)),
        (err) => this.store.failedUnreachable(err),
      );
      this.batchers.set(environmentId, b);
    }
    return b;
  }

  /**
   * Ingests events; each outcome is final (committed) when the promise resolves. `pathOf(i)` is
   * the field-path prefix of event i in the request ("" for a single event, "events[i]." in a batch).
   */
  async ingest(caller: Caller, inputs: readonly UsageEventInput[], pathOf: (i: number) => string): Promise<Outcome[]> {
    const now = this.now().getTime();
    const outcomes: (Outcome | undefined)[] = new Array(inputs.length);
    const ready: PreparedEvent[] = [];
    inputs.forEach((input, i) => {
      const p = prepare(input, i, pathOf(i), now);
      if ("index" in p) ready.push(p);
      else outcomes[i] = { status: "rejected", error: p as BillingError };
    });
    // Checking a large batch took its share of the event loop; let other requests in before the
    // transaction takes the next (DESIGN §10: no request holds the loop for long).
    if (inputs.length >= LARGE_BATCH) await nextTurn();
    if (ready.length > 0) {
      const results = await this.batcher(caller.environmentId).submit(ready);
      ready.forEach((e, k) => {
        outcomes[e.index] = results[k];
      });
    }
    // The rejected ones are kept for the operator (one insert per call); failing to keep them
    // never fails the call, which has its answer already.
    const rejected: RejectedEvent[] = [];
    const receivedAt = this.now();
    (outcomes as Outcome[]).forEach((o, i) => {
      if (o.status === "rejected") rejected.push(rejectedEvent(inputs[i] as UsageEventInput, o.error, receivedAt));
    });
    if (rejected.length > 0) {
      try {
        await this.store.recordRejected(caller.environmentId, rejected, REJECTED_KEPT);
      } catch (err) {
        this.options.rejectedNotStored?.(err);
      }
    }
    if (this.options.outcomes) {
      let accepted = 0;
      let duplicate = 0;
      for (const o of outcomes as Outcome[]) {
        if (o.status === "accepted") accepted++;
        else if (o.status === "duplicate") duplicate++;
      }
      this.options.outcomes(accepted, duplicate, inputs.length - accepted - duplicate);
    }
    return outcomes as Outcome[];
  }

  /** Checks a batch's size; the events themselves are judged one by one. */
  checkBatch(count: number): void {
    const v = new Violations();
    if (count === 0) v.add("events", "is required: at least one event");
    if (count > MAX_BATCH) v.add("events", `must have at most ${MAX_BATCH} events (got ${count})`);
    v.throwIfAny();
  }
}

export interface SummaryInput {
  period?: { start?: Date; end?: Date; inclusiveStart?: boolean; inclusiveEnd?: boolean };
  subjectId: string;
  dimensions: string[];
  granularity: string;
}

export interface Summary {
  id: string;
  pricingMetricId: string;
  subjectId: string;
  period: Range;
  coordinates: Record<string, string>;
  value: string | null;
}

export const MAX_BUCKETS = 10_000;

function fromStored(r: StoredRollup): Agg {
  return {
    sum: dec(r.sum),
    count: dec(r.count),
    max: r.max === null ? null : dec(r.max),
    last: r.last ? { at: r.last.at, key: r.last.key, value: dec(r.last.value) } : null,
  };
}

export class SummaryService {
  /**
   * Hourly totals for the whole hours of a range, minute totals for the whole minutes of its edge
   * hours, raw events only for the partial minutes at its very edges: the cost does not grow with
   * the number of events.
   */
  private async parts(metric: PricingMetric, subjectId: string, r: Range, oneBucket: boolean, carrying?: string): Promise<{ at: number; dims: Record<string, string>; agg: Agg }[]> {
    const parts: { at: number; dims: Record<string, string>; agg: Agg }[] = [];
    // Into one bucket, a metric other than `last` needs only each combination's totals: the
    // database adds the rows up and answers a row per combination, so a month of a busy
    // subject's hours costs about what a quiet one's does. (`last` needs each row's latest.)
    const addedUp = oneBucket && metric.aggregation.type !== "last";
    const totals = async (from: number, to: number, grain: Grain) => {
      if (to <= from) return;
      if (addedUp) {
        for (const t of await this.store.totalsByDims(metric.id, subjectId, from, to, grain)) {
          parts.push({ at: from, dims: t.dims, agg: { sum: dec(t.sum), count: dec(t.count), max: t.max === null ? null : dec(t.max), last: null } });
        }
        return;
      }
      for (const row of await this.store.rollups(metric.id, subjectId, from, to, grain)) {
        parts.push({ at: row.bucketStart, dims: row.dims, agg: fromStored(row) });
      }
    };
    const raw = async (edge: Range, sign: 1 | -1) => {
      for (const e of await this.store.rawEvents(subjectId, metric.eventName, edge.start, edge.end)) {
        // Only what the totals hold: a unique_count metric's count is of the events carrying its value.
        if (!contains(edge, e.occurredAt) || (carrying !== undefined && e.data[carrying] === undefined)) continue;
        const agg = aggOfEvent(metric, e.data, e.occurredAt, e.idempotencyKey);
        if (agg) parts.push({ at: sign === 1 ? e.occurredAt : r.start, dims: coordinatesOf(metric.dimensions, e.data), agg: sign === 1 ? agg : negated(agg) });
      }
    };
    // A sum or count can take a partial minute at the range's start as its whole minute's totals
    // less the events before the start: a subscription's usage starts mid-minute, and a busy
    // subject's first minute held thousands of events that every billing-state read added up
    // one by one (what precedes the start is usually a few, or none).
    const subtractable = addedUp && (metric.aggregation.type === "sum" || metric.aggregation.type === "count");
    // The reads are independent: they go to the database at once (a billing-state read made up to
    // six round trips one after the other), and their parts add up in any order.
    const reads: Promise<void>[] = [];
    const hours = splitByHours(r, HOUR);
    reads.push(totals(hours.fullFrom, hours.fullTo, "hour"));
    for (const hourEdge of hours.edges) {
      const minutes = splitByHours(hourEdge, MINUTE);
      let fullFrom = minutes.fullFrom;
      for (const edge of minutes.edges) {
        const minute = Math.floor(edge.start / MINUTE) * MINUTE;
        if (subtractable && edge.start > minute && edge.end === minute + MINUTE && !edge.inclusiveEnd) {
          // The whole minute with the whole minutes after it, when there are any (a start edge
          // ends where they begin).
          if (minutes.fullTo > minutes.fullFrom) fullFrom = minute;
          else reads.push(totals(minute, minute + MINUTE, "minute"));
          // Before the start: [minute, start) when the start is in the range, [minute, start] when not.
          reads.push(raw({ start: minute, end: edge.start, inclusiveStart: true, inclusiveEnd: !edge.inclusiveStart }, -1));
        } else {
          reads.push(raw(edge, 1));
        }
      }
      reads.push(totals(fullFrom, minutes.fullTo, "minute"));
    }
    await Promise.all(reads);
    return parts;
  }

  /**
   * The metric's value for a subject over [from, to), per combination of `groupBy` (a subset of
   * its dimensions); only combinations with events. What invoices and billing state read.
   */
  async measure(metric: PricingMetric, subjectId: string, from: Date, to: Date, groupBy: readonly string[]): Promise<{ coordinates: Record<string, string>; value: Decimal }[]> {
    if (to.getTime() <= from.getTime()) return [];
    const range: Range = { start: from.getTime(), end: to.getTime(), inclusiveStart: true, inclusiveEnd: false };
    if (metric.aggregation.type === "unique_count") {
      const groups = await this.unique.measure(metric, subjectId, range, groupBy);
      return groups.map((g) => ({ coordinates: g.coordinates, value: dec(g.count) }));
    }
    const groups = new Map<string, { coordinates: Record<string, string>; agg: Agg }>();
    for (const part of await this.parts(metric, subjectId, range, true)) {
      const coordinates = coordinatesOf(groupBy, part.dims);
      const key = coordinatesKey(coordinates);
      const prev = groups.get(key);
      groups.set(key, { coordinates, agg: prev ? combine(prev.agg, part.agg) : part.agg });
    }
    const out: { coordinates: Record<string, string>; value: Decimal }[] = [];
    for (const g of groups.values()) {
      const v = valueOf(metric.aggregation.type, g.agg);
      if (v !== null) out.push({ coordinates: g.coordinates, value: dec(v) });
    }
    return out;
  }

  /** unique_count values of billing periods, reused while the period's events are unchanged. */
  private readonly unique: UniqueMeter;

  constructor(
    private readonly store: UsageStore,
    private readonly metrics: PricingMetricService,
    private readonly subjects: SubjectService,
  ) {
    this.unique = new UniqueMeter(store, (metric, subjectId, range) => this.eventsWithValue(metric, subjectId, range));
  }

  /** A unique_count metric's events carrying its value in a range, as its totals count them (a decimal string). */
  async eventsWithValue(metric: PricingMetric, subjectId: string, range: Range): Promise<string> {
    const counted = { ...metric, aggregation: { type: "count" as const, valueField: null } };
    let n = dec(0);
    for (const part of await this.parts(counted, subjectId, range, true, metric.aggregation.valueField ?? "")) n = n.plus(part.agg.count);
    return formatDecimal(n);
  }

  async summarize(caller: Caller, metricId: string, input: SummaryInput): Promise<Summary[]> {
    const v = new Violations();
    const p = input.period;
    if (!p) v.add("period", "is required");
    else {
      if (!p.start) v.at("period").add("start", "is required");
      if (!p.end) v.at("period").add("end", "is required");
      const start = checkInstant(p.start, v.at("period"), "start");
      const end = checkInstant(p.end, v.at("period"), "end");
      if (start && end && end.getTime() < start.getTime()) v.at("period").add("end", "must not be before period.start");
    }
    if (input.subjectId === "") v.add("subject_id", "is required");
    const granularity = input.granularity === "" ? undefined : (input.granularity as Granularity);
    if (granularity && !GRANULARITIES.includes(granularity)) v.add("period_granularity", "must be hour, day or week");
    const metric = await this.metrics.get(caller, metricId);
    const seen = new Set<string>();
    input.dimensions.forEach((d, i) => {
      if (!metric.dimensions.includes(d)) {
        v.at("dimensions")
          .at(i)
          .add("", `is not a dimension of pricing metric ${metric.id} (its dimensions: ${metric.dimensions.join(", ") || "none"})`);
      } else if (seen.has(d))
        v.at("dimensions")
          .at(i)
          .add("", `duplicates ${JSON.stringify(d)}`);
      seen.add(d);
    });
    const range: Range | undefined =
      p?.start && p.end && v.empty ? { start: p.start.getTime(), end: p.end.getTime(), inclusiveStart: p.inclusiveStart ?? true, inclusiveEnd: p.inclusiveEnd ?? false } : undefined;
    if (range && v.empty && bucketCount(range, granularity) > MAX_BUCKETS) {
      v.add("period_granularity", `makes more than ${MAX_BUCKETS} buckets for this period; use a coarser granularity or a shorter period`);
    }
    v.throwIfAny();
    const subject = await this.subjects.get(caller, input.subjectId);
    const r = range as Range;

    const list = buckets(r, granularity);
    const groups =
      metric.aggregation.type === "unique_count"
        ? (await uniqueCounts(this.store, metric, subject.id, list, input.dimensions)).map((gs) => gs.map((g) => ({ key: g.key, coordinates: g.coordinates, value: String(g.count) })))
        : await this.bucketValues(metric, subject.id, r, granularity, list, input.dimensions);
    const out: Summary[] = [];
    list.forEach((bucket, i) => {
      const found = [...(groups[i] ?? [])].sort((a, b) => (a.key < b.key ? -1 : 1));
      const id = (key: string) => `pms_${createHash("sha256").update(`${metric.id}|${subject.id}|${bucket.start}|${bucket.end}|${key}`).digest("base64url").slice(0, 22)}`;
      if (found.length === 0) {
        out.push({ id: id(""), pricingMetricId: metric.id, subjectId: subject.id, period: bucket, coordinates: {}, value: null });
        return;
      }
      for (const g of found) out.push({ id: id(g.key), pricingMetricId: metric.id, subjectId: subject.id, period: bucket, coordinates: g.coordinates, value: g.value });
    });
    return out;
  }

  /** Each bucket's values per combination of `dimensions`, from the totals (every aggregation but unique_count). */
  private async bucketValues(
    metric: PricingMetric,
    subjectId: string,
    r: Range,
    granularity: Granularity | undefined,
    list: Range[],
    dimensions: readonly string[],
  ): Promise<{ key: string; coordinates: Record<string, string>; value: string | null }[][]> {
    const parts = await this.parts(metric, subjectId, r, granularity === undefined);
    const byBucket = list.map(() => new Map<string, { coordinates: Record<string, string>; agg: Agg }>());
    const bucketIndex = (t: number): number => {
      if (!granularity) return 0;
      // Buckets are consecutive and aligned: find by the aligned start.
      const aligned = floorTo(granularity, t);
      let lo = 0;
      let hi = list.length - 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (floorTo(granularity, (list[mid] as Range).start) <= aligned) lo = mid;
        else hi = mid - 1;
      }
      return lo;
    };
    for (const part of parts) {
      const i = bucketIndex(part.at);
      const coords = coordinatesOf(dimensions, part.dims);
      const key = coordinatesKey(coords);
      const m = byBucket[i] as Map<string, { coordinates: Record<string, string>; agg: Agg }>;
      const prev = m.get(key);
      m.set(key, { coordinates: coords, agg: prev ? combine(prev.agg, part.agg) : part.agg });
    }
    // A combination whose events all fell before the range's start nets to none (parts: a partial first minute).
    return byBucket.map((m) =>
      [...m.entries()].filter(([, g]) => !g.agg.count.isZero()).map(([key, g]) => ({ key, coordinates: g.coordinates, value: valueOf(metric.aggregation.type as AggregationType, g.agg) })),
    );
  }
}
