/**
 * Reading a unique_count metric over ranges (a period, or a summary's buckets): each range's
 * distinct values per combination of the dimensions asked for, from the distinct values' levels
 * where the range spans days, from the raw events where it lies within one UTC day (unique.ts).
 */
import type { PricingMetric } from "../catalog/types.js";
import { coordinatesKey } from "../catalog/rates.js";
import { coordinatesOf } from "./aggregate.js";
import type { Range } from "./periods.js";
import { type LevelRead, inclusiveMs, planRead, valueKeyOf } from "./unique.js";
import type { UsageStore } from "./usage-store.js";

export interface UniqueGroup {
  key: string;
  coordinates: Record<string, string>;
  count: number;
}

/** Per group key, its coordinates and distinct value keys. */
export type Groups = Map<string, { coordinates: Record<string, string>; values: Set<string> }>;

/** Adds a value to its group's set: whether it was new there. */
export function add(groups: Groups, coordinates: Record<string, string>, valueKey: string): boolean {
  const key = coordinatesKey(coordinates);
  let g = groups.get(key);
  if (!g) {
    g = { coordinates, values: new Set() };
    groups.set(key, g);
  }
  const before = g.values.size;
  g.values.add(valueKey);
  return g.values.size > before;
}

/** The groups' counts (a group without values left out). */
export function countsOf(groups: Groups): UniqueGroup[] {
  const out: UniqueGroup[] = [];
  for (const [key, g] of groups) if (g.values.size > 0) out.push({ key, coordinates: g.coordinates, count: g.values.size });
  return out;
}

/**
 * The distinct values themselves of `metric` for a subject in one range, per combination of
 * `groupBy`: the distinct-value rows of the range's level read, or its raw events within one day.
 */
export async function uniqueSets(store: UsageStore, metric: PricingMetric, subjectId: string, range: Range, groupBy: readonly string[]): Promise<Groups> {
  const groups: Groups = new Map();
  const ms = inclusiveMs(range);
  if (!ms) return groups;
  const plan = planRead(ms.lo, ms.hi);
  if ("raw" in plan) {
    const field = metric.aggregation.valueField ?? "";
    for (const e of await store.rawEvents(subjectId, metric.eventName, ms.lo, ms.hi)) {
      const value = e.data[field];
      if (value !== undefined && e.occurredAt >= ms.lo && e.occurredAt <= ms.hi) add(groups, coordinatesOf(groupBy, e.data), valueKeyOf(value));
    }
    return groups;
  }
  for (const p of await store.uniquePairs(metric.id, subjectId, plan)) add(groups, coordinatesOf(groupBy, p.dims), p.valueKey);
  return groups;
}

/**
 * The distinct values of `metric` for a subject in each range, per combination of `groupBy` (a
 * subset of its dimensions), only combinations with at least one value; in the ranges' order.
 */
export async function uniqueCounts(store: UsageStore, metric: PricingMetric, subjectId: string, ranges: readonly Range[], groupBy: readonly string[]): Promise<UniqueGroup[][]> {
  const out: Map<string, UniqueGroup>[] = ranges.map(() => new Map());
  const put = (i: number, coordinates: Record<string, string>, count: number) => {
    if (count <= 0) return;
    const key = coordinatesKey(coordinates);
    (out[i] as Map<string, UniqueGroup>).set(key, { key, coordinates, count });
  };
  // The database counts per combination when the grouping is by all dimensions (or none); by
  // some of them only, a combination's values are gathered apart (rare: rates group by theirs).
  const all = groupBy.length === 0;
  const byDims = !all && metric.dimensions.every((d) => groupBy.includes(d));
  const levelReads: { i: number; read: LevelRead }[] = [];
  const rawReads: { i: number; lo: number; hi: number }[] = [];
  ranges.forEach((r, i) => {
    const ms = inclusiveMs(r);
    if (!ms) return;
    const plan = planRead(ms.lo, ms.hi);
    if ("raw" in plan) rawReads.push({ i, ...ms });
    else levelReads.push({ i, read: plan });
  });
  const reads: Promise<void>[] = [];
  if (levelReads.length > 0 && (all || byDims)) {
    reads.push(
      store
        .uniqueCounts(
          metric.id,
          subjectId,
          levelReads.map((l) => l.read),
          byDims,
        )
        .then((rows) => {
          for (const row of rows) put((levelReads[row.read] as { i: number }).i, row.dims === null ? {} : coordinatesOf(groupBy, row.dims), row.count);
        }),
    );
  } else {
    for (const { i, read } of levelReads) {
      reads.push(
        store.uniquePairs(metric.id, subjectId, read).then((pairs) => {
          const groups: Groups = new Map();
          for (const p of pairs) add(groups, coordinatesOf(groupBy, p.dims), p.valueKey);
          for (const g of groups.values()) put(i, g.coordinates, g.values.size);
        }),
      );
    }
  }
  if (rawReads.length > 0) reads.push(fromRaw(store, metric, subjectId, rawReads, groupBy, put));
  await Promise.all(reads);
  return out.map((m) => [...m.values()]);
}

/** Ranges within one UTC day each (sorted, disjoint): one read of the raw events spanning them all. */
async function fromRaw(
  store: UsageStore,
  metric: PricingMetric,
  subjectId: string,
  rawReads: { i: number; lo: number; hi: number }[],
  groupBy: readonly string[],
  put: (i: number, coordinates: Record<string, string>, count: number) => void,
): Promise<void> {
  const sorted = [...rawReads].sort((a, b) => a.lo - b.lo);
  const field = metric.aggregation.valueField ?? "";
  const groups: Groups[] = sorted.map(() => new Map());
  const events = await store.rawEvents(subjectId, metric.eventName, (sorted[0] as { lo: number }).lo, (sorted[sorted.length - 1] as { hi: number }).hi);
  for (const e of events) {
    const value = e.data[field];
    if (value === undefined) continue;
    // The last range starting at or before the event, if the event is in it.
    let lo = 0;
    let hi = sorted.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((sorted[mid] as { lo: number }).lo <= e.occurredAt) lo = mid;
      else hi = mid - 1;
    }
    const r = sorted[lo] as { lo: number; hi: number };
    if (e.occurredAt < r.lo || e.occurredAt > r.hi) continue;
    add(groups[lo] as Groups, coordinatesOf(groupBy, e.data), valueKeyOf(value));
  }
  sorted.forEach((r, k) => {
    for (const g of (groups[k] as Groups).values()) put(r.i, g.coordinates, g.values.size);
  });
}
