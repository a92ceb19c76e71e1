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
 *   before the change at the new terms, so new − old > 0 is credited (the subject's balance, as a
 *   seat decrease's credit is; DESIGN §13), and the period costs what it used at each terms. The
 *   credit is the difference of what that usage costs booked at the new terms (as the close will
 *   book it) and at the old: each priced as a preview invoice of positive lines booked now with
 *   the subscription's discounts (not "once" ones) and its taxes (usageCreditsAsBooked,
 *   change-credit.ts bookedNow; an inclusive tax is inside the amount). 10,000 units at 2, ×1 →
 *   ×3, 20% exclusive: the close books 60,000 + 12,000 tax for them, at the old terms 20,000 +
 *   4,000: the credit is 72,000 − 24,000 = 48,000; with a 50% coupon for ever, 30,000 + 6,000 at
 *   the new terms and 10,000 + 2,000 at the old: 36,000 − 12,000 = 24,000. A minimum commitment,
 *   on charges before discounts and tax, counts new − old before both (40,000; updates.ts,
 *   commitments.ts).
 * On a rate whose charge does not add up (volume tiers, `last`, limits), only a drop is settled:
 * the close prices the rest at the new terms for the whole period, since a difference priced on
 * such a shape can exceed what the close takes back.
 * Rates whose terms do not change, and changes of fixed rates alone, settle nothing.
 */
import type { ChargedRates } from "../catalog/addons.js";
import { bookedNow, discountAndTax } from "./change-credit.js";
import type { RateCard } from "../catalog/types.js";
import { total } from "../invoicing/lines.js";
import { type Decimal, ZERO, dec, formatDecimal } from "../money.js";
import { formatInstant } from "../time.js";
import { type BillLine, type InvoiceBuilder, multiplierOf } from "./invoice-building.js";
import type { TermsOf } from "./proration.js";
import type { BillingTx } from "./ports.js";
import type { BillingReads } from "./reads.js";
import type { ProrationCredit, Subscription } from "./types.js";

type UsageRate = ChargedRates["usage"][number];

/** Whether `rate`'s charge is its multiplier times a price that only adds up with usage: no volume tiers, no limit, a metric other than `last`. */
function scalesWithUsage(rate: UsageRate, aggregation: string | undefined): boolean {
  if (rate.minimumAmount || rate.maximumAmount || aggregation === "last" || aggregation === undefined) return false;
  const prices = rate.type === "simple" ? [rate.price] : rate.cells.map((c) => c.price);
  return prices.every((p) => p.kind !== "tiered" || p.mode !== "volume");
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
 * A credit of a change of usage terms before discounts and tax: a negative usage line of its
 * rate (keyed `<code>|`) of new − old, and the usage's charge at the old and new terms.
 */
export type UsageCredit = BillLine & { old: Decimal; new: Decimal };

/**
 * What a change of usage terms settles for the usage before it: adjustment lines billed at once,
 * and credits for the subject's balance before discounts and tax (usageCreditsAsBooked values them).
 */
export interface UsageTermSettlement {
  lines: BillLine[];
  credits: UsageCredit[];
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
  const out: UsageTermSettlement = { lines: [], credits: [] };
  const from = s.usageSince;
  if (at.getTime() <= from.getTime()) return out;
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
    const [atOld, atNew] = [await charge(c.old, s), await charge(c.new, next)];
    const d = atOld.minus(atNew);
    if (d.isZero()) continue;
    const what = !c.new ? "dropped" : !c.old ? "taken" : `multiplier ${formatDecimal(multiplierOf(s, rate.code))} → ${formatDecimal(multiplierOf(next, rate.code))}`;
    const description = `${rate.name}: usage before the change (${what}) at the old terms (${span})`;
    const line = { description, quantity: dec(1), unitAmount: d, amount: d, key: `${rate.code}|`, windowInvoiceId: null };
    if (d.isNegative()) out.credits.push({ ...line, kind: "usage", old: atOld, new: atNew });
    else out.lines.push({ ...line, kind: "adjustment" });
  }
  return out;
}

/**
 * `u`'s credits for the subject's balance (`s` locked at its terms before the change, at `at`):
 * per rate, what its usage before the change costs booked at the new terms less at the old, each
 * a preview invoice of positive lines (no negative line is booked: a discount takes nothing of
 * one) booked as the close would book it, now (change-credit.ts bookedNow: the subscription's
 * discounts but "once" ones, and its taxes; see the module's comment). Before discounts and tax
 * without booking (the in-memory fake). A credit says what discounts took and the exclusive tax
 * it counts (`money` prints them); one that comes to nothing is left out.
 */
export async function usageCreditsAsBooked(
  tx: BillingTx,
  builder: InvoiceBuilder,
  s: Subscription,
  card: RateCard,
  u: UsageTermSettlement,
  at: Date,
  money: (d: Decimal) => string,
): Promise<ProrationCredit[]> {
  if (u.credits.length === 0) return [];
  const previewAt = (terms: "old" | "new") => {
    const lines = u.credits.map((c): BillLine => ({ description: c.description, quantity: dec(1), unitAmount: c[terms], amount: c[terms], kind: "usage", key: c.key, windowInvoiceId: null }));
    return bookedNow(tx, builder.newInvoice(s, card, `usage-terms-preview-${terms}`, lines, s.usageSince, at, at), at);
  };
  const [old, now] = [await previewAt("old"), await previewAt("new")];
  if (!old || !now) return u.credits.map((c) => ({ description: c.description, amount: formatDecimal(c.amount) }));
  return u.credits.flatMap((c, i) => {
    const [o, n] = [discountAndTax(old.lines[i]), discountAndTax(now.lines[i])];
    const [discount, tax] = [n.discount.minus(o.discount), n.tax.minus(o.tax)];
    const credit = c.amount.neg().minus(discount).plus(tax);
    if (credit.lte(0)) return [];
    const less = discount.isZero() ? "" : `, less discounts: ${money(discount)}`;
    const taxed = tax.isZero() ? "" : `, incl. tax: ${money(tax)}`;
    return [{ description: `${c.description}${less}${taxed}`, amount: formatDecimal(credit.neg()) }];
  });
}
