/**
 * Aggregation of usage values (DESIGN §7): sum, count, max and last (the latest by timestamp; on
 * equal timestamps the greater idempotency key, so the result never depends on arrival order).
 * Partial aggregates combine associatively, which is what lets hourly totals stand in for the
 * events they cover.
 */
import type { AggregationType, PricingMetric } from "../catalog/types.js";
import { type Decimal, ZERO, dec, formatDecimal, parseDecimal, storageProblem } from "../money.js";

export interface Agg {
  /** Sum of the values. */
  sum: Decimal;
  /** Number of events. */
  count: Decimal;
  max: Decimal | null;
  last: { at: number; key: string; value: Decimal } | null;
}

/** One event's count (decimals are immutable: one object serves every event). */
const ONE = dec(1);

export const EMPTY: Agg = { sum: ZERO, count: ZERO, max: null, last: null };

function later(a: Agg["last"], b: Agg["last"]): Agg["last"] {
  if (!a) return b;
  if (!b) return a;
  if (b.at !== a.at) return b.at > a.at ? b : a;
  return b.key > a.key ? b : a;
}

export function combine(a: Agg, b: Agg): Agg {
  return {
    sum: a.sum.plus(b.sum),
    count: a.count.plus(b.count),
    max: a.max === null ? b.max : b.max === null ? a.max : b.max.gt(a.max) ? b.max : a.max,
    last: later(a.last, b.last),
  };
}

/**
 * An aggregate taken away by combine: its sum and count negated (a sum's or a count's events to
 * leave out of totals that hold them). A max or a last cannot be taken away: it has none.
 */
export function negated(a: Agg): Agg {
  return { sum: a.sum.negated(), count: a.count.negated(), max: null, last: null };
}

export function needsValue(type: AggregationType): boolean {
  return type !== "count";
}

/**
 * Why `raw` cannot be a value of a metric of `type`, or undefined when it can. A unique_count
 * metric takes any text (a JSON number arrives as its text); the others a decimal number.
 */
export function valueProblem(raw: string | undefined, type: AggregationType = "sum"): string | undefined {
  if (raw === undefined) return "is required";
  if (type === "unique_count") return undefined;
  const d = parseDecimal(raw);
  if (!d) return "must be a decimal number";
  return storageProblem(d);
}

/** One event's contribution to a metric, or undefined when the event does not count for it. */
export function aggOfEvent(metric: PricingMetric, data: Readonly<Record<string, string>>, at: number, key: string): Agg | undefined {
  if (!needsValue(metric.aggregation.type)) return { sum: ZERO, count: ONE, max: null, last: null };
  const raw = data[metric.aggregation.valueField ?? ""];
  // A unique_count metric's totals count its events that carry the value (what late usage and
  // the summary's empty buckets read); its distinct values are kept apart (unique.ts).
  if (metric.aggregation.type === "unique_count") return raw === undefined ? undefined : { sum: ZERO, count: ONE, max: null, last: null };
  const v = raw === undefined ? undefined : parseDecimal(raw);
  if (!v || storageProblem(v)) return undefined;
  return { sum: v, count: ONE, max: v, last: { at, key, value: v } };
}

/** The metric's value from an aggregate, as a canonical decimal string; null when nothing counted. */
export function valueOf(type: AggregationType, a: Agg): string | null {
  if (a.count.isZero()) return null;
  switch (type) {
    case "sum":
      return formatDecimal(a.sum);
    case "count":
      return formatDecimal(a.count);
    case "max":
      return a.max === null ? null : formatDecimal(a.max);
    case "last":
      return a.last === null ? null : formatDecimal(a.last.value);
    case "unique_count":
      throw new Error("unique_count is not read from hourly totals (unique.ts)");
  }
}

/** The metric's dimension values of an event; a missing key is "". */
export function coordinatesOf(dimensions: readonly string[], data: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const d of dimensions) out[d] = data[d] ?? "";
  return out;
}
