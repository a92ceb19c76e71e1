/**
 * Usage before a mid-cycle change of usage terms (a `PATCH /subscriptions/{id}` that changes a
 * usage rate's multiplier, or takes or drops a usage-based catalog add-on; updates.ts), priced
 * at the terms it was used under, with either proration_behavior.
 *
 * The usage window stays whole: the cycle close prices [usage_since, period end) of each rate at
 * the row's terms then, the new ones (one allowance of included units, tiers and limits over the
 * whole window). So the change settles, at once, the part before it that the close would bill
 * for less than it cost: over [usage_since, at), with the usage committed so far, `old` is the
 * rate's charge at the old terms and `new` at the new terms, each priced as the close prices a
 * window (InvoiceBuilder.usageLinesOf, within the period), and old − new is billed as an
 * adjustment line, so the period costs old(before) + new(after) for that rate. That sum is exact,
 * and so settled, in two cases only:
 * - a rate dropped (a usage add-on no longer taken): the close bills none of it, so its usage
 *   before the change is billed at once (old(before), new 0), whatever its price;
 * - a multiplier lowered on a rate whose charge grows with its usage in proportion to the
 *   multiplier over the period (no volume tiers, no minimum or maximum, a metric other than
 *   `last`): m_old·P(before) + m_new·(P(all) − P(before)).
 * Anything else is priced by the close at the new terms for the whole period: a rate
 * taken bills its usage since the period's start, a multiplier raised its usage before the
 * change at the new one. Never a credit: a difference priced on a shape that is not additive
 * (volume tiers, `last`, limits) can come out larger than what the close takes back.
 * Rates whose terms do not change, and changes of fixed rates alone, settle nothing.
 */
import type { ChargedRates } from "../catalog/addons.js";
import type { RateCard } from "../catalog/types.js";
import { total } from "../invoicing/lines.js";
import { type Decimal, ZERO, dec, formatDecimal } from "../money.js";
import { formatInstant } from "../time.js";
import { type BillLine, type InvoiceBuilder, multiplierOf } from "./invoice-building.js";
import type { TermsOf } from "./proration.js";
import type { BillingReads } from "./reads.js";
import type { Subscription } from "./types.js";

type UsageRate = ChargedRates["usage"][number];

/** Whether `rate`'s charge is its multiplier times a price that only adds up with usage: no volume tiers, no limit, a metric other than `last`. */
function scalesWithUsage(rate: UsageRate, aggregation: string | undefined): boolean {
  if (rate.minimumAmount || rate.maximumAmount || aggregation === "last" || aggregation === undefined) return false;
  const prices = rate.type === "simple" ? [rate.price] : rate.cells.map((c) => c.price);
  return prices.every((p) => p.kind !== "tiered" || p.mode !== "volume");
}

/** The usage rates charged at `before` whose terms change at `after`: dropped (`new` undefined), or another multiplier. */
async function changedUsageRates(reads: Pick<BillingReads, "rates">, card: RateCard, before: TermsOf, after: TermsOf): Promise<{ old: UsageRate; new?: UsageRate }[]> {
  const now = new Map((await reads.rates(card, after.fixedRateQuantities)).usage.map((r) => [r.code, r]));
  const out: { old: UsageRate; new?: UsageRate }[] = [];
  for (const old of (await reads.rates(card, before.fixedRateQuantities)).usage) {
    const n = now.get(old.code);
    if (n && multiplierOf(before, old.code).eq(multiplierOf(after, old.code))) continue;
    out.push({ old, new: n });
  }
  return out;
}

/**
 * What moving `s` (at its row's terms, with usage since `s.usageSince`) to `next` at `at` settles
 * for the usage before the change (see the module's comment). Nothing when no usage rate's terms
 * change or the window is empty: the adjustment lines to bill at once.
 */
export async function usageTermSettlement(builder: InvoiceBuilder, reads: Pick<BillingReads, "rates" | "metricsOf">, card: RateCard, s: Subscription, next: TermsOf, at: Date): Promise<BillLine[]> {
  const out: BillLine[] = [];
  const from = s.usageSince;
  if (at.getTime() <= from.getTime()) return out;
  const cycle = { start: s.periodStart, end: s.periodEnd };
  const charge = async (rate: UsageRate | undefined, terms: TermsOf): Promise<Decimal> =>
    rate ? total(await builder.usageLinesOf(card, [rate], { subjectId: s.subjectId, rateMultipliers: terms.rateMultipliers }, from, at, cycle)) : ZERO;
  const span = `${formatInstant(from)} to ${formatInstant(at)}`;
  const changed = await changedUsageRates(reads, card, s, next);
  const metrics = await reads.metricsOf(card.environmentId, [...new Set(changed.map((c) => c.old.pricingMetricId))]);
  for (const c of changed) {
    // Settled: a rate dropped, or a multiplier lowered on a rate whose charge scales with it (see the module's comment).
    if (c.new && !scalesWithUsage(c.old, metrics.get(c.old.pricingMetricId)?.aggregation.type)) continue;
    const d = (await charge(c.old, s)).minus(await charge(c.new, next));
    if (!d.gt(0)) continue;
    const what = c.new ? `multiplier ${formatDecimal(multiplierOf(s, c.old.code))} → ${formatDecimal(multiplierOf(next, c.old.code))}` : "dropped";
    out.push({
      description: `${c.old.name}: usage before the change (${what}) at the old terms (${span})`,
      quantity: dec(1),
      unitAmount: d,
      amount: d,
      kind: "adjustment",
      key: `${c.old.code}|`,
      windowInvoiceId: null,
    });
  }
  return out;
}
