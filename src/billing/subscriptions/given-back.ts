/**
 * What a seat decrease's credit gives back of the invoices it was drawn on (DESIGN §13, §15), on
 * their amount credited, as a credit note's does: a credit note may then credit (refund, credit
 * to the balance, reduce) only what is left of the invoice, and a later decrease is valued at what
 * is left (unused-credit.ts fixedTaken). 2 seats at 5,000 paid (10,000), 2 → 1 with half the
 * period left gives back 2,500 of it: a credit note may refund 7,500 more, not 10,000; a refund of
 * all 10,000 first leaves a later decrease nothing to credit. (Lago issues the downgrade's credit
 * as a credit note on the invoice; Stripe caps a credit note at what is left to credit.)
 *
 * The database decides between a note and a decrease running at once: the decrease reads every
 * paid or open invoice of the period it valued its credit on (`billed`) under the row lock a
 * credit note takes (credit-notes/ports.ts lockInvoice), and loses its race (retried from a fresh
 * read) when one is not as it was valued (a note committed meanwhile); a note waits for the lock,
 * then reads the amount credited the decrease wrote.
 */
import { type Decimal, ZERO, dec, formatDecimal } from "../money.js";
import type { BillingTx } from "./ports.js";
import type { Invoice } from "./types.js";

/**
 * Records on the period's invoices `billed` what the change's credit gives back of each
 * (`givenBack`, per invoice ID: unused-credit.ts paidTax), in `tx`, never beyond an invoice's
 * total. Throws `moved()` when an invoice the credit was valued on changed since it was read.
 * Nothing without credit-note writes (the in-memory fake).
 */
export async function recordGivenBack(tx: BillingTx, billed: readonly Invoice[], givenBack: ReadonlyMap<string, Decimal>, moved: () => Error): Promise<void> {
  const notes = tx.creditNotes;
  if (!notes || ![...givenBack.values()].some((a) => a.gt(0))) return;
  // In ID order, so that two changes lock the same invoices in the same order.
  const valuedOn = billed.filter((i) => i.status === "paid" || i.status === "open").sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const locked = new Map<string, Invoice>();
  for (const inv of valuedOn) {
    const now = await notes.lockInvoice(inv.environmentId, inv.id);
    if (!now || now.status !== inv.status || !dec(now.amountCredited ?? "0").eq(dec(inv.amountCredited ?? "0"))) throw moved();
    locked.set(inv.id, now);
  }
  for (const [id, amount] of givenBack) {
    const inv = locked.get(id);
    if (!inv || amount.lte(0)) continue;
    const room = dec(inv.total).minus(dec(inv.amountCredited ?? "0"));
    const add = amount.lt(room) ? amount : room;
    if (add.gt(ZERO) && !(await notes.addCredited(inv.environmentId, id, formatDecimal(add)))) throw moved();
  }
}
