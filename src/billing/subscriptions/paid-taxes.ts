/**
 * The taxes paid for the time a credit for unused time gives back, per rate (DESIGN §13, §15),
 * pure: what the credit's line books as its taxes wherever it lands (InvoiceLine.paidTax), and what
 * its share of the balance keeps (ProrationCredit.taxAmounts), never the rates or the buyer's tax
 * status of the invoice it lands on.
 * - A credit drawn from charge lines (unused-credit.ts paidTax) takes each of their taxes × the
 *   part drawn / the line's net, per rate (its id and whether it is inclusive). Its exclusive
 *   taxes sum to its exclusive tax, rounded once per credit (`share`), split over the rates in
 *   proportion to their exact amounts; an inclusive one is rounded half up on its own, inside the
 *   credit's amount. Every amount is negative, the taxable amount too: the credit less the
 *   inclusive taxes inside it. 6,774 of a cycle paid 10,000 + 1,000 at 10%: 10% on −6,774, −677.
 * - A credit split (proration.ts takeCredits: part on an invoice, the rest carried) splits its
 *   taxes the same way: the rest keeps its exclusive tax (round(tax × rest / amount)) split over
 *   the rates in proportion, and its inclusive ones round(amount × rest / whole); the part on the
 *   invoice what is left of each.
 */
import { splitInProportion } from "../invoicing/booking.js";
import type { BookedTax } from "../invoicing/booking.js";
import { type Decimal, ZERO, dec, formatDecimal, roundAmount } from "../money.js";

/** One rate's exact tax drawn by a credit (positive), with how the rate was applied, and the part of the credit drawn from lines it taxed (`base`). */
export type DrawnRate = { rate: BookedTax; exact: Decimal; base: Decimal };

/** A rate's key: its id and whether it is inclusive. */
const keyOf = (t: BookedTax): string => `${t.taxRateId}|${t.inclusive}`;

/** Adds to `drawn` (per rate) the taxes `rates` of a line of net `net` of which `part` is drawn. */
export function drawRates(drawn: Map<string, DrawnRate>, rates: readonly BookedTax[], part: Decimal, net: Decimal): void {
  for (const t of rates) {
    const exact = dec(t.amount).times(part).div(net);
    const seen = drawn.get(keyOf(t));
    drawn.set(keyOf(t), { rate: t, exact: (seen?.exact ?? ZERO).plus(exact), base: (seen?.base ?? ZERO).plus(part) });
  }
}

/** −d, never "−0". */
const negated = (d: Decimal): string => formatDecimal(d.isZero() ? ZERO : d.neg());

/**
 * Rates as a credit of `value` books them (negative): the exclusive ones' `share` split in
 * proportion, each inclusive one `inclusive(rate)`. Each rate's taxable amount is the credit less
 * the inclusive taxes inside it, × the part drawn from lines that rate taxed (`base`) / all that was
 * drawn (`drawnTotal`): −10,000 drawn −7,500 from lines at 20% and −2,500 at 10% is taxable −7,500
 * at 20% and −2,500 at 10%, not −10,000 at each. Rates that all taxed the same lines: the credit
 * less the inclusive taxes, each.
 */
function asCredit(rates: readonly DrawnRate[], value: Decimal, share: Decimal, inclusive: (r: DrawnRate) => Decimal, drawnTotal?: Decimal): BookedTax[] {
  const exclusive = rates.filter((r) => !r.rate.inclusive);
  const parts = splitInProportion(
    share,
    exclusive.map((r) => r.exact),
  );
  const inside = rates.map((r) => (r.rate.inclusive ? inclusive(r) : ZERO));
  const taxable = value.minus(inside.reduce((a, t) => a.plus(t), ZERO));
  const whole = (r: DrawnRate) => !drawnTotal?.gt(0) || r.base.eq(drawnTotal);
  return rates.map((r, i) => {
    const amount = r.rate.inclusive ? (inside[i] as Decimal) : (parts[exclusive.indexOf(r)] ?? ZERO);
    const base = whole(r) ? taxable : roundAmount(taxable.times(r.base).div(drawnTotal as Decimal));
    return { ...r.rate, taxableAmount: negated(base), amount: negated(amount) };
  });
}

/** The taxes of a credit of `value` (positive) that gives back `share` of exclusive tax (rounded), from its `drawn` rates, drawn `drawnTotal` in all (taxed lines or not). */
export function creditTaxes(drawn: ReadonlyMap<string, DrawnRate>, value: Decimal, share: Decimal, drawnTotal?: Decimal): BookedTax[] {
  return asCredit([...drawn.values()], value, share, (r) => roundAmount(r.exact), drawnTotal);
}

/**
 * A credit's `taxes` (negative) split when `rest` of its `want` (positive) is carried with
 * exclusive tax `restTax` (positive, rounded): the rest's taxes and those of the part that lands.
 */
export function splitTaxes(taxes: readonly BookedTax[], want: Decimal, rest: Decimal, restTax: Decimal): { rest: BookedTax[]; landed: BookedTax[] } {
  // Each rate's taxable part of the whole credit (want less the inclusive taxes inside it), as its base.
  const inside = taxes.reduce((a, t) => (t.inclusive ? a.plus(dec(t.amount).neg()) : a), ZERO);
  const rates = taxes.map((t) => ({ rate: t, exact: dec(t.amount).neg(), base: dec(t.taxableAmount).neg() }));
  const kept = asCredit(rates, rest, restTax, (r) => roundAmount(r.exact.times(rest).div(want)), want.minus(inside));
  const insideLanded = taxes.reduce((a, t, i) => (t.inclusive ? a.plus(dec(t.amount).neg()).minus(dec(kept[i]?.amount ?? "0").neg()) : a), ZERO);
  const taxable = want.minus(rest).minus(insideLanded);
  // Rates that taxed the same lines: the part landed less its inclusive taxes, each; others what the rest did not keep of theirs.
  const whole = rates.every((r) => r.base.eq(want.minus(inside)));
  const landed = taxes.map((t, i) => ({
    ...t,
    taxableAmount: whole ? negated(taxable) : formatDecimal(dec(t.taxableAmount).minus(dec(kept[i]?.taxableAmount ?? "0"))),
    amount: formatDecimal(dec(t.amount).minus(dec(kept[i]?.amount ?? "0"))),
  }));
  return { rest: kept, landed };
}
