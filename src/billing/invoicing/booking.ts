/**
 * The arithmetic of a booked invoice (DESIGN §15), pure: line amounts → discounts → subtotal →
 * tax per line → total. Every amount is in whole smallest units of the invoice's currency, and
 * each step is rounded to the smallest unit half-up (roundAmount), so JPY, USD and KWD differ only
 * in how the units are printed. Credits (§14) come after, on the total.
 *
 * - Discounts apply in their order, each to the lines it covers (its rate codes, or all; never a
 *   line marked `undiscounted`, a credit for unused time, which is worth what was paid for that
 *   time and no current coupon takes a part of), on what earlier discounts left: a percent of that base, rounded; an amount capped at that base and, unless
 *   it is "once", at what all the invoice's lines come to after earlier discounts, credit lines included (a forever or repeating amount off never takes
 *   more than the invoice's net: its rest applies next period; a "once" one ends with this invoice, so it is spent whole and what the
 *   change lines then net goes to the balance, change-credit.ts: 300 off once, −500 + 550 takes 300, 250 to the balance). A
 *   base of zero or less takes nothing. Each discount is split over its lines in proportion to
 *   their amounts, rounded down, the units left over going to the largest remainders (the
 *   earlier line on a tie), so the split sums exactly to the discount.
 * - Tax per line, on the line's amount after discounts: an exclusive rate p gives
 *   round(taxable × p / 100) on top; inclusive rates (P their sum) are inside the amount, each
 *   round(amount × p / (100 + P)), and the taxable amount is the amount less them. An exempt or
 *   reverse-charge buyer pays no tax; the invoice prints a note instead. A credit for unused time
 *   with the taxes paid for that time (`paidTax`) has those as its taxes, whatever the rates and
 *   the buyer's exemption now: 6,774 unused of a cycle paid at 10% gives back 677 under the 10%
 *   rate on an invoice taxed at 20% (not 1,355), or on an exempt one; paid exempt, none.
 * - subtotal = Σ lines − Σ discounts; total = subtotal + Σ exclusive tax; total_tax = Σ every tax.
 */
import type { BookingDiscount } from "../coupons/types.js";
import { type Decimal, ZERO, dec, formatDecimal, roundAmount } from "../money.js";
import { type AppliedTaxRate, REVERSE_CHARGE_NOTE, TAX_EXEMPT_NOTE, type TaxExempt } from "../taxes/types.js";

const HUNDRED = dec(100);

export interface BookedDiscount {
  discountId: string;
  couponId: string;
  name: string;
  amount: string;
}

export interface BookedTax {
  taxRateId: string;
  displayName: string;
  percentage: string;
  inclusive: boolean;
  taxableAmount: string;
  amount: string;
}

export interface BookedLine {
  discountAmounts: BookedDiscount[];
  taxAmounts: BookedTax[];
}

export interface BookedTotals {
  lines: BookedLine[];
  discounts: BookedDiscount[];
  taxAmounts: BookedTax[];
  notes: string[];
  subtotal: string;
  totalDiscount: string;
  totalTax: string;
  total: string;
}

export interface BookingInput {
  /** `undiscounted`: no discount covers the line (a credit for unused time, valued at what was paid); `paidTax`: its taxes, fixed (as paid). */
  lines: readonly { rateCode: string | null; amount: string; undiscounted?: boolean; paidTax?: readonly BookedTax[] }[];
  discounts: readonly BookingDiscount[];
  /** Per line, the rates that apply (empty: none). */
  ratesPerLine: readonly (readonly AppliedTaxRate[])[];
  exempt: TaxExempt;
}

/**
 * `amount` split over `weights` in proportion, each part rounded down and the units left over
 * given to the largest remainders (the earlier index on a tie): the parts sum to `amount` exactly.
 */
export function splitInProportion(amount: Decimal, weights: readonly Decimal[]): Decimal[] {
  const whole = weights.reduce((a, w) => a.plus(w), ZERO);
  if (whole.isZero()) return weights.map(() => ZERO);
  const exact = weights.map((w) => amount.times(w).div(whole));
  const parts = exact.map((x) => x.floor());
  let left = amount.minus(parts.reduce((a, p) => a.plus(p), ZERO)).toNumber();
  const order = exact.map((x, i) => ({ i, r: x.minus(x.floor()) })).sort((a, b) => b.r.comparedTo(a.r) || a.i - b.i);
  for (const { i } of order) {
    if (left <= 0) break;
    parts[i] = (parts[i] as Decimal).plus(1);
    left--;
  }
  return parts;
}

/** The discounts of `input` on its lines: what each took, and each line's amount after them. */
function applyDiscounts(input: BookingInput): { net: Decimal[]; perLine: BookedDiscount[][]; taken: BookedDiscount[] } {
  const net = input.lines.map((l) => dec(l.amount));
  const perLine: BookedDiscount[][] = input.lines.map(() => []);
  const taken: BookedDiscount[] = [];
  for (const d of input.discounts) {
    const covers = (l: BookingInput["lines"][number]) => !l.undiscounted && (d.appliesToRateCodes.length === 0 || (l.rateCode !== null && d.appliesToRateCodes.includes(l.rateCode)));
    const covered = input.lines.flatMap((l, i) => (covers(l) ? [i] : []));
    const base = covered.reduce((a, i) => a.plus(net[i] as Decimal), ZERO);
    if (base.lte(0)) continue;
    let amount = d.percentOff !== null ? roundAmount(base.times(dec(d.percentOff)).div(HUNDRED)) : roundAmount(dec(d.amountOff ?? "0"));
    if (amount.gt(base)) amount = base;
    // A forever or repeating amount off never takes more than the invoice comes to, its credit lines included (its rest applies next
    // period); a "once" one ends with this invoice, so it takes its whole base and the change lines' net goes to the balance.
    const whole = net.reduce((a, n) => a.plus(n), ZERO);
    if (d.percentOff === null && d.duration !== "once" && amount.gt(whole)) amount = whole;
    if (amount.lte(0)) continue;
    const parts = splitInProportion(
      amount,
      covered.map((i) => net[i] as Decimal),
    );
    const record = { discountId: d.discountId, couponId: d.couponId, name: d.name };
    covered.forEach((i, k) => {
      const part = parts[k] as Decimal;
      if (part.isZero()) return;
      net[i] = (net[i] as Decimal).minus(part);
      (perLine[i] as BookedDiscount[]).push({ ...record, amount: formatDecimal(part) });
    });
    taken.push({ ...record, amount: formatDecimal(amount) });
  }
  return { net, perLine, taken };
}

/** One line's taxes on `amount` (after discounts). */
export function lineTaxes(amount: Decimal, rates: readonly AppliedTaxRate[]): BookedTax[] {
  const inclusive = rates.filter((r) => r.inclusive);
  const sumInclusive = inclusive.reduce((a, r) => a.plus(dec(r.percentage)), ZERO);
  const inclusiveTaxes = inclusive.map((r) => roundAmount(amount.times(dec(r.percentage)).div(HUNDRED.plus(sumInclusive))));
  const taxable = amount.minus(inclusiveTaxes.reduce((a, t) => a.plus(t), ZERO));
  return rates.map((r) => {
    const tax = r.inclusive ? (inclusiveTaxes[inclusive.indexOf(r)] as Decimal) : roundAmount(taxable.times(dec(r.percentage)).div(HUNDRED));
    return { taxRateId: r.id, displayName: r.displayName, percentage: r.percentage, inclusive: r.inclusive, taxableAmount: formatDecimal(taxable), amount: formatDecimal(tax) };
  });
}

/** The booked totals of an invoice's lines (see the file's comment). */
export function bookTotals(input: BookingInput): BookedTotals {
  const { net, perLine, taken } = applyDiscounts(input);
  const taxed = input.exempt === "none";
  const lineTax = net.map((amount, i) => input.lines[i]?.paidTax?.map((t) => ({ ...t })) ?? (taxed ? lineTaxes(amount, input.ratesPerLine[i] ?? []) : []));
  const byRate = new Map<string, BookedTax>();
  let exclusive = ZERO;
  let allTax = ZERO;
  for (const taxes of lineTax) {
    for (const t of taxes) {
      const amount = dec(t.amount);
      allTax = allTax.plus(amount);
      if (!t.inclusive) exclusive = exclusive.plus(amount);
      const seen = byRate.get(t.taxRateId);
      byRate.set(t.taxRateId, seen ? { ...seen, taxableAmount: formatDecimal(dec(seen.taxableAmount).plus(dec(t.taxableAmount))), amount: formatDecimal(dec(seen.amount).plus(amount)) } : { ...t });
    }
  }
  const subtotal = net.reduce((a, n) => a.plus(n), ZERO);
  const totalDiscount = taken.reduce((a, d) => a.plus(dec(d.amount)), ZERO);
  const notes = input.exempt === "reverse" ? [REVERSE_CHARGE_NOTE] : input.exempt === "exempt" ? [TAX_EXEMPT_NOTE] : [];
  return {
    lines: input.lines.map((_, i) => ({ discountAmounts: perLine[i] as BookedDiscount[], taxAmounts: lineTax[i] as BookedTax[] })),
    discounts: taken,
    taxAmounts: [...byRate.values()],
    notes,
    subtotal: formatDecimal(subtotal),
    totalDiscount: formatDecimal(totalDiscount),
    totalTax: formatDecimal(allTax),
    total: formatDecimal(subtotal.plus(exclusive)),
  };
}
