/**
 * An upgrade of rate card whose credit outweighs its charge once taxed (DESIGN §13: a credit
 * never becomes a negative invoice). The upgrade is decided on the fixed-price difference before
 * tax, but its credit for the old card gives back the tax paid for that time and its charge for
 * the new card is taxed by the new card's rates (change-lines.ts): where the tax paid is higher,
 * the two lines cost the buyer less than nothing (A 100.00 paid + 20% → B 110.00 untaxed with
 * half left: −50.00 − 10.00 tax + 55.00 = −5.00).
 * - As a seat decrease's net credit (updates.ts, proration.ts netOfChange): the two lines leave
 *   the invoice and what they add to it as booked goes to the subject's credit balance: the
 *   invoice's booked total less its booked total without them, so a discount the other lines
 *   (the old card's usage) take again once they leave is not counted twice (an amount off spread
 *   over the usage and the new card's charge would otherwise go to the balance in part and be
 *   taken whole again by the usage)
 *   (grantProrationCredits), one credit naming both ("Net of …"; the credit alone when the
 *   charge rounded to nothing). The invoice keeps the old card's usage, if any, which that
 *   credit then pays like any credit. A "once" amount off is spent whole on the change lines
 *   (booking caps only a forever or repeating one at the invoice's net) and ends with them:
 *   1,000 → 1,100 with half left under 300 off once, −500 + 550 − 300: 250 to the balance; one
 *   the lines that stay take too is split, its rest held for them (spendOnce).
 * - The lines are booked as the invoice would book them now, nothing recorded (a draft is booked
 *   at its finalization, its proration lines as written); without booking (the in-memory fake)
 *   nothing is taxed and the lines' pre-tax sum is the rounded difference, never negative.
 * - Other credits to the balance are what the customer paid, or will pay, for the part credited:
 *   a seat decrease's credit is its unused time net of the period's discounts (unused-credit.ts)
 *   plus the exclusive tax booked on what it gives back (paidTax: 20% exclusive, 500.00 of
 *   unused seat time is a credit of 600.00). (A change of usage terms' credit is no credit to the
 *   balance: an adjustment line of the invoice that bills its window, usage-term-changes.ts.) A
 *   seat change's increases are taxed as booked now (taxedLines). An inclusive tax is inside the
 *   amount, which stays as it is.
 */
import { type Decimal, dec, formatDecimal, ZERO } from "../money.js";
import { bookInvoice } from "./booking.js";
import { chargeLines } from "./credit-application.js";
import type { BillLine } from "./invoice-building.js";
import { cardOfKey } from "./line-cards.js";
import type { BillingTx, BookingTx } from "./ports.js";
import { lostRace } from "./races.js";
import type { Invoice, InvoiceLine, ProrationCredit } from "./types.js";

/** Whether `l` is a change's credit or charge line: a proration naming the card that priced it. */
function isChangeLine(l: Pick<InvoiceLine, "kind" | "key">): boolean {
  return l.kind === "proration" && cardOfKey(l.key) !== null;
}

/**
 * Records the "once" discounts the change lines of `inv` took (booked with them, `full`, not
 * without, `rest`). One the lines that stay do not take has had its invoice: its part goes to the
 * balance with the change lines' net, and it ends (300 off once, −500 + 550 takes 300: 250 to the
 * balance, the coupon spent, not taken again by the next period's 1,100). One they take too is
 * split: the change lines' part (what `full` took of it less what `rest` took) goes to the balance,
 * and it is held for `inv` (which keeps the id), offered there less that part when it is booked
 * again (late usage, its finalization) and to no other invoice. 3,000 off once, −500 + 1,000 for
 * the upgrade and 500 of usage: 1,500 taken, 500 by the usage alone, so 1,000 held as taken and
 * at most 2,000 off the usage at the close, however much late usage reaches it; a percent off,
 * the usage lines of `inv` only (not the next period's invoice).
 */
async function spendOnce(booking: BookingTx, inv: Invoice, full: Invoice, rest: Invoice, at: Date): Promise<void> {
  const read = new Map((await booking.discountsFor(inv, at)).filter((d) => d.duration === "once").map((d) => [d.discountId, d.onceTaken ?? null]));
  const took = (i: Invoice) => new Map((i.discounts ?? []).filter((d) => read.has(d.discountId)).map((d) => [d.discountId, dec(d.amount)]));
  const [all, stays] = [took(full), took(rest)];
  const spent = [...all.keys()].filter((id) => !stays.has(id));
  const held = [...all].flatMap(([discountId, amount]) => {
    const left = stays.get(discountId);
    if (left === undefined) return [];
    const taken = amount.minus(left);
    return [{ discountId, read: read.get(discountId) ?? null, taken: formatDecimal(taken.isNegative() ? ZERO : taken) }];
  });
  if (all.size === 0) return;
  // The bookings read the discounts unlocked (a draft's): one another invoice's finalization, or
  // another upgrade, took or held meanwhile is not this change's to take; it starts over from a fresh read.
  const holds = [...spent.map((discountId) => ({ discountId, read: read.get(discountId) ?? null })), ...held];
  if (!(await booking.holdOnce(holds, inv.id, inv.environmentId))) throw lostRace(inv.subscriptionId);
  if (spent.length > 0) await booking.discounted(spent, inv.id, at, inv.environmentId);
}

/**
 * `inv` (a change's invoice, `at` on the subscription's clock) without its change lines when they
 * net to a credit once booked, and that credit (a negative amount) for the subject's balance;
 * else `inv` as it is and no credit.
 */
export async function changeCredit(tx: BillingTx, inv: Invoice, at: Date): Promise<{ invoice: Invoice; credits: ProrationCredit[]; charge?: NewCardCharge }> {
  const unchanged = { invoice: inv, credits: [] };
  if (!tx.booking || !inv.lines.some(isChangeLine)) return unchanged;
  const changeLines = inv.lines.filter(isChangeLine);
  const kept = inv.lines.filter((l) => !isChangeLine(l));
  const total = kept.reduce((acc, l) => acc.plus(dec(l.amount)), ZERO);
  const without = { ...inv, lines: kept, total: formatDecimal(total) };
  // What the change lines add to the invoice as booked, its discounts spread again over the lines that stay.
  const full = await bookInvoice(tx.booking, inv, at, false);
  const rest = await bookInvoice(tx.booking, without, at, false);
  const net = dec(full.total).minus(dec(rest.total));
  if (!net.isNegative()) return unchanged;
  await spendOnce(tx.booking, inv, full, rest, at);
  const named = changeLines.length === 1 ? (changeLines[0]?.description ?? "") : `Net of ${changeLines.map((l) => l.description).join("; ")}`;
  const description = named.length > 1000 ? `${named.slice(0, 997)}...` : named;
  return { invoice: without, credits: [{ description, amount: formatDecimal(net) }], charge: newCardCharge(full, rest) };
}

/** What a change charged for the new card's time and what discounts took of it (decimal strings), its lines gone to the balance (change-lines.ts ChangeChargeTerms). */
export interface NewCardCharge {
  charged: string;
  discounted: string;
}

/**
 * The new card's charge lines of `full` (a change's invoice as booked with its lines): their
 * amounts, and what discounts took of them: what `full` took in all less what `rest` (booked
 * without the change lines) took, at most their amount. A coupon the usage also takes is spread
 * over both when booked with them, so the lines' own share of it is not what they took: 1,200 off
 * once over B's 1,000 and 500 of usage books 800 on B, but usage alone takes 500, so B took 700.
 */
function newCardCharge(full: Invoice, rest: Invoice): NewCardCharge {
  const charged = full.lines.filter((l) => isChangeLine(l) && dec(l.amount).gt(0)).reduce((a, l) => a.plus(dec(l.amount)), ZERO);
  const discounts = (i: Invoice) => (i.discounts ?? []).reduce((a, d) => a.plus(dec(d.amount)), ZERO);
  const took = discounts(full).minus(discounts(rest));
  const discounted = took.isNegative() ? ZERO : took.gt(charged) ? charged : took;
  return { charged: formatDecimal(charged), discounted: formatDecimal(discounted) };
}

/**
 * `lines` (already net of their discounts: a seat change's increases as booked now) at what each costs the buyer once an invoice of
 * them (`invoiceOf`) is booked at `at`, nothing recorded and no discount taken again: its amount plus its
 * exclusive tax (chargeLines; an inclusive tax is inside the amount). A credit that gained tax
 * says so in its description (`money` prints the tax). As they are without booking (the
 * in-memory fake).
 */
export async function taxedLines(tx: BillingTx, invoiceOf: (lines: BillLine[]) => Invoice, lines: readonly BillLine[], at: Date, money: (d: Decimal) => string): Promise<BillLine[]> {
  const booking = tx.booking;
  if (!booking || lines.length === 0) return [...lines];
  const undiscounted: BookingTx = {
    discountsFor: () => Promise.resolve([]), // the lines are net of their discounts already
    discounted: () => Promise.resolve(),
    holdOnce: () => Promise.resolve(true),
    parties: (i) => booking.parties(i),
    taxes: booking.taxes,
    nextNumbers: (...a) => booking.nextNumbers(...a),
  };
  const costs = chargeLines(await bookInvoice(undiscounted, invoiceOf([...lines]), at, false));
  return lines.map((l, i) => {
    const amount = dec(costs[i]?.amount ?? l.amount);
    const tax = amount.minus(l.amount).abs();
    if (tax.isZero()) return l;
    return { ...l, amount, description: l.amount.isNegative() ? `${l.description}, incl. tax: ${money(tax)}` : l.description };
  });
}
