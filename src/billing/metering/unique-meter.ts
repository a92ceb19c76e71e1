/**
 * A unique_count metric's value over a billing period per combination, as billing state and
 * invoices read it again and again (DESIGN §13). Counting a period's distinct values costs a
 * COUNT(DISTINCT) over its level's rows (unique-summary.ts), so the meter keeps, per period, the
 * distinct values themselves with two marks: the number of the metric's events in the period it
 * accounts for, and an event sequence number W every one of those events is at or below. A read
 * then adds only the events stored after W and checks the period's event count (read from the
 * totals, as cheap as a sum) against the kept count plus the events added.
 *
 * Why that is exact. Kept: a set A of events in the period, |A| = the kept count, all with
 * sequence numbers ≤ W, and values(A) ⊆ kept values ⊆ values of events in the period (events
 * are never deleted or changed). A read takes N, the events after W in the period (disjoint from
 * A), then the period's event count C, which counts every event committed before it began, each
 * once. A ∪ N was committed before C's read, so A ∪ N ⊆ C's events; |A| + |N| = C means they are
 * the same set, and the kept values (with N's) are exactly C's events' values. Otherwise an event
 * came after N was read, or one committed late below W (sequence numbers are taken before
 * commit): the read tries once more, then counts everything again. A late event (occurred in
 * the past, stored now) has a new sequence number and is added like any other.
 *
 * Filling: C first, then W (the environment's last sequence number) and the values: every event
 * C counted is at or below W and among the values; the values may hold a few events after C's
 * read, which are real events of the period. A period with more values than a set may keep
 * keeps its count only, reused while the event count is unchanged.
 */
import type { PricingMetric } from "../catalog/types.js";
import { coordinatesOf } from "./aggregate.js";
import type { Range } from "./periods.js";
import { type Groups, type UniqueGroup, add, countsOf, uniqueCounts, uniqueSets } from "./unique-summary.js";
import { inclusiveMs, valueKeyOf } from "./unique.js";
import type { UsageStore } from "./usage-store.js";

export interface UniqueMeterLimits {
  /** Periods kept (the least recently read dropped first beyond this). */
  periods: number;
  /** The most values one period's set may hold (beyond, only its count is kept). */
  setValues: number;
  /** The most values all kept sets hold together. */
  totalValues: number;
  /** Events the environment may have stored since W for a read to add them (beyond, counted again). */
  behind: number;
}

/** At most about 25 MB of values (about 120 bytes each on V8; a server runs in a 192 MB heap). */
export const UNIQUE_METER_LIMITS: UniqueMeterLimits = { periods: 10_000, setValues: 100_000, totalValues: 200_000, behind: 5_000 };

type Kept = { kind: "sets"; events: bigint; seq: string; groups: Groups; size: number } | { kind: "count"; events: bigint; groups: UniqueGroup[] };

/** How a read was answered (for tests and benchmarks). */
export type MeterPath = "kept" | "added" | "counted";

export class UniqueMeter {
  private readonly kept = new Map<string, Kept>();
  /** Per period, the read in progress: reads of one period take turns (each changes its kept state). */
  private readonly turns = new Map<string, Promise<unknown>>();
  private values = 0;
  /** How the last read was answered. */
  lastPath: MeterPath = "counted";

  constructor(
    private readonly store: UsageStore,
    /** The metric's events carrying its value in a range (from the totals), as a decimal string. */
    private readonly eventCount: (metric: PricingMetric, subjectId: string, range: Range) => Promise<string>,
    private readonly limits: UniqueMeterLimits = UNIQUE_METER_LIMITS,
  ) {}

  async measure(metric: PricingMetric, subjectId: string, range: Range, groupBy: readonly string[]): Promise<UniqueGroup[]> {
    const key = JSON.stringify([metric.id, subjectId, range.start, range.end, range.inclusiveStart, range.inclusiveEnd, groupBy]);
    const before = this.turns.get(key) ?? Promise.resolve();
    const turn = before.then(
      () => this.read(key, metric, subjectId, range, groupBy),
      () => this.read(key, metric, subjectId, range, groupBy),
    );
    this.turns.set(key, turn);
    try {
      return await turn;
    } finally {
      if (this.turns.get(key) === turn) this.turns.delete(key);
    }
  }

  private async read(key: string, metric: PricingMetric, subjectId: string, range: Range, groupBy: readonly string[]): Promise<UniqueGroup[]> {
    const hit = this.kept.get(key);
    if (hit) {
      // Most recently read last (the first dropped is the least recently read).
      this.kept.delete(key);
      this.kept.set(key, hit);
    }
    if (hit?.kind === "sets") {
      const path = await this.catchUp(hit, metric, subjectId, range, groupBy);
      if (path) {
        this.lastPath = path;
        this.trim();
        if (hit.size <= this.limits.setValues) return countsOf(hit.groups);
        const groups = countsOf(hit.groups);
        this.forget(key);
        this.kept.set(key, { kind: "count", events: hit.events, groups });
        return groups;
      }
    } else if (hit?.kind === "count" && BigInt(await this.eventCount(metric, subjectId, range)) === hit.events) {
      this.lastPath = "kept";
      return hit.groups;
    }
    this.lastPath = "counted";
    return this.fill(key, metric, subjectId, range, groupBy, hit);
  }

  /** Adds the events stored after the kept W: the path when the count then agrees, undefined when it does not (twice). */
  private async catchUp(k: Kept & { kind: "sets" }, metric: PricingMetric, subjectId: string, range: Range, groupBy: readonly string[]): Promise<MeterPath | undefined> {
    const ms = inclusiveMs(range);
    if (!ms) return undefined;
    const field = metric.aggregation.valueField ?? "";
    let added = false;
    for (let round = 0; round < 2; round++) {
      const since = await this.store.eventsSince(metric.environmentId, subjectId, metric.eventName, k.seq, ms.lo, ms.hi, this.limits.behind);
      if (!since) return undefined;
      for (const e of since.events) {
        const value = e.data[field];
        if (value === undefined || e.occurredAt < ms.lo || e.occurredAt > ms.hi) continue;
        k.events += 1n;
        added = true;
        if (add(k.groups, coordinatesOf(groupBy, e.data), valueKeyOf(value))) {
          k.size += 1;
          this.values += 1;
        }
      }
      k.seq = since.last;
      if (BigInt(await this.eventCount(metric, subjectId, range)) === k.events) return added ? "added" : "kept";
    }
    return undefined;
  }

  /** Counts the period again: its values kept when they may be (known few), its count otherwise. */
  private async fill(key: string, metric: PricingMetric, subjectId: string, range: Range, groupBy: readonly string[], prev: Kept | undefined): Promise<UniqueGroup[]> {
    this.forget(key);
    const events = BigInt(await this.eventCount(metric, subjectId, range));
    const limit = this.limits.setValues;
    const knownFew = events <= BigInt(limit) || (prev !== undefined && countOf(prev) <= limit);
    if (knownFew) {
      const [seq, groups] = await Promise.all([this.store.lastSeq(metric.environmentId), uniqueSets(this.store, metric, subjectId, range, groupBy)]);
      let size = 0;
      for (const g of groups.values()) size += g.values.size;
      const counts = countsOf(groups);
      if (size <= limit) {
        this.kept.set(key, { kind: "sets", events, seq, groups, size });
        this.values += size;
      } else this.kept.set(key, { kind: "count", events, groups: counts });
      this.trim();
      return counts;
    }
    const [counts = []] = await uniqueCounts(this.store, metric, subjectId, [range], groupBy);
    this.kept.set(key, { kind: "count", events, groups: counts });
    this.trim();
    return counts;
  }

  private forget(key: string): void {
    const k = this.kept.get(key);
    if (k?.kind === "sets") this.values -= k.size;
    this.kept.delete(key);
  }

  /** Drops the least recently read periods beyond the limits. */
  private trim(): void {
    while (this.kept.size > this.limits.periods || this.values > this.limits.totalValues) {
      const oldest = this.kept.keys().next().value;
      if (oldest === undefined) return;
      this.forget(oldest);
    }
  }
}

/** The distinct values a kept period holds (over all its groups). */
function countOf(k: Kept): number {
  if (k.kind === "sets") return k.size;
  let n = 0;
  for (const g of k.groups) n += g.count;
  return n;
}
