/**
 * Tiered and percentage prices as invoice lines (DESIGN §13), pure. Quantities reach here after
 * included units were taken off (lines.ts): tiers price what is left, from its first unit.
 * - Graduated: unit n is priced by the tier whose range holds n (tier 1 is 0 < n ≤ up_to₁, tier k
 *   is up_to₍k₋₁₎ < n ≤ up_toₖ); a fractional quantity is split at the bounds (1,000.5 units over
 *   a bound at 1,000 are 1,000 in tier 1 and 0.5 in tier 2). One line per touched tier, and each
 *   touched tier's flat amount once, as a line of its own (quantity 1).
 * - Volume: the whole quantity at the tier it reaches (the first whose up_to ≥ quantity, else the
 *   last), one line, plus that tier's flat amount as a line of its own.
 * - A quantity of 0 touches no tier: no line, no flat amount.
 * - The multiplier scales every amount (unit and flat). Each line is rounded once, half-up.
 * - Flat amounts of 0 make no line (they charge nothing); a tier line at a unit amount of 0 is
 *   kept (it shows the units the free tier covered).
 * - Percentage: `percent`% of the period's sum (quantity = the sum, unit amount = percent/100 ×
 *   multiplier), plus the fee per counted event (quantity = the events, unit = fee × multiplier).
 * Every line carries a `cell` part (`tier:2`, `tier:2:flat`, `percent`, `per_event`), so each line
 * of a rate has a distinct key that stays the same when the usage is priced again (late usage
 * diffs a window's lines by key).
 */
import type { Price, Tier } from "../catalog/types.js";
import { type Decimal, ZERO, dec, displayMoney, formatDecimal } from "../money.js";
import { type Line, line } from "./line.js";

type Tiered = Extract<Price, { kind: "tiered" }>;
type Percentage = Extract<Price, { kind: "percentage" }>;

const minOf = (a: Decimal, b: Decimal): Decimal => (a.lt(b) ? a : b);

/** How much of `quantity` falls in each tier touched (graduated), in tier order. */
export function graduatedSplit(tiers: readonly Tier[], quantity: Decimal): { index: number; quantity: Decimal }[] {
  const out: { index: number; quantity: Decimal }[] = [];
  let lower = ZERO;
  for (const [index, t] of tiers.entries()) {
    if (!quantity.gt(lower)) break;
    const upper = t.upTo === null ? quantity : minOf(quantity, dec(t.upTo));
    out.push({ index, quantity: upper.minus(lower) });
    if (t.upTo === null) break;
    lower = dec(t.upTo);
  }
  return out;
}

/** The tier a volume quantity reaches, or undefined for a quantity of 0. */
export function volumeTier(tiers: readonly Tier[], quantity: Decimal): number | undefined {
  if (!quantity.gt(0)) return undefined;
  const i = tiers.findIndex((t) => t.upTo === null || quantity.lte(dec(t.upTo)));
  return i === -1 ? tiers.length - 1 : i;
}

/** A whole number with thousands separators ("1,001"); fractions keep their digits ("1,000.5"). */
export function grouped(d: Decimal): string {
  const [whole, fraction] = formatDecimal(d).split(".");
  const w = (whole as string).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return fraction === undefined ? w : `${w}.${fraction}`;
}

/**
 * The units a tier prices, for people: "1 – 1,000", "1,001 – 5,000", "5,001 and above"; with
 * fractional bounds, "up to 0.5" (a first tier), "over 1,000.5 – 2,000" and "over 2,000.5".
 */
export function tierRange(tiers: readonly Tier[], index: number): string {
  const previous = index === 0 ? ZERO : dec(tiers[index - 1]?.upTo ?? "0");
  const upTo = tiers[index]?.upTo ?? null;
  const whole = previous.isInteger() && (upTo === null || dec(upTo).gte(previous.plus(1)));
  if (!whole && index === 0) return upTo === null ? "all units" : `up to ${grouped(dec(upTo))}`;
  const from = whole ? grouped(previous.plus(1)) : `over ${grouped(previous)}`;
  if (upTo === null) return whole ? `${from} and above` : from;
  return `${from} – ${grouped(dec(upTo))}`;
}

/** `label` before a tier's words, for dimensional cells ("region=eu, tier 2: …"). */
const prefixed = (label: string | null, words: string) => (label ? `${label}, ${words}` : words);

function tierLinesOf(name: string, label: string | null, price: Tiered, index: number, quantity: Decimal, multiplier: Decimal): Line[] {
  const t = price.tiers[index] as Tier;
  const words = `tier ${index + 1}: ${tierRange(price.tiers, index)}`;
  const out: Line[] = [{ ...line(`${name} (${prefixed(label, words)})`, quantity, dec(t.unitAmount.value).times(multiplier)), cell: `tier:${index + 1}` }];
  if (t.flatAmount && !dec(t.flatAmount.value).isZero()) {
    out.push({ ...line(`${name} (${prefixed(label, `tier ${index + 1}: flat fee`)})`, dec(1), dec(t.flatAmount.value).times(multiplier)), cell: `tier:${index + 1}:flat` });
  }
  return out;
}

/** A tiered price's lines for `quantity` (after included units), `label` naming a dimensional cell. */
export function tieredLines(name: string, label: string | null, price: Tiered, quantity: Decimal, multiplier: Decimal): Line[] {
  if (price.mode === "graduated") {
    return graduatedSplit(price.tiers, quantity).flatMap((s) => tierLinesOf(name, label, price, s.index, s.quantity, multiplier));
  }
  const reached = volumeTier(price.tiers, quantity);
  return reached === undefined ? [] : tierLinesOf(name, label, price, reached, quantity, multiplier);
}

/** A percentage price's lines: percent of `sum` (when above 0), and the fee for `events` (when both are above 0). */
export function percentageLines(name: string, label: string | null, price: Percentage, sum: Decimal, events: Decimal, multiplier: Decimal): Line[] {
  const out: Line[] = [];
  if (sum.gt(0)) {
    // The sum is in the smallest unit; the description shows it as people read money (USD 105.00).
    const words = `${formatDecimal(dec(price.percent))}% of ${displayMoney(formatDecimal(sum), price.currency)}`;
    out.push({ ...line(`${name} (${prefixed(label, words)})`, sum, dec(price.percent).div(100).times(multiplier)), cell: "percent" });
  }
  const fee = price.fixedPerEvent ? dec(price.fixedPerEvent.value) : ZERO;
  if (events.gt(0) && !fee.isZero()) {
    out.push({ ...line(`${name} (${prefixed(label, "fee per event")})`, events, fee.times(multiplier)), cell: "per_event" });
  }
  return out;
}
