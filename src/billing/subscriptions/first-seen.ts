/**
 * First-seen anchors of usage windows (DESIGN §13: a unique_count bills the distinct values of a
 * period). A change of rate card cuts a period into usage windows, each billed on its own card; a
 * value seen on both sides of the change was counted in both. When the ending window's card and
 * the new card both have a unique_count rate of the same code on the same metric, of the same
 * shape (both simple, or both dimensional by the same dimension keys with every cell of the new
 * rate priced by a cell of the old: sameShape), the switch gives the new window an anchor for that
 * rate: the ending window's own anchor for it if it had one, else the ending window's start. The
 * new window then bills f(all) − f(before), where `all` is the distinct count of [anchor, window
 * end), `before` that of [anchor, window start) and f prices a count with the rate's included
 * units and price (chainLines), so a chain of such windows bills the price of the chain's distinct
 * count once, included units given once. A rate with a minimum or maximum amount or volume tiers
 * is anchored only when carried over on the same terms (sameTerms); its window bills the chain's
 * count priced with its limits prorated over the chain, less the earlier windows' count priced
 * with theirs at the multiplier they were billed at, which the anchor keeps (cappedChainLines), so
 * the period costs its count priced once with the period's limits. A card in between without such
 * a rate breaks the chain (the next window has no anchor for it: what was seen under a card that
 * did not bill it so was never billed), and so does a rate of another shape: the old rate did not
 * bill what would be subtracted. Anchors never cross a cycle's start: a cycle close, a pause and a resume start the
 * next window without any. A window without an anchor for a rate (every window stored before
 * anchors existed, or with anchors keyed otherwise) is measured over itself alone, as before.
 */
import type { PricingMetric, RateCard, UsageRate } from "../catalog/types.js";
import { chargeAddsUp, coordinatesKey } from "../catalog/rates.js";
import { limitLine } from "../invoicing/limits.js";
import type { Line } from "../invoicing/line.js";
import { total } from "../invoicing/lines.js";
import { type Decimal, ZERO, dec, formatDecimal } from "../money.js";
import { formatInstant } from "../time.js";
import type { UsageWindow } from "./types.js";

/**
 * A unique_count rate's first-seen anchor: the start `at` of its chain of windows, and the
 * multiplier `billedMultiplier` its earlier windows [at, window start) were billed at, that of the
 * window just before (absent on anchors kept before it was: priced at the one in force).
 */
export type FirstSeenAnchor = NonNullable<UsageWindow["firstSeen"]>[string];

/** Per rate (firstSeenKey: its metric and code), a window's first-seen anchor and the multiplier its earlier windows were billed at (see the module's comment). */
export type FirstSeen = Record<string, FirstSeenAnchor>;

/** The key of a rate's anchor: its pricing metric ID and its code (an ID never holds "/", so the key is unambiguous). */
export function firstSeenKey(rate: Pick<UsageRate, "pricingMetricId" | "code">): string {
  return `${rate.pricingMetricId}/${rate.code}`;
}

/** A rate's anchor among a window's, if any. */
export function anchorOf(firstSeen: FirstSeen | null | undefined, rate: Pick<UsageRate, "pricingMetricId" | "code">): Date | undefined {
  return firstSeen?.[firstSeenKey(rate)]?.at;
}

/** The multiplier a rate's earlier windows since its anchor were billed at, if kept (an anchor kept before it was: none). */
export function billedMultiplierOf(firstSeen: FirstSeen | null | undefined, rate: Pick<UsageRate, "pricingMetricId" | "code">): string | undefined {
  return firstSeen?.[firstSeenKey(rate)]?.billedMultiplier;
}

/** Anchors as read back from JSON: an instant's ISO text (kept before the multiplier was), or the instant with the multiplier. */
export function anchorsOfJson(a: Record<string, Date | string | { at: Date | string; billedMultiplier?: string }>): FirstSeen {
  const of = (x: Date | string | { at: Date | string; billedMultiplier?: string }): FirstSeenAnchor =>
    typeof x === "string" || x instanceof Date ? { at: new Date(x) } : { at: new Date(x.at), ...(x.billedMultiplier === undefined ? {} : { billedMultiplier: x.billedMultiplier }) };
  return Object.fromEntries(Object.entries(a).map(([k, x]) => [k, of(x)]));
}

/** What the anchors are computed from: a card's usage rates (with a subscription's quantities) and the metrics they bill. */
export interface FirstSeenReads {
  rates(card: RateCard, quantities: Record<string, string>): Promise<{ usage: UsageRate[] }>;
  metricsOf(environmentId: string, ids: string[]): Promise<Map<string, PricingMetric>>;
}

/** The window ending at a switch: its start, the cycle it lies in, its anchors, and the quantities and multipliers its rates were priced with. */
export interface EndingWindow {
  usageSince: Date;
  periodStart: Date;
  periodEnd: Date;
  fixedRateQuantities: Record<string, string>;
  rateMultipliers: Record<string, string>;
  firstSeen?: FirstSeen | null;
}

/** `card`'s unique_count rates (with `quantities`, for the add-ons it takes) by firstSeenKey. */
async function uniqueRatesOf(reads: FirstSeenReads, card: RateCard, quantities: Record<string, string>): Promise<Map<string, UsageRate>> {
  const { usage } = await reads.rates(card, quantities);
  const metrics = await reads.metricsOf(card.environmentId, [...new Set(usage.map((r) => r.pricingMetricId))]);
  return new Map(usage.filter((r) => metrics.get(r.pricingMetricId)?.aggregation.type === "unique_count").map((r) => [firstSeenKey(r), r]));
}

/**
 * Whether `old` billed every value `next` would take off as seen before, and what the earlier
 * windows billed is known from `next` alone: both simple, or both dimensional by the same dimension
 * keys with each of `next`'s cells priced by a cell of `old` (a combination without a cell was
 * billed nothing); and either both charges add up over a chain's windows (chargeAddsUp: chainLines
 * prices the chain at `next`'s price), or `old` is `next` on the same terms (sameTerms: a minimum,
 * a maximum or volume tiers, which each window applied to its own lines, priced again for the
 * earlier windows by cappedChainLines). A limited or volume-tiered rate whose terms changed at the
 * switch is measured per window, as before: what its earlier windows billed is not what `next`
 * would have billed them.
 */
export function sameShape(old: UsageRate, next: UsageRate): boolean {
  if (!(chargeAddsUp(old) && chargeAddsUp(next)) && !sameTerms(old, next)) return false;
  if (old.type === "simple" || next.type === "simple") return old.type === next.type;
  const keys = (r: typeof old) => JSON.stringify(r.dimensions.map((d) => d.key).sort());
  if (keys(old) !== keys(next)) return false;
  const priced = new Set(old.cells.map((c) => coordinatesKey(c.coordinates)));
  return next.cells.every((c) => priced.has(coordinatesKey(c.coordinates)));
}

/** JSON with object keys sorted, so two equal values give the same text whatever their key order. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v !== null && typeof v === "object") {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v) ?? "null";
}

/** Whether two rates charge alike: the same included units, minimum, maximum and prices (per cell, whatever their order). */
function sameTerms(a: UsageRate, b: UsageRate): boolean {
  const terms = (r: UsageRate) => ({
    includedUnits: r.includedUnits,
    minimum: r.minimumAmount,
    maximum: r.maximumAmount,
    prices: r.type === "simple" ? [r.price] : [...r.cells].sort((x, y) => coordinatesKey(x.coordinates).localeCompare(coordinatesKey(y.coordinates))).map((c) => [c.coordinates, c.price]),
  });
  return a.type === b.type && canonical(terms(a)) === canonical(terms(b));
}

/**
 * The anchors of the window a switch from `oldCard` (the ending window `w`) to `newCard` (with
 * `quantities`) starts at `at`; null when none. Only within `w`'s cycle: a new window starting at
 * or after its end (a timeline's move at the cycle's end) starts afresh, and an anchor is never
 * before the cycle's start. An empty ending window (two changes at one instant) passes its own
 * anchors on for the rates both cards have alike. Each anchor keeps the multiplier the chain's
 * windows up to `at` were billed at: the ending window's for the rate (a rate that does not add up
 * is priced whole at the multiplier in force at its window's end: usage-term-changes.ts), so with
 * the earlier windows' billing telescoping, what they billed is the chain up to `at` at that
 * multiplier (cappedChainLines); an empty ending window billed nothing and passes its own on.
 */
export async function firstSeenAfterSwitch(reads: FirstSeenReads, w: EndingWindow, oldCard: RateCard, newCard: RateCard, quantities: Record<string, string>, at: Date): Promise<FirstSeen | null> {
  if (at.getTime() >= w.periodEnd.getTime()) return null;
  const [before, after] = await Promise.all([uniqueRatesOf(reads, oldCard, w.fixedRateQuantities), uniqueRatesOf(reads, newCard, quantities)]);
  const out: FirstSeen = {};
  for (const [key, rate] of after) {
    const old = before.get(key);
    if (!old || !sameShape(old, rate)) continue;
    const own = w.firstSeen?.[key];
    const anchor = own?.at ?? w.usageSince;
    const billedMultiplier = own && w.usageSince.getTime() >= at.getTime() ? own.billedMultiplier : (w.rateMultipliers[old.code] ?? "1");
    if (anchor.getTime() >= w.periodStart.getTime() && anchor.getTime() < at.getTime()) out[key] = { at: anchor, ...(billedMultiplier === undefined ? {} : { billedMultiplier }) };
  }
  return Object.keys(out).length > 0 ? out : null;
}

/** The lines of `all` less those of `before`, by line key (`cell`); a line of `before` that `all` no longer has is taken back. */
function chainDiff(all: readonly Line[], before: readonly Line[]): Line[] {
  const keyOf = (l: Line) => l.cell ?? "";
  const was = new Map(before.map((l) => [keyOf(l), l]));
  const out: Line[] = [];
  const diff = (l: Line, b: Line | undefined, sign: 1 | -1) => {
    const quantity = sign === 1 ? l.quantity.minus(b?.quantity ?? ZERO) : l.quantity.neg();
    const amount = sign === 1 ? l.amount.minus(b?.amount ?? ZERO) : l.amount.neg();
    if (!quantity.isZero() || !amount.isZero()) out.push({ ...l, quantity, amount });
  };
  for (const l of all) diff(l, was.get(keyOf(l)), 1);
  const now = new Set(all.map(keyOf));
  for (const b of before) if (!now.has(keyOf(b))) diff(b, undefined, -1);
  return out;
}

/**
 * An anchored window's lines: those of `all` (the count since the anchor) less those of `before`
 * (the count since the anchor up to the window's start), each priced with the rate's included
 * units, by line key (`cell`): what the chain costs now less what its earlier windows cost, so
 * included units are given once across the chain and a tiered or package price telescopes alike.
 * A line of `before` that `all` no longer has is taken back. Never negative in all: sameShape
 * anchors this way only rates whose price grows with the count (no volume tiers), so this is a guard.
 */
export function chainLines(all: readonly Line[], before: readonly Line[]): Line[] {
  const out = chainDiff(all, before);
  return total(out).isNegative() ? [] : out;
}

/** A rate's minimum and maximum per period (null: none), and its name for their lines. */
export interface RateLimits {
  name: string;
  minimum: Decimal | null;
  maximum: Decimal | null;
}

/**
 * An anchored window's lines for a rate with a minimum or maximum amount or volume tiers, carried
 * over on the same terms (sameShape): the period's charge of the chain less what its earlier
 * windows billed. The chain [anchor, window end) is priced as one window: the lines of its count
 * `all`, raised to the minimum or capped at the maximum prorated by its share `shareAll` of the
 * cycle (limits.ts); the earlier windows [anchor, window start) billed the lines of `before` with
 * the limit prorated by their share `shareBefore` (each window billing what the chain then added,
 * they add up to that). So the window bills the usage lines of all less before (chainDiff) and,
 * for each of the minimum and maximum, the chain's limit line less the earlier windows' (kind
 * "minimum" or "maximum", keyed so; positive when the period's maximum grows past what the
 * earlier windows' share cut). A chain over a whole cycle costs the period's count priced once
 * with the period's limits: ten users at 100 before and after a change on Jan 15, maximum 1,000:
 * 452 (1,000 capped at 1,000 × 14/31) then 1,000 − 452 = 548. A volume tier reached makes the
 * chain cheaper than what was billed: nothing then (never negative).
 * `all` and `before` are priced at the multiplier now in force (`billed.now`); `billed`, when the
 * earlier windows [`since`, `from`) were billed at another, `was` (their anchor keeps it), has
 * their lines at that one: their limit line is taken from those, and the difference before −
 * billed is one more line, an adjustment (kind "adjustment", keyed `cell` ""): their usage at the
 * multiplier now in force instead of theirs. ×1, 4 users before a change on Jan 15, ×2 after, the
 * same 4, maximum 1,000: 400, then the chain's 800 less the 400 billed = 400 (no new user, +400
 * repriced), 800 as without the change; priced at ×2, the earlier window would be 800 capped at
 * 451.61, and a cut of 348 never made would be given back. The extra lines: that adjustment, then
 * the minimum and maximum lines.
 */
export function cappedChainLines(
  rate: RateLimits,
  all: readonly Line[],
  before: readonly Line[],
  shareAll: Decimal,
  shareBefore: Decimal,
  billed?: { lines: readonly Line[]; was: string; now: Decimal; since: Date; from: Date },
): { usage: Line[]; extra: { kind: "adjustment" | "minimum" | "maximum"; line: Line }[] } {
  const usage = chainDiff(all, before);
  const paid = billed?.lines ?? before;
  const delta = total(before).minus(total(paid));
  const span = billed ? `(${formatInstant(billed.since)} to ${formatInstant(billed.from)}) at multiplier ${formatDecimal(billed.now)}, billed at ${formatDecimal(dec(billed.was))}` : "";
  const description = `${rate.name}: the earlier windows' usage since the change ${span}`;
  const extra: { kind: "adjustment" | "minimum" | "maximum"; line: Line }[] = [];
  if (!delta.isZero()) extra.push({ kind: "adjustment", line: { description, quantity: dec(1), unitAmount: delta, amount: delta, cell: "" } });
  const [now, was] = [limitLine(rate.name, total(all), rate.minimum, rate.maximum, shareAll), limitLine(rate.name, total(paid), rate.minimum, rate.maximum, shareBefore)];
  const of = (l: typeof now, kind: "minimum" | "maximum") => (l?.kind === kind ? l.line.amount : ZERO);
  for (const kind of ["minimum", "maximum"] as const) {
    const amount = of(now, kind).minus(of(was, kind));
    if (amount.isZero()) continue;
    extra.push({ kind, line: { description: `${rate.name} (${kind} per period, prorated, net of the earlier windows since the change)`, quantity: dec(1), unitAmount: amount, amount, cell: kind } });
  }
  return total([...usage, ...extra.map((l) => l.line)]).isNegative() ? { usage: [], extra: [] } : { usage, extra };
}
