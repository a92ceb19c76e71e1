/**
 * Booking an invoice when it becomes open (DESIGN §15), in the transaction that makes it open:
 * its discounts and taxes (the pure arithmetic of ../invoicing/booking.ts), the buyer and seller
 * it prints, then what earlier invoices carried to it (payments/carries.ts), then the credit it
 * spends (§14, credit-application.ts), then its number. Every path
 * that makes an invoice open goes through finalizeOpen or finalizeAllOpen: a cycle close, the
 * immediate invoice of a change, a draft at the end of its grace period, late usage's adjustment,
 * a credit purchase.
 * - A number comes last, from the environment's sequence row (locked until commit): numbers are
 *   gapless and never reused, and the lock is held for the shortest time.
 * - An empty invoice (no lines, zero total) is kept internal: no discount, tax or number.
 * - A draft shows its discounts, taxes and parties as they would be now (previewBooking), with
 *   nothing recorded.
 * - A credit purchase is neither discounted nor taxed (the credit is, when it is spent).
 */
import { type Decimal, ZERO, dec, formatDecimal } from "../money.js";
import { bookTotals } from "../invoicing/booking.js";
import { takeCarried, withPendingCarried } from "../payments/carries.js";
import { cardOfKey } from "./line-cards.js";
import { applyCredits, chargeLines, grantNegativeTotal, isCreditLine, previewCredits, spendableOfBatch } from "./credit-application.js";
import type { BillingStores, BillingTx, BookingTx } from "./ports.js";
import { type Invoice, type InvoiceLine, isInternal } from "./types.js";

/** `n` in the environment's sequence: `INV-000042`, `INV-CN-000042`. */
export function formatNumber(prefix: string, kind: "invoice" | "credit_note", n: number): string {
  return `${prefix}-${kind === "credit_note" ? "CN-" : ""}${String(n).padStart(6, "0")}`;
}

/** An invoice with its booked fields at their plain values: no discount, no tax (what is not booked shows). */
export function unbooked(inv: Invoice): Invoice {
  return {
    ...inv,
    subtotal: inv.subtotal ?? inv.total,
    totalDiscount: inv.totalDiscount ?? "0",
    totalTax: inv.totalTax ?? "0",
    discounts: inv.discounts ?? [],
    taxAmounts: inv.taxAmounts ?? [],
    notes: inv.notes ?? [],
  };
}

/** Whether discounts and taxes apply: lines to book, and not a credit purchase. */
function bookable(inv: Invoice): boolean {
  return !isInternal(inv) && !inv.lines.some((l) => l.kind === "credit_purchase");
}

/** A credit line's taxes as paid (InvoiceLine.paidTax), when known. */
const paidTaxOf = (l: InvoiceLine | undefined) => (l?.paidTax ? { paidTax: l.paidTax } : {});

/**
 * `inv` with its discounts, taxes and parties as of `at` (lines as they are, before any credit);
 * `record`: the discounts used are recorded (a finalization), else nothing is written (a preview).
 */
export async function bookInvoice(booking: BookingTx, inv: Invoice, at: Date, record: boolean): Promise<Invoice> {
  const parties = await booking.parties(inv);
  const printed = { ...inv, customer: parties.customer, customerName: parties.customerName, seller: parties.seller };
  if (!bookable(inv)) return unbooked(printed);
  const lines = chargeLines({ lines: inv.lines.map((l) => ({ ...l, discountAmounts: [], taxAmounts: [] })) });
  const discounts = await booking.discountsFor(inv, at);
  const taxes = await booking.taxes.taxesFor({
    environmentId: inv.environmentId,
    subjectId: inv.subjectId,
    currency: inv.currency,
    customer: parties.customer,
    cardTaxRateIds: parties.cardTaxRateIds,
    // Late usage of a window of another card, and a change's credit and charge (each naming its
    // card, change-lines.ts), are taxed as that card says.
    lines: lines.map((l, i) => {
      const { windowInvoiceId, key } = inv.lines[i] ?? {};
      const priced = windowInvoiceId ?? (cardOfKey(key) !== null ? key : null);
      const ids = priced ? parties.adjustedCardTaxRateIds?.get(priced) : undefined;
      return ids ? { ...l, cardTaxRateIds: ids } : l;
    }),
  });
  // A credit for unused time is worth what was paid for that time: no current coupon takes part of
  // it (isCreditLine), and it gives back the taxes paid for it where they are known (paidTax).
  const undiscounted = lines.map((l, i) => (isCreditLine(inv.lines[i]) ? { ...l, undiscounted: true, ...paidTaxOf(inv.lines[i]) } : l));
  const booked = bookTotals({ lines: undiscounted, discounts, ratesPerLine: taxes.ratesPerLine, exempt: taxes.exempt });
  if (record && booked.discounts.length > 0) {
    await booking.discounted(
      booked.discounts.map((d) => d.discountId),
      inv.id,
      at,
      inv.environmentId,
    );
  }
  return {
    ...printed,
    lines: inv.lines.map((l, i) => ({ ...l, discountAmounts: booked.lines[i]?.discountAmounts ?? [], taxAmounts: booked.lines[i]?.taxAmounts ?? [] })),
    total: booked.total,
    subtotal: booked.subtotal,
    totalDiscount: booked.totalDiscount,
    totalTax: booked.totalTax,
    discounts: booked.discounts,
    taxAmounts: booked.taxAmounts,
    notes: booked.notes,
  };
}

/**
 * What `inv`'s lines come to after the discounts booking would take of them at `at` (its subtotal
 * booked now, nothing recorded): how much credit for unused time it can take (proration.ts
 * withCredits); undefined without booking (the in-memory fake).
 */
export async function discountedSubtotal(tx: Pick<BillingTx, "booking">, inv: Invoice, at: Date): Promise<Decimal | undefined> {
  if (!tx.booking) return undefined;
  const booked = await bookInvoice(tx.booking, inv, at, false);
  return dec(booked.subtotal ?? booked.total);
}

/** Numbers `list` (by date, then in their order) from one take of the environment's sequence; internal ones get none. */
async function numberAll(booking: BookingTx, list: Invoice[]): Promise<Invoice[]> {
  const out = [...list];
  const byEnv = new Map<string, number[]>();
  list.forEach((inv, k) => {
    if (inv.status === "draft" || isInternal(inv)) return;
    byEnv.set(inv.environmentId, [...(byEnv.get(inv.environmentId) ?? []), k]);
  });
  for (const [env, unordered] of [...byEnv.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    // In the order of their dates (a clock advance closes periods that ended on different days in one batch), then the batch's.
    const ks = [...unordered].sort((a, b) => (list[a] as Invoice).createdAt.getTime() - (list[b] as Invoice).createdAt.getTime() || a - b);
    const { prefix, first } = await booking.nextNumbers(env, "invoice", ks.length);
    ks.forEach((k, j) => {
      out[k] = { ...(out[k] as Invoice), number: formatNumber(prefix, "invoice", first + j) };
    });
  }
  return out;
}

/**
 * Books, credits and numbers `inv`, which becomes open in `tx` at `at` (the subscription's
 * clock): see the file's comment. Anything but an open invoice is returned booked as a preview
 * (nothing recorded, no credit, no number). An open invoice's finalized_at is read from `now`
 * (real time) once its locks are held, as it commits: see finalizeAllOpen.
 */
export async function finalizeOpen(tx: BillingTx, inv: Invoice, at: Date, now: () => Date): Promise<Invoice> {
  return (await finalizeAllOpen(tx, [inv], now, () => at))[0] as Invoice;
}

/**
 * finalizeOpen for a batch (a cycle close's invoices, in one transaction): booked in the order of
 * their dates (then the batch's), so a subject's "once" discount goes to the earliest; credit in the order of
 * their subjects (credit-application.ts), then one take of numbers per environment, by date, then in the batch's order.
 * What booking and credit read of each invoice (parties, candidate discounts, spendable grants)
 * is read for the batch at once where the store can (BookingTx.prefetch, spendableOfBatch); the
 * locks (discounts, grants) are still taken per invoice, in the same order as one by one.
 */
export async function finalizeAllOpen(tx: BillingTx, list: Invoice[], now: () => Date, atOf: (i: Invoice) => Date = (i) => i.createdAt): Promise<Invoice[]> {
  const booking = tx.booking;
  const batch = booking?.prefetch ? await booking.prefetch(list) : booking;
  // Booked in the order of their dates (then the batch's): a subject's "once" discount goes to its earliest invoice.
  const booked: Invoice[] = [...list];
  const byDate = [...list.keys()].sort((a, b) => atOf(list[a] as Invoice).getTime() - atOf(list[b] as Invoice).getTime() || a - b);
  for (const k of byDate) {
    const inv = list[k] as Invoice;
    booked[k] = batch ? await bookInvoice(batch, inv, atOf(inv), inv.status === "open") : unbooked(inv);
  }
  const order = [...booked.keys()].sort((a, b) => {
    const x = booked[a] as Invoice;
    const y = booked[b] as Invoice;
    return x.subjectId < y.subjectId ? -1 : x.subjectId > y.subjectId ? 1 : x.id < y.id ? -1 : x.id > y.id ? 1 : 0;
  });
  // Amounts due below the provider's minimum charge on earlier invoices, taken after discounts and taxes, before credit: in the amount due, not the total.
  for (const k of order) booked[k] = await takeCarried(tx, booked[k] as Invoice, atOf(booked[k] as Invoice));
  const listed = await spendableOfBatch(tx, booked, atOf);
  const credited = [...booked];
  for (const k of order) {
    const inv = booked[k] as Invoice;
    credited[k] = inv.status === "open" ? await applyCredits(tx, inv, atOf(inv), listed.get(inv.id)) : inv;
  }
  const numbered = booking ? await numberAll(booking, credited) : credited;
  // A total below 0 goes to the subject's balance, never to a negative amount due (DESIGN §14), named with its number.
  for (const k of order) await grantNegativeTotal(tx, numbered[k] as Invoice, atOf(numbered[k] as Invoice));
  // Finalized as it commits, after the lock waits above (discounts, grants, the number sequence),
  // not when its lines were computed: a finance export up to an instant already past never misses it.
  const at = now();
  return numbered.map((i) => (i.status === "open" ? { ...i, finalizedAt: at } : i));
}

/**
 * `inv` as it would be booked (discounts, taxes) if it finalized at `at`, before credit: read in a
 * transaction of its own, nothing written. `spentOnce`: "once" discounts an earlier preview of the
 * same reading took (left out here: one is spent on one invoice), to which this one's are added.
 */
export function bookedPreview(stores: Pick<BillingStores, "transaction">, inv: Invoice, at: Date, spentOnce?: Set<string>): Promise<Invoice> {
  return stores.transaction(async (tx) => {
    const booking = tx.booking;
    if (!booking) return unbooked(inv);
    const once = new Set<string>();
    const discountsFor = async (i: Invoice, when: Date) => {
      const offered = (await booking.discountsFor(i, when)).filter((d) => d.duration !== "once" || !spentOnce?.has(d.discountId));
      for (const d of offered) if (d.duration === "once") once.add(d.discountId);
      return offered;
    };
    const view: BookingTx = {
      discountsFor,
      discounted: () => Promise.resolve(), // a preview records nothing
      holdOnce: () => Promise.resolve(true),
      parties: (i) => booking.parties(i),
      taxes: booking.taxes,
      nextNumbers: (...a) => booking.nextNumbers(...a),
    };
    const booked = await bookInvoice(view, inv, at, false);
    for (const d of booked.discounts ?? []) if (once.has(d.discountId)) spentOnce?.add(d.discountId);
    return booked;
  });
}

/**
 * `booked` (discounts and taxes, as of `at`) as finalizeAllOpen would go on with it, nothing
 * written: the amounts its subject still has carried in its currency (takeCarried), then the
 * credit it would spend. A draft's preview and a checkout's quote (checkout-preview.ts).
 */
export async function carriedAndCredited(stores: BillingStores, booked: Invoice, at: Date): Promise<Invoice> {
  return previewCredits(stores, await withPendingCarried(stores.carried, booked), at);
}

/** A draft as it would be booked and credited if it finalized at `at`: read in a transaction of its own, nothing written. */
export async function previewBooking(stores: BillingStores, inv: Invoice, at: Date): Promise<Invoice> {
  return carriedAndCredited(stores, await bookedPreview(stores, inv, at), at);
}

/** What is left to credit of an invoice: its total less what credit notes credited. */
export function creditable(inv: Pick<Invoice, "total" | "amountCredited">): string {
  const left = dec(inv.total).minus(dec(inv.amountCredited ?? "0"));
  return formatDecimal(left.gt(0) ? left : ZERO);
}
