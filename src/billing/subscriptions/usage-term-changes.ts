/**
 * Usage before a mid-cycle change of usage terms (a `PATCH /subscriptions/{id}` that changes a
 * usage rate's multiplier, or takes or drops a usage-based catalog add-on; updates.ts), priced
 * at the terms it was used under, with either proration_behavior.
 *
 * The usage window stays whole: the cycle close prices [usage_since, period end) of each rate at
 * the row's terms then, the new ones (one allowance of included units, tiers and limits over the
 * whole window). So the change settles, at once, the part before it that the close would bill
 * at other terms: over [usage_since, at), with the usage committed so far, `old` is the rate's
 * charge at the old terms and `new` at the new terms, each priced as the close prices a window
 * (InvoiceBuilder.usageLinesOf, within the period), and old − new is settled, so the period
 * costs old(before) + new(after) for that rate. That sum is exact where the rate's charge grows
 * with its usage in proportion to its multiplier over the period (no volume tiers, no minimum or
 * maximum, a metric other than `last`): m_old·P(before) + m_new·(P(all) − P(before)). Settled:
 * - a rate dropped (a usage add-on no longer taken), whatever its price: the close bills none of
 *   it, so its usage before the change is billed at once (old(before), new 0);
 * - on a rate whose charge so adds up, a multiplier lowered: old − new > 0 is billed at once as an
 *   adjustment line; a multiplier raised, or a usage add-on taken: the close will bill the usage
 *   before the change at the new terms, so the change (rate, instant, old and new multiplier or
 *   "taken") is kept on the subscription for its window (Subscription.usageAdjustments, with the
 *   window's start), and the invoice that bills the window (InvoiceBuilder.usageLinesOf: the close,
 *   a change of rate card's or a cancellation's or a pause's invoice; a draft's recomputation; the
 *   late-usage diff) prices old − new (< 0) then, from the usage committed before the change by
 *   then, as an adjustment line keyed `<code>|` as the rate's usage, so the discounts and taxes
 *   that invoice books on the rate's usage book it too, and the period costs what it used at each
 *   terms, usage that comes late included. 1 seat at 1,000, 10,000 units at 2, ×1 → ×3 on Jan 30,
 *   1,000 more, 20% exclusive: the close bills 1,000 + 66,000 − 40,000 = 27,000 + 5,400 tax =
 *   32,400; with a 50% coupon (once or forever) 16,200; with a 25,000 amount-off 2,000 + 400 =
 *   2,400. 1,000 units dated Jan 25 sent on Jan 31: 66,000 + 2,000 − 44,000 (not − 40,000): 22,000
 *   for API calls, all 11,000 units used at ×1. A minimum commitment counts the line as the
 *   window's usage (commitments.ts: true-up 100,000 − 27,000). Several changes of a window each
 *   settle their own old − new over [window start, their instant): they add up to each part at its
 *   own terms.
 * A change billed at once nets the rate's changes kept for the window, as priced at that instant,
 * less what earlier ones billed at once (priced for a close at terms it will no longer bill: ×1 →
 * ×3 on Jan 15, 1,000 units: −4,000; ×3 → ×0.5 on Jan 30, 2,000 units: 12,000 − 2,000 = 10,000,
 * billed 6,000; the close bills 3,000 units at ×0.5 = 3,000: 2,000 + 6,000 + 1,000 in all); when
 * the net is still negative the change is kept too, and the close prices them all. Billed, it is
 * kept with what it billed (`settled`) on a rate the close bills, and the invoice that bills the
 * window prices it and the changes it netted again, less that (adjustmentLines via netOfSettled in
 * invoice-building.ts): usage sent later and dated before it so adds at the terms it was used under
 * (×3, 1,000 units on Jan 8, ×1 on Jan 10: 4,000 billed; 1,000 units dated Jan 5 sent on Jan 31:
 * the close adds 8,000 − 4,000, all 2,000 at ×3; before, they were billed at ×1, and also after a
 * raise later in the window, which prices its usage before it at the multiplier just before it).
 * A dropped rate's close bills none: its changes are dropped with it.
 * On a rate whose charge does not add up (volume tiers, `last`, limits), only a drop is settled:
 * the close prices the rest at the new terms for the whole period, since a difference priced on
 * such a shape can exceed what the close takes back.
 * Rates whose terms do not change, and changes of fixed rates alone, settle nothing.
 */
import type { ChargedRates } from "../catalog/addons.js";
import type { PricingMetric, RateCard } from "../catalog/types.js";
import { chargeAddsUp } from "../catalog/rates.js";
import { FailedPreconditionError } from "../errors.js";
import { total } from "../invoicing/lines.js";
import { type Decimal, ZERO, dec, displayMoney, formatDecimal } from "../money.js";
import { formatInstant } from "../time.js";
import { type BillLine, type InvoiceBuilder, multiplierOf } from "./invoice-building.js";
import type { TermsOf } from "./proration.js";
import type { BillingReads } from "./reads.js";
import type { Subscription, UsageTermsAdjustment } from "./types.js";

type UsageRate = ChargedRates["usage"][number];

/** Whether `rate`'s charge is its multiplier times a price that only adds up with usage: no volume tiers, no limit, a metric other than `last`. */
function scalesWithUsage(rate: UsageRate, aggregation: string | undefined): boolean {
  return aggregation !== "last" && aggregation !== undefined && chargeAddsUp(rate);
}

/** The usage rates whose terms change from `before` to `after`: dropped (`new` undefined), taken (`old` undefined), or another multiplier. */
async function changedUsageRates(reads: Pick<BillingReads, "rates">, card: RateCard, before: TermsOf, after: TermsOf): Promise<{ old?: UsageRate; new?: UsageRate }[]> {
  const was = new Map((await reads.rates(card, before.fixedRateQuantities)).usage.map((r) => [r.code, r]));
  const now = new Map((await reads.rates(card, after.fixedRateQuantities)).usage.map((r) => [r.code, r]));
  const out: { old?: UsageRate; new?: UsageRate }[] = [];
  for (const code of new Set([...was.keys(), ...now.keys()])) {
    const [o, n] = [was.get(code), now.get(code)];
    if (o && n && multiplierOf(before, code).eq(multiplierOf(after, code))) continue;
    out.push({ old: o, new: n });
  }
  return out;
}

/**
 * What a change of usage terms settles for the usage before it: adjustment lines billed at once,
 * and the window's changes kept for the invoice that bills it, which prices them then (those
 * kept from earlier changes of the window with this change's).
 */
export interface UsageTermSettlement {
  lines: BillLine[];
  adjustments: UsageTermsAdjustment[];
}

/**
 * What moving `s` (at its row's terms, with usage since `s.usageSince`) to `next` at `at` settles
 * for the usage before the change (see the module's comment). Nothing when no usage rate's terms
 * change or the window is empty.
 */
export async function usageTermSettlement(
  builder: InvoiceBuilder,
  reads: Pick<BillingReads, "rates" | "metricsOf">,
  card: RateCard,
  s: Subscription,
  next: TermsOf,
  at: Date,
): Promise<UsageTermSettlement> {
  const from = s.usageSince;
  // The window's changes kept from earlier (those of an earlier window were billed with it).
  const out: UsageTermSettlement = { lines: [], adjustments: (s.usageAdjustments ?? []).filter((a) => a.since === from.toISOString()) };
  if (at.getTime() <= from.getTime()) return out;
  const had = out.adjustments.length;
  const cycle = { start: s.periodStart, end: s.periodEnd };
  const charge = async (rate: UsageRate | undefined, terms: TermsOf): Promise<Decimal> =>
    rate ? total(await builder.usageLinesOf(card, [rate], { subjectId: s.subjectId, rateMultipliers: terms.rateMultipliers, firstSeen: s.firstSeen }, from, at, cycle)) : ZERO;
  const span = `${formatInstant(from)} to ${formatInstant(at)}`;
  const changed = await changedUsageRates(reads, card, s, next);
  const metrics = await reads.metricsOf(card.environmentId, [...new Set(changed.map((c) => (c.old ?? c.new)?.pricingMetricId ?? ""))]);
  const addsUp = (r: UsageRate | undefined) => r === undefined || scalesWithUsage(r, metrics.get(r.pricingMetricId)?.aggregation.type);
  for (const c of changed) {
    const rate = (c.old ?? c.new) as UsageRate;
    // Settled: a rate dropped, or another multiplier or a rate taken on a rate whose charge adds up (see the module's comment).
    if (c.new && !(addsUp(c.old) && addsUp(c.new))) continue;
    const [was, now] = [multiplierOf(s, rate.code), multiplierOf(next, rate.code)];
    const what = !c.new ? "dropped" : !c.old ? "taken" : `multiplier ${formatDecimal(was)} → ${formatDecimal(now)}`;
    const description = `${rate.name}: usage before the change (${what}) at the old terms (${span})`;
    const change = { code: rate.code, since: from.toISOString(), changedAt: at.toISOString(), old: c.old ? formatDecimal(was) : "taken", new: formatDecimal(now), description };
    // Raised or taken: kept for the invoice that bills the window, which prices it then (InvoiceBuilder.termChangeAmount).
    if (c.new && (!c.old || now.gt(was))) {
      out.adjustments.push(change);
      continue;
    }
    const d = (await charge(c.old, s)).minus(await charge(c.new, next));
    // Billed at once, net of the rate's changes kept for the window, as priced now (priced for a close at terms it no longer bills: see the module's comment).
    const kept = out.adjustments.filter((a) => a.code === rate.code);
    // Each kept change as priced now, less what earlier changes billed at once for them.
    let pending = ZERO;
    for (const a of kept) pending = pending.plus(await builder.termChangeAmount(rate, metrics.get(rate.pricingMetricId) as PricingMetric, s, from, a)).minus(a.settled ?? ZERO);
    const net = d.plus(pending);
    // Still negative on a rate the close bills: this change too is kept, and the close nets them all.
    if (net.isNegative() && c.new) {
      out.adjustments.push(change);
      continue;
    }
    // On a rate the close bills, kept with what it bills now, so that invoice prices again the usage before it sent later.
    out.adjustments = c.new ? [...out.adjustments, { ...change, settled: formatDecimal(net) }] : out.adjustments.filter((a) => a.code !== rate.code);
    const netted = pending.isZero() ? description : `${description}, net of earlier changes' ${displayMoney(formatDecimal(pending), card.currency ?? "USD")}`;
    if (net.gt(0)) out.lines.push({ description: netted, quantity: dec(1), unitAmount: net, amount: net, kind: "adjustment", key: `${rate.code}|`, windowInvoiceId: null });
  }
  // Changes are counted, not rates: one PATCH changing many rates' terms is one change (its entries share `changedAt`).
  if (out.adjustments.length > had && new Set(out.adjustments.map((a) => a.changedAt)).size > MAX_USAGE_TERM_CHANGES) throw tooManyChanges(s);
  return out;
}

/**
 * The most changes of usage terms a usage window keeps (docs/reference/limits.md): each is priced
 * again (its usage before it measured) by every invoice and preview of the window, and none can
 * be merged without pricing some usage at other terms than it was used under. A change is one
 * PATCH that kept something, whatever the number of rates it changed (its entries, one per rate,
 * share its instant), so a window keeps at most this many times the card's usage rates entries.
 */
export const MAX_USAGE_TERM_CHANGES = 20;

function tooManyChanges(s: Subscription): FailedPreconditionError {
  return new FailedPreconditionError(
    "TOO_MANY_USAGE_TERM_CHANGES",
    `subscription ${s.id} has changed its usage terms (usage multipliers, usage add-ons) ${MAX_USAGE_TERM_CHANGES} times since ${formatInstant(s.usageSince)}, the most one usage window takes; the next can be made from ${formatInstant(s.periodEnd)}, when the period closes`,
    { limit: String(MAX_USAGE_TERM_CHANGES), usage_since: formatInstant(s.usageSince), period_end: formatInstant(s.periodEnd) },
  );
}
