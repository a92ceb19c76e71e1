/**
 * What a credit for unused time gives back of the invoices it was drawn on (DESIGN §13, §15), on
 * their amount credited, as a credit note's does — a seat decrease's (updates.ts), a resume's for
 * the cycle a pause cut short (pauses.ts) and a change of rate card's for the old card (changes.ts
 * writeSwitch; updates.ts past what was paid on another card): a credit note may then credit
 * (refund, credit to the balance, reduce) only what is left of the invoice, and a later credit is
 * valued at what is left (unused-credit.ts fixedTaken). 2 seats at 5,000 paid (10,000), 2 → 1 with half the
 * period left gives back 2,500 of it: a credit note may refund 7,500 more, not 10,000; a refund of
 * all 10,000 first leaves a later decrease nothing to credit. (Lago issues the downgrade's credit
 * as a credit note on the invoice; Stripe caps a credit note at what is left to credit.) 1 seat at
 * 1,000 paid, paused with 28 of 31 days left, resumed: 903 off the resume's invoice, so a note may
 * refund 97 more of the paused cycle's, not 1,000; Pro at 10,000 paid, upgraded to Ent with 29 of
 * 31 days left: Pro's −9,355 on the change's invoice, so a note may refund 645 of Pro's.
 *
 * The database decides between a note and a credit made at once: the change (decrease, resume or
 * change of card) reads every paid or open invoice of the period it valued its credit on (`billed`)
 * under the row lock a credit note takes (credit-notes/ports.ts lockInvoice), and loses its race
 * (retried from a fresh read) when one is not as it was valued (a note committed meanwhile); a
 * note waits for the lock, then reads the amount credited the change wrote.
 *
 * What a credit draws of an open invoice (seats added by a change whose charge is not paid yet) is
 * not money received: it lowers that invoice's amount due instead of going to the balance, as a
 * credit note's reduce_amount_due does (a credit_balance note is refused on an open invoice for
 * the same reason), so it cannot outlive the invoice being voided or written off. 2 seats at
 * 1,000 + 20% paid, 2 → 4 at half the period left on an invoice of 1,200 still open, 4 → 2: that
 * invoice asks 0 (paid by the decrease) and the balance gets nothing, where it got 1,200 that
 * voiding the invoice left with the customer. Not while a payment of the invoice waits for the
 * customer or is processing for more (the credit then goes to the balance, as before), nor beyond
 * its amount due (what credits applied to it paid goes to the balance). A resume's credit likewise
 * (lessReduction): seats added while their charge is open, then paused, lower that invoice's
 * amount due, and only the rest is credited on the resume's invoice. A change of rate card's
 * credit is on the change's invoice itself, as its preview and checkout showed it: an open
 * invoice it drew on stays as it asks (the old card's time it still asks for was credited now).
 */
import { recordCancels } from "../payments/cancels.js";
import { type Decimal, ZERO, dec, formatDecimal, roundAmount } from "../money.js";
import { checkTransition, transitionEvents } from "./invoice-states.js";
import type { BillLine } from "./invoice-building.js";
import { cardOfKey } from "./line-cards.js";
import { splitTaxes } from "./paid-taxes.js";
import type { BillingTx } from "./ports.js";
import { type Invoice, type ProrationCredit, type Subscription, amountDueOf } from "./types.js";
import { paidTax, taxCreditedIn } from "./unused-credit.js";

/**
 * What a change of rate card's credit for the old card (its negative lines naming a card,
 * change-lines.ts) gives back of the period's invoices `billed`, per invoice ID: drawn, as a seat
 * decrease's is (unused-credit.ts paidTax), from every fixed and proration line of the period
 * (those it was valued on), newest first, each part with the exclusive tax booked on it.
 */
export function changeGivenBack(lines: readonly BillLine[], billed: readonly Invoice[], s: Subscription): Map<string, Decimal> {
  const credits = lines.map((l) => (l.amount.isNegative() && cardOfKey(l.key) !== null ? l : null));
  return credits.some((l) => l !== null) ? paidTax(credits, billed, taxCreditedIn(s), () => () => true).givenBack : new Map();
}

/**
 * `credit` (a resume's, its exclusive tax apart) less `off`, what it lowers an open invoice's
 * amount due by (openReductions, net and tax): none when that is all of it; else the rest, its
 * tax the share of it the rest is, round(tax × rest / whole) half up (as proration.ts takeCredits
 * splits one), and its share of the taxes paid per rate (taxAmounts), which its line gives back
 * wherever it lands, whatever that invoice's rates. `money` prints an amount for its description.
 */
export function lessReduction(credit: ProrationCredit, off: Decimal, money: (d: Decimal) => string): ProrationCredit[] {
  if (off.lte(0)) return [credit];
  const tax = dec(credit.tax ?? "0");
  const whole = dec(credit.amount).plus(tax).neg();
  const rest = whole.minus(off);
  if (rest.lte(0)) return [];
  const restTax = roundAmount(tax.times(rest).div(whole));
  const description = `${credit.description}, less ${money(off)} off the amount due of the open invoice it was charged on`;
  // The rest keeps its share of the taxes paid, per rate (paid-taxes.ts splitTaxes), which its line books wherever it lands.
  const net = rest.plus(restTax);
  const taxAmounts = credit.taxAmounts ? { taxAmounts: splitTaxes(credit.taxAmounts, dec(credit.amount).neg(), net, restTax.neg()).rest } : {};
  return [{ description, amount: formatDecimal(net.neg()), ...(credit.tax === undefined ? {} : { tax: formatDecimal(restTax) }), ...taxAmounts }];
}

/**
 * Of each credit's draws (paidTax's `draws`, per invoice ID), what lowers an open invoice's
 * amount due instead of going to the balance (see the file's comment), per credit and per invoice:
 * an open invoice's amount due shared by the credits in their order; none of an invoice whose
 * payment waits for the customer or is processing. Nothing without credit-note writes (`tx`).
 */
export function openReductions(tx: BillingTx, billed: readonly Invoice[], draws: readonly ReadonlyMap<string, Decimal>[]): { perCredit: Decimal[]; perInvoice: Map<string, Decimal> } {
  const room = new Map<string, Decimal>();
  if (tx.creditNotes) for (const i of billed) if (i.status === "open" && !i.payment?.actionRequired && !i.payment?.processing) room.set(i.id, dec(amountDueOf(i)));
  const perInvoice = new Map<string, Decimal>();
  const perCredit = draws.map((d) => {
    let off = ZERO;
    for (const [id, amount] of d) {
      const left = room.get(id);
      if (!left?.gt(0)) continue;
      const take = amount.lt(left) ? amount : left;
      room.set(id, left.minus(take));
      perInvoice.set(id, (perInvoice.get(id) ?? ZERO).plus(take));
      off = off.plus(take);
    }
    return off;
  });
  return { perCredit, perInvoice };
}

/**
 * Records on the period's invoices `billed` what the change's credit gives back of each
 * (`givenBack`, per invoice ID: unused-credit.ts paidTax), in `tx`, never beyond an invoice's
 * total. Throws `moved()` when an invoice the credit was valued on changed since it was read.
 * Nothing without credit-note writes (the in-memory fake).
 */
export async function recordGivenBack(
  tx: BillingTx,
  billed: readonly Invoice[],
  givenBack: ReadonlyMap<string, Decimal>,
  reductions: ReadonlyMap<string, Decimal>,
  at: { clock: Date; real: Date },
  moved: () => Error,
): Promise<void> {
  const notes = tx.creditNotes;
  if (!notes || ![...givenBack.values()].some((a) => a.gt(0))) return;
  // In ID order, so that two changes lock the same invoices in the same order.
  const valuedOn = billed.filter((i) => i.status === "paid" || i.status === "open").sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const locked = new Map<string, Invoice>();
  for (const inv of valuedOn) {
    const now = await notes.lockInvoice(inv.environmentId, inv.id);
    const same = now?.status === inv.status && dec(now.amountCredited ?? "0").eq(dec(inv.amountCredited ?? "0")) && dec(amountDueOf(now)).eq(dec(amountDueOf(inv)));
    if (!now || !same || Boolean(now.payment?.actionRequired) !== Boolean(inv.payment?.actionRequired) || Boolean(now.payment?.processing) !== Boolean(inv.payment?.processing)) throw moved();
    locked.set(inv.id, now);
  }
  for (const [id, amount] of givenBack) {
    const inv = locked.get(id);
    if (!inv || amount.lte(0)) continue;
    const room = dec(inv.total).minus(dec(inv.amountCredited ?? "0"));
    const add = amount.lt(room) ? amount : room;
    if (add.gt(ZERO) && !(await notes.addCredited(inv.environmentId, id, formatDecimal(add)))) throw moved();
  }
  for (const [id, off] of reductions) {
    const inv = locked.get(id);
    if (inv) await reduce(tx, inv, off, at, moved);
  }
}

/** Lowers open invoice `inv`'s amount due by `off` (its share of the credit); at 0 it is paid, as a reduce_amount_due note pays it. */
async function reduce(tx: BillingTx, inv: Invoice, off: Decimal, { clock, real }: { clock: Date; real: Date }, moved: () => Error): Promise<void> {
  const notes = tx.creditNotes;
  if (!notes || off.lte(0)) return;
  if (!(await notes.reduceAmountDue(inv.environmentId, inv.id, formatDecimal(off), clock))) throw moved();
  if (!dec(amountDueOf(inv)).minus(off).isZero() || !(await notes.markPaid(inv.environmentId, inv.id, clock))) return;
  const credited = formatDecimal(dec(inv.amountCredited ?? "0").plus(off));
  await tx.emit(transitionEvents(checkTransition("open", "paid"), [{ ...inv, status: "paid", amountDue: "0", amountCredited: credited }]));
  // Its dunning retries end, on real time as the sweep reads it (as for a note that pays it).
  if (tx.dunning) await recordCancels(tx.dunning, inv.environmentId, [inv.id], real, { paidBy: "credit_note" });
}
