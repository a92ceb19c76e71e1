/**
 * unique_count metrics (DESIGN §13): the number of distinct values of `value_field` among a
 * subject's events in a period, exact on both stores.
 *
 * A value is the event data value's text as stored (a JSON number arrives as its text: `5` and
 * `"5"` are one value, `5.0` another). Distinct counts cannot be added up from buckets, so each
 * event marks its value in buckets of 2^k UTC days (k = 0…6: one day to 64 days, aligned on
 * 1970-01-01), keeping the first and last instant of the value's events in each bucket. A period
 * whose first and last instants fall on different days reads one level: the bucket holding its
 * start counts a value whose last instant there is in the period, the bucket holding its end one
 * whose first instant is, and the buckets between count every value (exact: first and last bound
 * the value's events in the bucket). A period within one UTC day reads the raw events.
 */
import { hash } from "node:crypto";
import type { PricingMetric } from "../catalog/types.js";
import { coordinatesOf } from "./aggregate.js";
import { hashCoordinates } from "./coordinates.js";
import type { Range } from "./periods.js";

export const DAY = 86_400_000;
/** The coarsest level: buckets of 2^6 = 64 days. */
export const MAX_LEVEL = 6;
/** A value longer than this is keyed by its hash (the text is kept beside it). */
export const MAX_KEY_VALUE = 64;

/** One event's mark of its value in one bucket (its instant as first and last). */
export interface ValueMark {
  metricId: string;
  subjectId: string;
  level: number;
  /** The bucket's number: its first day (days since 1970-01-01) divided by 2^level. */
  bucket: number;
  dimsHash: string;
  dims: Record<string, string>;
  /** The value itself when at most MAX_KEY_VALUE characters; otherwise `~` and its SHA-256 (hex). */
  valueKey: string;
  /** The value's text when valueKey is its hash; null otherwise. */
  valueText: string | null;
  first: number;
  last: number;
}

/** The key a value is counted by: itself, or for a long one `~` + its SHA-256 (65 characters, so never a short value). */
export function valueKeyOf(value: string): string {
  return value.length <= MAX_KEY_VALUE ? value : `~${hash("sha256", value, "hex")}`;
}

/** The marks one event makes for each unique_count metric reading its name (none without the field). */
export function valueMarksOf(metrics: readonly PricingMetric[], subjectId: string, e: { eventName: string; data: Readonly<Record<string, string>>; occurredAt: number }): ValueMark[] {
  const out: ValueMark[] = [];
  for (const m of metrics) {
    if (m.eventName !== e.eventName || m.aggregation.type !== "unique_count") continue;
    const value = e.data[m.aggregation.valueField ?? ""];
    if (value === undefined) continue;
    const dims = coordinatesOf(m.dimensions, e.data);
    const dimsHash = hashCoordinates(dims);
    const valueKey = valueKeyOf(value);
    const valueText = valueKey === value ? null : value;
    const day = Math.floor(e.occurredAt / DAY);
    for (let level = 0; level <= MAX_LEVEL; level++) {
      out.push({ metricId: m.id, subjectId, level, bucket: Math.floor(day / 2 ** level), dimsHash, dims, valueKey, valueText, first: e.occurredAt, last: e.occurredAt });
    }
  }
  return out;
}

/** Merges marks of the same row (earliest first, latest last), sorted by key (a fixed lock order). */
export function mergeMarks(list: Iterable<ValueMark>): ValueMark[] {
  const byKey = new Map<string, ValueMark>();
  for (const m of list) {
    const key = `${m.metricId}|${m.subjectId}|${m.level}|${m.bucket}|${m.dimsHash}|${m.valueKey}`;
    const prev = byKey.get(key);
    byKey.set(key, prev ? { ...prev, first: Math.min(prev.first, m.first), last: Math.max(prev.last, m.last) } : m);
  }
  return [...byKey.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, m]) => m);
}

/**
 * What a period reads: the buckets `first`…`last` of one level, counting a value of bucket
 * `first` when its last instant is ≥ `lo` and of bucket `last` when its first instant is ≤ `hi`.
 */
export interface LevelRead {
  level: number;
  first: number;
  last: number;
  lo: number;
  hi: number;
}

/** The instants of a range as an inclusive [lo, hi] in whole milliseconds; undefined when it holds none. */
export function inclusiveMs(r: Range): { lo: number; hi: number } | undefined {
  const lo = r.inclusiveStart ? r.start : r.start + 1;
  const hi = r.inclusiveEnd ? r.end : r.end - 1;
  return lo > hi ? undefined : { lo, hi };
}

/**
 * How a range is read: its raw events when it lies within one UTC day; otherwise the level whose
 * buckets cover it at the least cost, counted as buckets × √(days per bucket): few buckets (each
 * a COUNT DISTINCT over its rows) of a span not much longer than the range.
 */
export function planRead(lo: number, hi: number): { raw: true } | LevelRead {
  const a = Math.floor(lo / DAY);
  const b = Math.floor(hi / DAY);
  if (a === b) return { raw: true };
  let best: LevelRead | undefined;
  let bestCost = Number.POSITIVE_INFINITY;
  for (let level = 0; level <= MAX_LEVEL; level++) {
    const first = Math.floor(a / 2 ** level);
    const last = Math.floor(b / 2 ** level);
    if (first === last) break;
    const cost = (last - first + 1) * Math.sqrt(2 ** level);
    if (cost <= bestCost) {
      bestCost = cost;
      best = { level, first, last, lo, hi };
    }
  }
  return best as LevelRead;
}
