/**
 * What the unused time of a fixed rate is worth (DESIGN §13, §15), pure: the period's invoices are
 * walked once for what their fixed and proration lines took, net of discounts and of what credit
 * notes gave back (fixedTaken; a pause's unused time is capped by it too, pauses.ts), and a seat
 * decrease's credit for a rate is valued at what the period's paid invoices actually took for that
 * rate (valuedCredits):
 * - fraction = the discounts on the rate's fixed and proration charge lines (keyed `<code>|`) in
 *   the period's paid invoices / those lines' amounts; credit = list-price unused × (1 − fraction),
 *   rounded half up once per line. So a coupon that took half of what was billed halves the
 *   credit, a 100% one (a `once` one too) leaves nothing, and a coupon added after the period was
 *   paid at list takes nothing of it.
 * - Lines the rate was billed on without its code (a rate-card change's lines name the card, not
 *   a rate) stand for every rate that has none of its own in the period.
 * - Nothing billed (or nothing paid) for the rate in the period: nothing to give back, credit 0.
 * - Never more than what those lines took net of discounts and of what was given back for them
 *   before on the invoices (credit notes; negative lines of the rate), shared by the credits of
 *   one change in their order.
 * - All before tax. The exclusive tax a credit gives back is the tax those same lines booked,
 *   not the buyer's tax details at the change (paidTax): tax × credited / their net of discounts,
 *   rounded half up once per credit, never more than their tax less what the period's earlier
 *   decreases gave back (TaxCreditedTerms). 2 seats at 1,000 + 20% paid (2,400), half the
 *   period left: 500 + 100; paid exempt (2,000), then taxable: 500; a thousand one-seat
 *   decreases at 3 (3,000 + 600 paid) give back 600 of tax, not 1,000.
 */
import { type Decimal, ZERO, dec, formatDecimal, roundAmount } from "../money.js";
import type { BillLine } from "./invoice-building.js";
import { rateCodeOf } from "./line-cards.js";
import { isCarriedCredit } from "./proration.js";
import type { Invoice, InvoiceLine, Subscription } from "./types.js";

/** A line's discounts. */
const discountsOf = (l: InvoiceLine): Decimal => (l.discountAmounts ?? []).reduce((a, d) => a.plus(dec(d.amount)), ZERO);

/**
 * Whether a line is a fixed charge (or a proration of one) of the invoice's period: not a credit
 * carried onto it (isCarriedCredit: a resume's credit for the cycle the pause cut short lies on
 * the new cycle's first invoice, but it gives back time of the old one).
 */
const isFixed = (l: InvoiceLine): boolean => (l.kind === "fixed" || l.kind === "proration") && !isCarriedCredit(l);

/** What a carried credit's line took off its invoice's total: its amount and exclusive tax, negated (credits are never discounted). */
const carriedOff = (inv: Invoice): Decimal =>
  inv.lines.reduce((a, l) => (isCarriedCredit(l) ? (l.taxAmounts ?? []).reduce((b, t) => (t.inclusive ? b : b.plus(dec(t.amount))), a.plus(dec(l.amount))) : a), ZERO).neg();

/**
 * What the paid invoices among `billed` took for their fixed and proration lines that `pick`
 * selects (every one by default; never a credit carried onto the invoice from another period,
 * isCarriedCredit): per invoice, those lines less their discounts, never more than its total
 * before those carried credits less what credit notes gave back; 0 at least. A resume's invoice
 * (1,000 for the new cycle, −903 for the paused one's unused time: 97) took 1,000 for the new
 * cycle, not 97. Also the charge lines' amounts and
 * discounts (positive lines), from which a rate's discount fraction is read.
 */
export function fixedTaken(billed: readonly Invoice[], pick: (l: InvoiceLine) => boolean = () => true): { took: Decimal; charged: Decimal; discounted: Decimal } {
  let took = ZERO;
  let charged = ZERO;
  let discounted = ZERO;
  for (const inv of billed) {
    if (inv.status !== "paid") continue;
    let fixed = ZERO;
    for (const l of inv.lines) {
      if (!isFixed(l) || !pick(l)) continue;
      fixed = fixed.plus(dec(l.amount)).minus(discountsOf(l));
      if (dec(l.amount).gt(0)) {
        charged = charged.plus(dec(l.amount));
        discounted = discounted.plus(discountsOf(l));
      }
    }
    // The invoice's total before the credits carried onto it: they pay for no time of this period.
    const kept = dec(inv.total)
      .plus(carriedOff(inv))
      .minus(dec(inv.amountCredited ?? "0"));
    const part = fixed.lte(kept) ? fixed : kept;
    if (part.gt(0)) took = took.plus(part);
  }
  return { took, charged, discounted };
}

/** Which lines stand for rate `code` in `billed`: its own, or (when it has none) those of no rate. */
function linesOf(billed: readonly Invoice[], code: string | null): (l: InvoiceLine) => boolean {
  const own = (l: InvoiceLine) => code !== null && rateCodeOf(l) === code;
  const paid = billed.filter((i) => i.status === "paid");
  return paid.some((i) => i.lines.some((l) => isFixed(l) && own(l))) ? own : (l) => rateCodeOf(l) === null;
}

/**
 * `lines` of a change with each negative one (list-price unused time, keyed `<code>|`) valued at
 * what the period's invoices `billed` took for its rate (see the module's comment), in their
 * order; null for one valued at 0, the others as they are. `money` prints an amount for the
 * line's description.
 */
export function valuedCredits(lines: readonly BillLine[], billed: readonly Invoice[], money: (d: Decimal) => string): (BillLine | null)[] {
  const room = new Map<string, Decimal>();
  return lines.map((l) => {
    if (!l.amount.isNegative()) return l;
    const pick = linesOf(billed, rateCodeOf(l));
    const group = rateCodeOf(l) ?? "";
    const taken = fixedTaken(billed, pick);
    const fraction = taken.charged.gt(0) ? taken.discounted.div(taken.charged) : dec(1);
    const left = room.get(group) ?? taken.took;
    // The unused time before rounding (a proration line's unit amount, quantity 1), rounded once.
    let value = roundAmount(l.unitAmount.neg().times(dec(1).minus(fraction)));
    if (value.gt(left)) value = left;
    room.set(group, left.minus(value));
    if (value.lte(0)) return null;
    const less = l.amount.neg().minus(value);
    const description = less.isZero() ? l.description : `${l.description}, less the period's discounts on it: ${money(less)}`;
    return { ...l, amount: value.neg(), unitAmount: value.neg(), description };
  });
}

/** The sum of `lines`' amounts. */
export const sumOf = (lines: readonly BillLine[]): Decimal => lines.reduce((a, l) => a.plus(l.amount), ZERO);

/**
 * The charged terms of a period (Subscription.chargedTerms) with `taxCredited`: the exclusive tax
 * seat decreases' credits gave back in the period starting at `periodStart` (ISO), per rate code
 * ("" for lines of no rate; paidTax); a later decrease in that period gives back at most the tax
 * paid less it. Kept in the row's charged_terms JSON, on the row's own terms where the period is
 * charged at them (updates.ts); a new period (the close, a resume) or card drops it.
 */
export type TaxCreditedTerms = NonNullable<Subscription["chargedTerms"]> & { taxCredited?: { periodStart: string; amounts: Record<string, string> } };

/** The exclusive tax seat decreases' credits gave back in `s`'s period under way, per rate code ("" for none). */
export function taxCreditedIn(s: Pick<Subscription, "chargedTerms" | "periodStart" | "rateCardId">): Record<string, string> {
  const t = s.chargedTerms as TaxCreditedTerms | null | undefined;
  const same = t?.taxCredited?.periodStart === s.periodStart.toISOString() && (t.rateCardId === undefined || t.rateCardId === s.rateCardId);
  return same ? { ...(t?.taxCredited?.amounts ?? {}) } : {};
}

/**
 * The exclusive tax each of a change's `valued` credits (valuedCredits) gives back, in their
 * order (0 for other lines): the tax the period's paid invoices `billed` booked on the lines the
 * credit draws on (those valuedCredits reads) × the credit / those lines' amounts less their
 * discounts, rounded half up; never more than that tax less what was given back before in the
 * period (`credited`, per rate code) and by the change's earlier credits. Also the tax so given
 * back in all, per rate code.
 */
export function paidTax(valued: readonly (BillLine | null)[], billed: readonly Invoice[], credited: Readonly<Record<string, string>>): { taxes: Decimal[]; credited: Record<string, string> } {
  const given: Record<string, string> = { ...credited };
  const taxes = valued.map((l) => {
    if (!l?.amount.isNegative()) return ZERO;
    const pick = linesOf(billed, rateCodeOf(l));
    const group = rateCodeOf(l) ?? "";
    let net = ZERO;
    let tax = ZERO;
    for (const inv of billed) {
      if (inv.status !== "paid") continue;
      for (const line of inv.lines) {
        if (!isFixed(line) || !pick(line)) continue;
        net = net.plus(dec(line.amount)).minus(discountsOf(line));
        for (const t of line.taxAmounts ?? []) if (!t.inclusive) tax = tax.plus(dec(t.amount));
      }
    }
    if (net.lte(0) || tax.lte(0)) return ZERO;
    const before = dec(given[group] ?? "0");
    const room = tax.minus(before);
    let share = roundAmount(tax.times(l.amount.neg()).div(net));
    if (share.gt(room)) share = room;
    if (share.lte(0)) return ZERO;
    given[group] = formatDecimal(before.plus(share));
    return share;
  });
  return { taxes, credited: given };
}
