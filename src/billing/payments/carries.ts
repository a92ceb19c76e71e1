/**
 * An amount due below the payment provider's minimum charge (Stripe refuses a PaymentIntent under
 * USD 0.50 with amount_too_small, whatever the card), carried to the subject's next invoice as
 * Stripe Billing does (https://docs.stripe.com/currencies#minimum-and-maximum-charge-amounts):
 * - the attempt's decision marks the invoice paid, settled by the carry (dunning.ts settling,
 *   InvoicePayment.carried): no charge, no failure, no retry, no policy; in the transaction that
 *   makes it paid (record.ts) the amount is written as a carried debit keyed by the invoice's ID
 *   (the database's primary key), so a retried attempt or two workers racing on it carry it once;
 * - the subject's next invoice in that currency that becomes open (booking.ts finalizeAllOpen)
 *   takes every debit still pending, by one conditional UPDATE (two finalizations never both take
 *   one), after discounts and taxes, before credit, as Stripe's starting_balance: kept in its
 *   `carriedIn`, outside its subtotal and total (the source invoice's total booked it: finance
 *   counts it there, once), in its amount due; credit may pay it like the rest. An invoice whose
 *   own total is 0 takes it too: its amount due, below the minimum again, is carried again (the
 *   same amount, in no invoice's total but the first's);
 * - until then it stays pending, owed, whatever becomes of the subscription (a cancelled one's
 *   subject still owes it: its next invoice in that currency, of any subscription, takes it);
 * - an invoice that took it and is voided gives it back in the void's transaction (releaseCarried):
 *   pending again, the next invoice takes it; one written off (uncollectible) keeps it, written
 *   off with it.
 * Never on a credit purchase's invoice (neither discounted, taxed nor credited) or an invoice kept
 * internal (no lines, zero total).
 */
import { type Decimal, ZERO, dec, formatDecimal } from "../money.js";
import type { Invoice } from "../subscriptions/types.js";

/** A debit carried from invoice `sourceInvoiceId` (numbered `sourceNumber`), `amount` in its currency's smallest unit. */
export type CarriedDebit = NonNullable<Invoice["carriedIn"]>[number];

/** The carried debits' writes of a billing transaction. */
export interface CarryWrites {
  /** Records invoice `i`'s amount due as carried at `at`; false when it already was (its key). */
  carry(i: Pick<Invoice, "id" | "environmentId" | "subjectId" | "currency" | "number">, amount: string, at: Date): Promise<boolean>;
  /** Takes for invoice `invoiceId` every debit of the subject in `currency` still pending, at `at`; the ones it took, oldest first. */
  take(environmentId: string, subjectId: string, currency: string, invoiceId: string, at: Date): Promise<CarriedDebit[]>;
  /** Gives back the debits invoice `invoiceId` took (it was voided: it collects nothing), pending again for the subject's next invoice; how many. */
  release(environmentId: string, invoiceId: string): Promise<number>;
}

/** The carried debits' reads. */
export interface CarryReads {
  /** Per currency, the sum of the subject's debits not taken by an invoice yet (still owed), by currency code. */
  pending(environmentId: string, subjectId: string): Promise<{ currency: string; amount: string }[]>;
  /** The subject's debits in `currency` not taken yet, oldest first (what its next invoice would take). */
  pendingIn(environmentId: string, subjectId: string, currency: string): Promise<CarriedDebit[]>;
}

/** What a carried debit says on the invoice that took it. */
export function carriedDescription(d: Pick<CarriedDebit, "sourceNumber" | "sourceInvoiceId">): string {
  return `Balance carried from ${d.sourceNumber ?? d.sourceInvoiceId} (below the minimum charge)`;
}

/** Whether invoice `inv` (open) takes pending debits: not a credit purchase, not kept internal. */
export function takesCarried(inv: Pick<Invoice, "status" | "lines" | "total">): boolean {
  return inv.status === "open" && inv.lines.length > 0 && !inv.lines.some((l) => l.kind === "credit_purchase");
}

/** The sum of what `inv` took of carried debits (0: none). */
export function carriedInOf(inv: Pick<Invoice, "carriedIn">): Decimal {
  return (inv.carriedIn ?? []).reduce((sum, d) => sum.plus(dec(d.amount)), ZERO);
}

/** `inv` (booked: discounts and taxes) with the carried `debits` taken: its total unchanged, its amount due (before credit) raised by their sum. */
export function withCarried(inv: Invoice, debits: readonly CarriedDebit[]): Invoice {
  if (debits.length === 0) return inv;
  const carriedIn = [...(inv.carriedIn ?? []), ...debits];
  return { ...inv, carriedIn, amountDue: formatDecimal(dec(inv.total).plus(carriedInOf({ carriedIn }))) };
}

/**
 * `inv` (booked, before credit) as it would be if it became open now: with the debits of its
 * subject still pending in its currency, as takeCarried would take them; nothing taken. What a
 * draft's preview and a checkout's quote show (booking.ts previewBooking, checkout-preview.ts).
 */
export async function withPendingCarried(reads: CarryReads | undefined, inv: Invoice): Promise<Invoice> {
  if (!reads || !takesCarried({ ...inv, status: "open" })) return inv;
  return withCarried(inv, await reads.pendingIn(inv.environmentId, inv.subjectId, inv.currency));
}

/** Takes the pending debits of `inv`'s subject onto it (open, see takesCarried), in transaction `tx`. */
export async function takeCarried(tx: { carries?: CarryWrites }, inv: Invoice, at: Date): Promise<Invoice> {
  if (!tx.carries || !takesCarried(inv)) return inv;
  return withCarried(inv, await tx.carries.take(inv.environmentId, inv.subjectId, inv.currency, inv.id, at));
}

/** Gives back, in the transaction `tx` that voids invoice `inv`, the debits it took: pending again (owed, the next invoice takes them). */
export async function releaseCarried(tx: { carries?: CarryWrites }, inv: Pick<Invoice, "environmentId" | "id">): Promise<void> {
  await tx.carries?.release(inv.environmentId, inv.id);
}
