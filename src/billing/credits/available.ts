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
 * only lines (the close's invoice shares it with the next period's fixed charges). The next
 * invoice then applies min(balance, that cost) of credit to it: balance − available credit,
 * whenever available credit is ≥ 0.
 *
 * Not counted (documented in the README): a previous period's invoice still a draft in its grace
 * period (the credit it will take is still in the balance), a commitment true-up (known only at
 * the period's end), and the fixed charges of the next period.
 */
import type { RateCard } from "../catalog/types.js";
import type { Decimal } from "../money.js";
import { ZERO, dec, formatDecimal } from "../money.js";
import { bookedPreview } from "../subscriptions/booking.js";
import type { InvoiceBuilder } from "../subscriptions/invoice-building.js";
import type { BillingStores } from "../subscriptions/ports.js";
import type { BillingReads } from "../subscriptions/reads.js";
import type { Subscription } from "../subscriptions/types.js";

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

/** The currency a card bills in (the engine's default when it names none). */
export const currencyOf = (card: Pick<RateCard, "currency">): string => card.currency ?? "USD";

/** Per currency, what the usage of the current periods of `active` subscriptions costs so far. */
export async function usageCostSoFar(engine: UsagePricing, active: readonly Subscription[]): Promise<Map<string, Decimal>> {
  const out = new Map<string, Decimal>();
  // The period that closes first first: a "once" discount goes to the earliest invoice, so it is counted once (spentOnce).
  const spentOnce = new Set<string>();
  for (const s of [...active].sort((a, b) => a.periodEnd.getTime() - b.periodEnd.getTime())) {
    if (s.status !== "active") continue;
    const card = await engine.reads.card(s.environmentId, s.rateCardId);
    const { usage } = await engine.reads.rates(card, s.fixedRateQuantities);
    const currency = currencyOf(card);
    const lines = usage.length === 0 ? [] : await engine.builder.usageLinesOf(card, usage, s, s.usageSince, s.periodEnd);
    if (lines.length === 0) continue;
    // As the close books it: a draft of those lines dated at the period's end, booked, nothing recorded.
    const draft = engine.builder.newInvoice(s, card, "usage-so-far", lines, s.usageSince, s.periodEnd, s.periodEnd, { finalizesAt: s.periodEnd });
    const cost = dec((await bookedPreview(engine.stores, draft, s.periodEnd, spentOnce)).total);
    out.set(currency, (out.get(currency) ?? ZERO).plus(cost));
  }
  return out;
}

/**
 * Billing state's credit fields: per currency the subject has (or had) credit in, sorted by code,
 * the balance and the available credit (balance − cost so far, may be negative). A currency the
 * subject never had credit in is left out: it pays in arrears there, and an app that stops a
 * customer at zero available credit must not stop one who never bought credit.
 */
export function creditFields(balances: ReadonlyMap<string, string>, cost: ReadonlyMap<string, Decimal>): { balance: CurrencyAmount[]; available: CurrencyAmount[] } {
  const currencies = [...balances.keys()].sort();
  const balance: CurrencyAmount[] = [];
  const available: CurrencyAmount[] = [];
  for (const c of currencies) {
    const b = dec(balances.get(c) ?? "0");
    balance.push({ currencyCode: c, value: formatDecimal(b) });
    available.push({ currencyCode: c, value: formatDecimal(b.minus(cost.get(c) ?? ZERO)) });
  }
  return { balance, available };
}
