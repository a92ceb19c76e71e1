/**
 * The arithmetic of a credit note (DESIGN §15), pure. Amounts are whole smallest units of the
 * invoice's currency.
 *
 * - A line's gross is what it cost the buyer: its amount less its discounts plus its exclusive tax
 *   (as credits see it, chargeLines in subscriptions/credit-application.ts); its tax is the sum of
 *   its taxes, inclusive and exclusive (both are inside the gross).
 * - What is left of a line: its gross less what earlier credit notes credited of it. A negative
 *   line (a proration credit) has a negative gross: what is left of it is negative (or 0), and only
 *   a whole or amount note credits it (a negative note line), never a per-line one.
 * - No lines and no amount: everything left of the invoice (total − amount credited), every line
 *   all that is left of it, negative lines included, so that the notes of a fully credited invoice
 *   sum exactly to its subtotal and total_tax (a −5000 untaxed credit and 10000 + 2000 of tax:
 *   −5000 and 12000 of which 2000 tax, not 7000 of the taxed line alone with 1167 of tax); an
 *   amount: the same fraction (amount ÷ what is left) of every line, signed: the negative lines'
 *   share first, round(amount × their left ÷ all left) half-up, split among them in proportion, the
 *   rest over the positive lines in proportion (so with no negative line, exactly the positive
 *   lines' proportional spread; an amount equal to what is left is the whole note); per line: the
 *   amount asked (all that is left of the line when absent), never beyond what is left; asks that
 *   together take all that is left of the invoice while a negative line still owes are the whole
 *   note (as an amount equal to what is left is), the negative lines folded in: positive lines
 *   alone would use up the invoice with part of their tax never reversed (7000 of the 10000 + 2000
 *   tax line beside −5000: 7000 with round(7000 × 2000 / 12000) = 1167 of tax, subtotal 5833, the
 *   invoice's 7000 all credited and 833 of its tax left booked; now −5000 and 12000 with 2000).
 *   Spreads use splitInProportion (rounded down, the units left over to the largest remainders),
 *   so the parts sum exactly to what is credited.
 * - Each credited line's tax part is cumulative: round(after × line tax / line gross) −
 *   round(before × line tax / line gross), half-up, where before is what earlier notes (and
 *   earlier parts of this one) credited of the line and after = before + credited. So partial
 *   notes on a line reverse its tax exactly once it is all credited (366, 367, 367 of 1000 + 100
 *   tax: 33, 34, 33 = 100, not 33 + 33 + 33 = 99), a negative line's (negative) tax too; and as a
 *   whole note credits all that is left of every line, any notes ending in a whole one reverse the
 *   invoice's total_tax exactly.
 */
import { type Decimal, ZERO, dec, formatDecimal, roundAmount } from "../money.js";
import { splitInProportion } from "../invoicing/booking.js";
import type { InvoiceLine } from "../subscriptions/types.js";
import type { CreditNoteLine } from "./types.js";

/** What the buyer paid for a line: amount − discounts + exclusive taxes. */
export function lineGross(l: Pick<InvoiceLine, "amount" | "discountAmounts" | "taxAmounts">): Decimal {
  let gross = dec(l.amount);
  for (const d of l.discountAmounts ?? []) gross = gross.minus(dec(d.amount));
  for (const t of l.taxAmounts ?? []) if (!t.inclusive) gross = gross.plus(dec(t.amount));
  return gross;
}

/** A line's tax, inclusive and exclusive. */
export function lineTax(l: Pick<InvoiceLine, "taxAmounts">): Decimal {
  return (l.taxAmounts ?? []).reduce((a, t) => a.plus(dec(t.amount)), ZERO);
}

/** One invoice line as a credit note sees it. */
export interface CreditableLine {
  description: string;
  gross: Decimal;
  tax: Decimal;
  /** What is left to credit of it (gross less earlier credit notes' amounts on it). */
  left: Decimal;
}

/** The invoice's lines with what earlier credit notes (issued ones: a void one credits nothing) took of each (by line index). */
export function creditableLines(lines: readonly InvoiceLine[], earlier: readonly { lines: readonly CreditNoteLine[]; status?: string }[]): CreditableLine[] {
  const taken = lines.map(() => ZERO);
  for (const n of earlier) {
    if (n.status !== undefined && n.status !== "issued") continue;
    for (const l of n.lines) {
      const i = l.invoiceLineIndex;
      if (i !== null && i >= 0 && i < taken.length) taken[i] = (taken[i] as Decimal).plus(dec(l.amount));
    }
  }
  return lines.map((l, i) => {
    const gross = lineGross(l);
    return { description: l.description, gross, tax: lineTax(l), left: gross.minus(taken[i] as Decimal) };
  });
}

/**
 * The tax part of `credited` of a line of which `before` was credited already: round((before +
 * credited) × tax / gross) − round(before × tax / gross), half-up (0 for a line of no gross). A
 * negative line's credited, before and gross are negative, its tax negative (or 0) too.
 */
export function taxPart(credited: Decimal, line: Pick<CreditableLine, "gross" | "tax">, before: Decimal = ZERO): Decimal {
  if (line.gross.isZero() || line.tax.isZero()) return ZERO;
  const share = (x: Decimal) => roundAmount(x.times(line.tax).div(line.gross));
  return share(before.plus(credited)).minus(share(before));
}

/** What is asked: per line (index, and an amount or all that is left), or a total (absent: all left of the invoice). */
export type CreditAsk = { kind: "lines"; lines: readonly { index: number; amount: Decimal | null }[] } | { kind: "amount"; amount: Decimal | null };

/** Why a plan cannot be made: a line asked beyond what is left of it, or more than the invoice has left. */
export type PlanProblem = { kind: "line_exceeded"; position: number; field: "amount" | "invoice_line_index"; left: Decimal } | { kind: "exceeds_invoice"; asked: Decimal; left: Decimal };

export interface CreditPlan {
  lines: CreditNoteLine[];
  subtotal: string;
  totalTax: string;
  total: string;
}

const weight = (l: CreditableLine): Decimal => (l.left.gt(0) ? l.left : ZERO);
/** What is left of a negative line, as a positive weight (0 for every other line). */
const owed = (l: CreditableLine): Decimal => (l.left.lt(0) ? l.left.neg() : ZERO);

/**
 * `amount` spread over `lines` in proportion to what is left of each, signed: [index, part] with
 * part ≠ 0, in line order. The negative lines take round(amount × their left ÷ all left) (half-up;
 * 0 when there is none) split among them in proportion; the positive lines the rest, in proportion.
 * With amount at most all that is left (> 0), every part lies between 0 and what is left of its line.
 */
export function spread(amount: Decimal, lines: readonly CreditableLine[]): [number, Decimal][] {
  const all = lines.reduce((a, l) => a.plus(l.left), ZERO);
  const negative = lines.reduce((a, l) => a.plus(owed(l)), ZERO);
  const theirs = negative.isZero() || all.lte(0) ? ZERO : roundAmount(amount.times(negative).div(all));
  const minus = splitInProportion(theirs, lines.map(owed));
  const plus = splitInProportion(amount.plus(theirs), lines.map(weight));
  return plus.flatMap((p, i) => {
    const part = p.minus(minus[i] as Decimal);
    return part.isZero() ? [] : [[i, part] as [number, Decimal]];
  });
}

/**
 * The credit note's lines and totals for `ask` on an invoice whose lines are `lines` and of which
 * `invoiceLeft` (total − amount credited) is left; the problems when it cannot be made.
 */
export function planCredit(lines: readonly CreditableLine[], invoiceLeft: Decimal, ask: CreditAsk): CreditPlan | PlanProblem[] {
  const problems: PlanProblem[] = [];
  let parts: [number, Decimal][];
  if (ask.kind === "amount") {
    const amount = ask.amount ?? invoiceLeft;
    // All that is left of the lines, negative ones included (the invoice's left when its lines make its total).
    const whole = lines.reduce((a, l) => a.plus(l.left), ZERO);
    if (amount.gt(invoiceLeft) || amount.gt(whole) || amount.lte(0)) return [{ kind: "exceeds_invoice", asked: amount, left: invoiceLeft.lt(whole) ? invoiceLeft : whole }];
    parts = spread(amount, lines);
  } else {
    parts = [];
    ask.lines.forEach((a, position) => {
      const line = lines[a.index] as CreditableLine;
      const left = line.left.gt(0) ? line.left : ZERO;
      const amount = a.amount ?? left;
      if (amount.gt(left) || amount.lte(0)) problems.push({ kind: "line_exceeded", position, field: a.amount === null ? "invoice_line_index" : "amount", left });
      else parts.push([a.index, amount]);
    });
    if (problems.length > 0) return problems;
    const asked = parts.reduce((a, [, p]) => a.plus(p), ZERO);
    if (asked.gt(invoiceLeft)) return [{ kind: "exceeds_invoice", asked, left: invoiceLeft }];
    // All that is left of the invoice, while a negative line still owes: the whole note (see the file's comment).
    const whole = lines.reduce((a, l) => a.plus(l.left), ZERO);
    if (asked.eq(invoiceLeft) && asked.lte(whole) && lines.some((l) => l.left.lt(0))) parts = spread(asked, lines);
  }
  let total = ZERO;
  let tax = ZERO;
  // What is credited of each line before each part: earlier notes', then this note's earlier parts.
  const before = lines.map((l) => l.gross.minus(l.left));
  const out: CreditNoteLine[] = parts.map(([i, amount]) => {
    const line = lines[i] as CreditableLine;
    const t = taxPart(amount, line, before[i] as Decimal);
    before[i] = (before[i] as Decimal).plus(amount);
    total = total.plus(amount);
    tax = tax.plus(t);
    return { invoiceLineIndex: i, description: line.description, amount: formatDecimal(amount), taxAmount: formatDecimal(t) };
  });
  return { lines: out, subtotal: formatDecimal(total.minus(tax)), totalTax: formatDecimal(tax), total: formatDecimal(total) };
}
