/**
 * The lines a seat decrease's credit for unused time is drawn from (DESIGN §13, §15), pure: the
 * period's lines of a rate as a stack, the last billed on top (the seats added last go first),
 * each with what of its unused time is left at the change, and what of that the money its
 * invoice still holds backs (unused-credit.ts values and taxes a credit on what it draws):
 * - A line bills its time from its invoice's creation to the period's end: at the change, the
 *   part of it left is (period end − change) / (period end − creation). What a decrease drew of a
 *   line is kept in the line's own terms (the amount drawn ÷ that part then), so a later decrease
 *   draws only the time the seats still on it have left.
 * - What a credit takes of a line of a void or written-off (uncollectible) invoice is worth
 *   nothing: those seats were never paid for. 1 seat at 5,000 paid, 1 → 3 with half the period
 *   left on an invoice then voided (5,000), 3 → 1 takes off those 2 seats: 0; 1 → 0 then takes the
 *   voided 2 seats and the paid one: 5,000 × ½ = 2,500.
 * - What a credit takes of a paid or open invoice's lines is worth at most what is left of it to
 *   give back (its total less its amount credited, by credit notes and earlier decreases), net of
 *   its exclusive tax in proportion (roomOf): 2 seats at 5,000 + 20% (12,000), a note of 9,600
 *   leaves 2,400, 2,000 of it net; 2 → 1 at half the period is worth 2,000, not 2,500.
 */
import { type Decimal, SCALE, ZERO, dec } from "../money.js";
import { isCarriedCredit } from "./proration.js";
import type { Invoice, InvoiceLine } from "./types.js";

/** A line's discounts. */
export const discountsOf = (l: InvoiceLine): Decimal => (l.discountAmounts ?? []).reduce((a, d) => a.plus(dec(d.amount)), ZERO);

/**
 * Whether a line is a fixed charge (or a proration of one) of the invoice's period: not a credit
 * carried onto it (isCarriedCredit: a resume's credit for the cycle the pause cut short lies on
 * the new cycle's first invoice, but it gives back time of the old one).
 */
export const isFixed = (l: InvoiceLine): boolean => (l.kind === "fixed" || l.kind === "proration") && !isCarriedCredit(l);

/** A line's exclusive tax (an inclusive one is inside its amount). */
export const exclusiveTax = (l: InvoiceLine): Decimal => (l.taxAmounts ?? []).reduce((a, t) => (t.inclusive ? a : a.plus(dec(t.amount))), ZERO);

/**
 * What the credits of other time took off an invoice's total, their amounts and exclusive tax
 * negated: its negative proration lines that are not among the lines `pick` counts as fixed (a
 * carried credit, never a fixed line; with a rate's pick, another card's or rate's unused-time
 * credit too, which gives back time an earlier invoice paid for). Credits are never discounted.
 */
export const otherCreditsOff = (inv: Invoice, pick: (l: InvoiceLine) => boolean): Decimal =>
  inv.lines.reduce((a, l) => (l.kind === "proration" && dec(l.amount).isNegative() && !(isFixed(l) && pick(l)) ? a.plus(dec(l.amount)).plus(exclusiveTax(l)) : a), ZERO).neg();

/** The lesser of two amounts. */
export const minOf = (a: Decimal, b: Decimal): Decimal => (a.lt(b) ? a : b);

/**
 * Whether an invoice's lines give back the tax they booked: a paid one's, and an open one's (it
 * still asks for that tax: a credit to the balance is what the customer pays for the time given
 * back, as change-lines.ts counts an open invoice as paid); a void or uncollectible one's none.
 */
export const owesTax = (inv: Invoice): boolean => inv.status === "paid" || inv.status === "open";

/** Whether an invoice's charge ended unpaid: voided, or written off (uncollectible); none of its lines was paid for. */
export const unpaid = (inv: Invoice): boolean => inv.status === "void" || inv.status === "uncollectible";

/**
 * What is left to give back of invoice `inv` for the lines `pick` selects: its total before the
 * credits of other time on it (otherCreditsOff), less its amount credited (credit notes, earlier
 * decreases), before its exclusive tax (× those lines' net ÷ their net and tax); 0 on a void or
 * uncollectible one. `gross`: with the tax.
 */
export function roomOf(inv: Invoice, pick: (l: InvoiceLine) => boolean, gross = false): Decimal {
  if (unpaid(inv)) return ZERO;
  const kept = dec(inv.total)
    .plus(otherCreditsOff(inv, pick))
    .minus(dec(inv.amountCredited ?? "0"));
  if (kept.lte(0)) return ZERO;
  if (gross) return kept;
  let net = ZERO;
  let tax = ZERO;
  for (const l of inv.lines) {
    if (!isFixed(l) || !pick(l) || !dec(l.amount).gt(0)) continue;
    net = net.plus(dec(l.amount)).minus(discountsOf(l));
    tax = tax.plus(exclusiveTax(l));
  }
  return net.plus(tax).gt(0) ? kept.times(net).div(net.plus(tax)) : kept;
}

/**
 * Where TaxCreditedTerms' amounts keep what the period's decreases drew of a line, in the line's
 * own terms (see the file's comment): `|<invoice ID>#<line index>`, which no rate code's total
 * (`<code>`, or "" for lines of no rate) can be, a rate code having no `|` (line keys are `<code>|…`).
 */
const drawnKey = (inv: Invoice, index: number): string => `|${inv.id}#${index}`;

/** When a credit is drawn: at `at`, in the period ending `periodEnd`. */
export interface DrawnAt {
  at: Date;
  periodEnd: Date;
}

/** The part of a line of `inv` (billed at its creation for the time up to `periodEnd`) still unused at `at`. */
function unusedPart(inv: Invoice, periodEnd: Date, at: Date): Decimal {
  const span = periodEnd.getTime() - inv.createdAt.getTime();
  if (span <= 0) return ZERO;
  return dec(Math.min(span, Math.max(0, periodEnd.getTime() - at.getTime()))).div(span);
}

/**
 * A charge line a credit can draw on: what it has left in its own terms (its net less what was
 * drawn), the part of its time unused at the change, its net and exclusive tax, and its invoice.
 */
export type Slot = { key: string; left: Decimal; unused: Decimal; net: Decimal; tax: Decimal; invoice: Invoice };

/**
 * The lines `pick` selects of the period's invoices `billed` (oldest first) as a stack, the last
 * billed on top: each positive one with what it has left to give back (its amount less discounts,
 * less what decreases drew of it before, `drawn`, and what negative lines of the rate billed after
 * it took off the top, each at its own time), and the exclusive tax booked on it (owesTax: none
 * on a void or uncollectible invoice's line; an open proration invoice's seats still owe theirs).
 */
export function stackOf(billed: readonly Invoice[], pick: (l: InvoiceLine) => boolean, drawn: Readonly<Record<string, string>>, when: DrawnAt): Slot[] {
  const stack: Slot[] = [];
  for (const inv of billed) {
    inv.lines.forEach((l, i) => {
      if (!isFixed(l) || !pick(l)) return;
      const net = dec(l.amount).minus(discountsOf(l));
      if (net.isNegative()) {
        let off = net.neg();
        for (let j = stack.length - 1; j >= 0 && off.gt(0); j--) {
          const slot = stack[j] as Slot;
          const part = unusedPart(slot.invoice, when.periodEnd, inv.createdAt);
          const took = minOf(slot.left.times(part), off);
          if (took.lte(0)) continue;
          slot.left = slot.left.minus(took.div(part));
          off = off.minus(took);
        }
      } else if (net.gt(0)) {
        const key = drawnKey(inv, i);
        const left = net.minus(dec(drawn[key] ?? "0"));
        const unused = unusedPart(inv, when.periodEnd, when.at);
        stack.push({ key, left: left.isNegative() ? ZERO : left, unused, net, tax: owesTax(inv) ? exclusiveTax(l) : ZERO, invoice: inv });
      }
    });
  }
  return stack;
}

/**
 * What a credit drew of one line: `taken` of its unused time (at the change), `full` in the
 * line's own terms, `worth` what the money its invoice still holds backs of it (0 on a void or
 * uncollectible invoice), and the line's exclusive tax ÷ net (`ratio`).
 */
export type Draw = { key: string; invoice: Invoice; taken: Decimal; full: Decimal; worth: Decimal; ratio: Decimal };

/**
 * Draws `amount` of unused time off `stack`, newest first, each line at most what it has left at
 * the change; each part worth at most what is left of its invoice (`rooms`, per invoice ID, taken
 * from `room` on first use and lowered by what is drawn). Lowers the slots' and rooms' left.
 */
export function drawFrom(stack: Slot[], amount: Decimal, room: (inv: Invoice) => Decimal, rooms: Map<string, Decimal>): Draw[] {
  const out: Draw[] = [];
  let rest = amount;
  for (let j = stack.length - 1; j >= 0 && rest.gt(0); j--) {
    const slot = stack[j] as Slot;
    const available = slot.left.times(slot.unused);
    const taken = minOf(available, rest);
    if (taken.lte(0)) continue;
    const backed = rooms.get(slot.invoice.id) ?? room(slot.invoice);
    const worth = backed.gt(0) ? minOf(taken, backed) : ZERO;
    rooms.set(slot.invoice.id, backed.minus(worth));
    const full = taken.eq(available) ? slot.left : minOf(slot.left, taken.div(slot.unused).toDecimalPlaces(SCALE));
    slot.left = slot.left.minus(full);
    out.push({ key: slot.key, invoice: slot.invoice, taken, full, worth, ratio: slot.net.gt(0) ? slot.tax.div(slot.net) : ZERO });
    rest = rest.minus(taken);
  }
  return out;
}
