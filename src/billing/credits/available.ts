/**
 * Available credit (DESIGN §14): per currency, a subject's credit balance less what the usage of
 * its active subscriptions' current periods costs so far, so an app can stop a customer at zero.
 *
 * The usage so far is priced exactly as the period's invoice will price it: the cycle close's
 * own call (InvoiceBuilder.usageLinesOf over [usage since, period end), the subscription's card
 * and terms), on the usage committed so far. So it includes each usage rate's minimum and
 * maximum lines (a period's minimum is owed whatever the usage: it is counted from the first
 * day, in full) and leaves out fixed charges (billed in advance when the period opened, when
 * credit was applied to them already). Those lines are then booked as the close would book them
 * at the period's end (booking.ts: the subscription's discounts, the card's and buyer's taxes),
 * since credit pays an invoice's total after discounts and tax: with 20% tax, 5,000 of usage
 * takes 6,000 of credit. An amount-off discount is counted as if the usage were the invoice's
 * only lines (the close's invoice shares it with the next period's fixed charges).
 *
 * Only the credit a close can draw on counts (credit-application.ts): per currency, each period
 * in the order the periods end, the grants spendable at its end (in effect by then, not expired
 * before it, not voided: the credit store's `spendable`), each with what the closes before left of
 * it. A grant limited to rate codes counts as far as allocateCredits gives it of the period's
 * booked lines (so never for another rate's usage, nor twice across periods); what is left of a
 * grant counts (the credit an app may let the customer use) when it is unrestricted, or limited
 * to a rate code that one of those periods' cards bills as usage (more usage of that rate spends
 * it). So available credit = applied + usable left − cost: the closes apply min(cost, counted)
 * and leave at least −available credit due whenever it is < 0 (exactly that unless a limited
 * grant has credit left for more of its own rates' usage). A grant limited to `api`, 5,000, with 2,000
 * of `api` usage: 2,000 + 3,000 − 2,000 = 3,000; limited to `other` on a card billing only `api`:
 * 0 + 0 − 2,000 = −2,000. Grants in effect only
 * after every period's end, or expiring before, stay in the balance and count nothing. A currency
 * no active subscription bills in has no close: its available credit is its balance.
 *
 * Not counted (documented in the README): a previous period's invoice still a draft in its grace
 * period (the credit it will take is still in the balance), a commitment true-up (known only at
 * the period's end), and the fixed charges of the next period.
 */
import type { RateCard } from "../catalog/types.js";
import type { Decimal } from "../money.js";
import { ZERO, dec, formatDecimal } from "../money.js";
import { bookedPreview } from "../subscriptions/booking.js";
import { chargeLines } from "../subscriptions/credit-application.js";
import type { InvoiceBuilder } from "../subscriptions/invoice-building.js";
import type { BillingStores } from "../subscriptions/ports.js";
import type { BillingReads } from "../subscriptions/reads.js";
import type { Invoice, Subscription } from "../subscriptions/types.js";
import { allocateCredits, appliedTotal } from "./apply.js";
import type { CreditStore } from "./ports.js";
import type { CreditGrant } from "./types.js";

/** An amount per currency, as the contract's `Amount`. */
export interface CurrencyAmount {
  currencyCode: string;
  value: string;
}

/** What pricing usage so far reads: the engine's reads, invoice builder and stores (booking a preview). */
export interface UsagePricing {
  reads: Pick<BillingReads, "card" | "rates">;
  builder: Pick<InvoiceBuilder, "usageLinesOf" | "newInvoice">;
  stores: Pick<BillingStores, "transaction">;
}

/** What available credit reads of credits: the grants of a subject spendable at an instant, in spend order. */
export type CreditReads = Pick<CreditStore, "spendable">;

/** The currency a card bills in (the engine's default when it names none). */
export const currencyOf = (card: Pick<RateCard, "currency">): string => card.currency ?? "USD";

/** An active subscription's usage so far as its close would book it (absent: no usage line yet), in its card's currency. */
interface PricedPeriod {
  s: Subscription;
  currency: string;
  invoice: Invoice | undefined;
  /** The codes of the usage rates its card bills (at its terms). */
  usageCodes: readonly string[];
}

/** The usage so far of each of `active`'s current periods, priced and booked, the period that closes first first. */
async function pricedPeriods(engine: UsagePricing, active: readonly Subscription[]): Promise<PricedPeriod[]> {
  const out: PricedPeriod[] = [];
  // The period that closes first first: a "once" discount goes to the earliest invoice, so it is counted once (spentOnce).
  const spentOnce = new Set<string>();
  for (const s of [...active].sort((a, b) => a.periodEnd.getTime() - b.periodEnd.getTime())) {
    if (s.status !== "active") continue;
    const card = await engine.reads.card(s.environmentId, s.rateCardId);
    const { usage } = await engine.reads.rates(card, s.fixedRateQuantities);
    const lines = usage.length === 0 ? [] : await engine.builder.usageLinesOf(card, usage, s, s.usageSince, s.periodEnd);
    let invoice: Invoice | undefined;
    if (lines.length > 0) {
      // As the close books it: a draft of those lines dated at the period's end, booked, nothing recorded.
      const draft = engine.builder.newInvoice(s, card, "usage-so-far", lines, s.usageSince, s.periodEnd, s.periodEnd, { finalizesAt: s.periodEnd });
      invoice = await bookedPreview(engine.stores, draft, s.periodEnd, spentOnce);
    }
    out.push({ s, currency: currencyOf(card), invoice, usageCodes: usage.map((r) => r.code) });
  }
  return out;
}

const limited = (g: Pick<CreditGrant, "appliesToRateCodes">): boolean => g.appliesToRateCodes.length > 0;

/** Whether more usage of a period billing `codes` could spend what is left of `g`. */
const usableBy = (g: Pick<CreditGrant, "appliesToRateCodes">, codes: readonly string[]): boolean => !limited(g) || g.appliesToRateCodes.some((c) => codes.includes(c));

/**
 * What one currency's closes take of credit (see the file's comment), in the order the periods
 * end, each grant's remaining as the closes before took it: applied (what the closes apply in
 * all), cost (their totals) and headroom (what is left of the grants spendable at one of those ends
 * that more usage could spend: usableBy).
 */
async function closesOf(credits: CreditReads, periods: readonly PricedPeriod[], currency: string, hasCredit: boolean) {
  const left = new Map<string, Decimal>();
  const usable = new Set<string>();
  let applied = ZERO;
  let cost = ZERO;
  for (const { s, invoice, usageCodes } of periods) {
    const spendable = hasCredit ? await credits.spendable(s.environmentId, s.subjectId, currency, s.periodEnd) : [];
    const grants = spendable.map((g) => {
      if (!left.has(g.id)) left.set(g.id, dec(g.remaining));
      if (usableBy(g, usageCodes)) usable.add(g.id);
      return { ...g, remaining: formatDecimal(left.get(g.id) ?? ZERO) };
    });
    if (!invoice) continue;
    cost = cost.plus(dec(invoice.total));
    // Grants limited to rate codes first, as if unrestricted ones had left the total to them: the
    // close applies min(total, unrestricted + what they pay of their lines) whatever the spend order.
    const lines = chargeLines(invoice);
    const first = allocateCredits(lines, invoice.total, grants.filter(limited));
    const rest = formatDecimal(dec(invoice.total).minus(dec(appliedTotal(first))));
    for (const a of [
      ...first,
      ...allocateCredits(
        lines,
        rest,
        grants.filter((g) => !limited(g)),
      ),
    ]) {
      left.set(a.grantId, (left.get(a.grantId) ?? ZERO).minus(dec(a.amount)));
      applied = applied.plus(dec(a.amount));
    }
  }
  const headroom = [...usable].reduce((sum, id) => sum.plus(left.get(id) ?? ZERO), ZERO);
  return { applied, cost, headroom };
}

/**
 * Per currency of `balances` or of `active`'s cards: what is taken off the balance to give the
 * available credit, the cost so far of the current periods' usage plus the credit no close draws
 * on (the balance less what the closes apply and the usable credit left). A currency none
 * of `active` bills in: nothing (no close, no cost: its available credit is its balance).
 */
export async function takenOffBalance(engine: UsagePricing, credits: CreditReads, active: readonly Subscription[], balances: ReadonlyMap<string, string>): Promise<Map<string, Decimal>> {
  const periods = await pricedPeriods(engine, active);
  const out = new Map<string, Decimal>();
  for (const currency of new Set(periods.map((p) => p.currency))) {
    const balance = balances.get(currency);
    const { applied, cost, headroom } = await closesOf(
      credits,
      periods.filter((p) => p.currency === currency),
      currency,
      balance !== undefined,
    );
    // available = applied + headroom − cost = balance − taken.
    out.set(
      currency,
      dec(balance ?? "0")
        .minus(applied)
        .minus(headroom)
        .plus(cost),
    );
  }
  return out;
}

/**
 * Billing state's credit fields: per currency the subject has (or had) credit in, sorted by code,
 * the balance and the available credit (balance − `taken`: takenOffBalance's, may be negative). A currency the
 * subject never had credit in is left out: it pays in arrears there, and an app that stops a
 * customer at zero available credit must not stop one who never bought credit.
 */
export function creditFields(balances: ReadonlyMap<string, string>, taken: ReadonlyMap<string, Decimal>): { balance: CurrencyAmount[]; available: CurrencyAmount[] } {
  const currencies = [...balances.keys()].sort();
  const balance: CurrencyAmount[] = [];
  const available: CurrencyAmount[] = [];
  for (const c of currencies) {
    const b = dec(balances.get(c) ?? "0");
    balance.push({ currencyCode: c, value: formatDecimal(b) });
    available.push({ currencyCode: c, value: formatDecimal(b.minus(taken.get(c) ?? ZERO)) });
  }
  return { balance, available };
}
