/**
 * The lines an upgrade of rate card charges (DESIGN §8, change rate card), pure, as Stripe writes them: a credit
 * for the old card's fixed charges over the part of the period left (what the period was billed
 * at), and a charge for the new card's over the same part; the full period with
 * `rate_difference`. At list price their sum is the fixed-price difference rounded once half-up:
 * the credit is round(−old × fraction) and the charge round((new − old) × fraction) − credit, so
 * rounding each on its own never makes them sum to a cent more or less than the difference
 * (10.00 → 20.00 with ⅓ left: −3.33 and +6.66, the 3.33 the difference costs; not −3.33 and
 * +6.67). A line of 0 is left out.
 * - The credit is worth what was paid for that time (as a seat decrease's, unused-credit.ts): the
 *   list-price credit less the share the period's paid (or still open) invoices' discounts took
 *   of their fixed charges, never more than those invoices took for them; its description says
 *   what the discounts took. No current coupon discounts it (booking.ts:
 *   a negative proration line is never covered), so a coupon added after the period was paid at
 *   list takes nothing of it. A, 1,000 a month, paid at 500 under a 50% coupon, upgraded to B,
 *   2,000, with half the month left: −250 for A, +1,000 for B, which the coupon takes to 500.
 *   The line keeps the list-price credit as its unit amount (−500 here, quantity 1), which a
 *   minimum commitment counts, as it counts every charge of the period before discounts.
 * - The charge is one line per fixed rate of the new card (its share of the charge in proportion
 *   to the rate's cycle charge, the last taking the rounding), keyed by its rate code, so a coupon
 *   limited to rates covers the lines of its rates, as on a cycle's invoice.
 * - Taxed, the credit can outweigh the charge (the old card's rates higher than the new one's):
 *   that net credit goes to the subject's credit balance, never onto the invoice
 *   (change-credit.ts).
 * - Each line names the card that priced it in its key (line-cards.ts), and booking taxes it by
 *   that card's default tax rates (DESIGN §15) as it taxes late usage of an earlier card: the
 *   charge by the new card's. The credit gives back the taxes paid for that time (paidTax: those
 *   the period's paid or open invoices booked on the old card's fixed lines × the part it gives
 *   back / their net, per rate), not those of the old card or the buyer now: paid 10,000 + 10%,
 *   half the period left, the buyer's rate raised to 20%: −5,000 with −500 under the 10% rate,
 *   not −1,000. Without them (the old card's time paid by a change's charge that went to the
 *   balance, `charge`) it is taxed by the old card's rates.
 */
import type { RateCard } from "../catalog/types.js";
import { type Decimal, SCALE, ZERO, dec, formatDecimal, roundAmount } from "../money.js";
import type { BillLine } from "./invoice-building.js";
import { cardKey } from "./line-cards.js";
import { type ChangeChargeTerms, type TermsOf, prorationLine } from "./proration.js";
import type { Invoice, Subscription } from "./types.js";
import { fixedTaken, paidTax } from "./unused-credit.js";

/** One card's side of an upgrade: the card, its fixed charges per cycle (unrounded), and per fixed rate its code, name and cycle charge. */
export interface ChangeSide {
  card: Pick<RateCard, "id" | "name">;
  fixed: Decimal;
  rates?: readonly { code: string; name: string; fixed: Decimal }[];
}

/**
 * What the credit for the old card's unused time is worth and how it is said: `billed`, the
 * period's invoices; `money` prints an amount; `charge`, what an earlier change's charge for the
 * old card took and its discounts took of it, when that charge left the invoices for the balance
 * (ChangeChargeTerms): the old card's time in the period was paid by that charge alone.
 */
export interface PaidFor {
  billed: readonly Invoice[];
  money: (d: Decimal) => string;
  charge?: { charged: Decimal; discounted: Decimal };
  /** What the period's seat decreases gave back of tax and drew of each line (unused-credit.ts TaxCreditedTerms' amounts). */
  credited?: Readonly<Record<string, string>>;
}

/** What a change's charge for `cardId` in `s`'s period under way took and its discounts took of it (ChangeChargeTerms), if kept. */
export function changeChargeOf(s: Pick<Subscription, "chargedTerms" | "periodStart">, cardId: string): { charged: Decimal; discounted: Decimal } | undefined {
  const c = (s.chargedTerms as ChangeChargeTerms | null | undefined)?.changeCharge;
  if (!c || c.periodStart !== s.periodStart.toISOString() || c.rateCardId !== cardId) return undefined;
  return { charged: dec(c.charged), discounted: dec(c.discounted) };
}

/** What a prorated change of terms moved of the card's time an upgrade's charge paid, at list and net (movedTime). */
export interface MovedTime {
  left: Decimal;
  givenBack: Decimal;
  added: Decimal;
  addedNet: Decimal;
}

/**
 * What a prorated change of terms moved of the card's time an upgrade's charge paid (ChangeChargeTerms,
 * chargeAfterTermsChange): `left`, the old terms' list price for the rest of the period; `givenBack`,
 * its credited decreases at list (`valued` not null: a decrease credited nothing leaves that time
 * paid, proration.ts chargedKeeping); `added`, its increases at list, and `addedNet`, what they cost
 * net of discounts: as its invoice `written` booked them, else (netted into a credit) as `bookedNow`.
 */
export function movedTime(left: Decimal, lines: readonly BillLine[], valued: readonly (BillLine | null)[], written: Invoice | undefined, bookedNow: readonly BillLine[]): MovedTime {
  const sum = (ls: readonly BillLine[]) => ls.reduce((a, l) => a.plus(l.amount), ZERO);
  const net = (l: Invoice["lines"][number]) => (l.discountAmounts ?? []).reduce((a, d) => a.minus(dec(d.amount)), dec(l.amount));
  const increases = written?.lines.filter((l) => l.kind === "proration" && dec(l.amount).gt(0));
  return {
    left,
    givenBack: sum(lines.filter((l, i) => l.amount.isNegative() && valued[i] !== null)).neg(),
    added: sum(lines.filter((l) => l.amount.gt(0))),
    addedNet: increases ? increases.reduce((a, l) => a.plus(net(l)), ZERO) : sum(bookedNow),
  };
}

/**
 * `charged`, the period's charged terms after a change of `s`'s terms to `next` (null: the row's),
 * keeping what an upgrade's charge paid for the row's card (ChangeChargeTerms), which they would drop:
 * a later upgrade would then value the card's unused time from the period's invoices, which do not
 * show that charge. `moved` (a prorated change, movedTime): the charge then covers the rest of the
 * period at the new terms: what is left of the old terms' time, less what the change gave back, at
 * the charge's discounted share, and what it added at what it cost. B charged 1,000 for half the
 * period with 700 of it discounted, 1 → 2 seats at once (1,000 more at list, paid in full): 2,000
 * charged, 700 discounted, so B's last quarter (1,000 at list) is worth 650 at an upgrade: 500 ×
 * 30% + 500. Without `moved` (proration none: nothing charged or given back) it is kept as it is.
 * Kept exact to the stored scale.
 */
export function chargeAfterTermsChange(charged: Subscription["chargedTerms"], s: Subscription, next: TermsOf, moved?: MovedTime): Subscription["chargedTerms"] {
  const prior = changeChargeOf(s, s.rateCardId);
  const raw = (s.chargedTerms as ChangeChargeTerms | null | undefined)?.changeCharge;
  if (!prior || !raw) return charged;
  const exact = (d: Decimal) => formatDecimal((d.isNegative() ? ZERO : d).toDecimalPlaces(SCALE));
  const share = prior.charged.gt(0) ? prior.discounted.div(prior.charged) : dec(1);
  const rest = moved ? moved.left.minus(moved.givenBack) : ZERO;
  const kept = rest.isNegative() ? ZERO : rest;
  const changeCharge = moved ? { ...raw, charged: exact(kept.plus(moved.added)), discounted: exact(kept.times(share).plus(moved.added).minus(moved.addedNet)) } : raw;
  const terms: ChangeChargeTerms = { ...(charged ?? { fixedRateQuantities: { ...next.fixedRateQuantities }, rateMultipliers: { ...next.rateMultipliers } }), changeCharge };
  return terms;
}

/**
 * The credit for `from` and the charge for `to` of an upgrade: prorated to `left` of `span` (ms),
 * or, without `part`, the whole period (rate_difference); the credit valued at what `paid` says
 * was paid (at list without it).
 */
export function upgradeLines(from: ChangeSide, to: ChangeSide, part: { left: number; span: number } | null, paid?: PaidFor): BillLine[] {
  const fraction = part ? dec(part.left).div(part.span) : dec(1);
  const label = part ? ` (prorated: ${formatDecimal(fraction.times(100).toDecimalPlaces(2))}% of the period left)` : "";
  const credit = prorationLine(`${part ? "Unused time on" : "Rate difference: credit for"} ${from.card.name}${label}`, from.fixed.times(fraction).neg());
  // The charge is what is left of the rounded difference once the credit is rounded: they sum to it exactly.
  const difference = roundAmount(to.fixed.minus(from.fixed).times(fraction));
  const charge = difference.minus(credit.amount);
  const valued = paid ? paidCredit(credit, paid) : credit;
  return [...(valued ? [{ ...valued, key: cardKey(from.card.id) }] : []), ...chargeLines(to, charge, `${part ? "Remaining time on" : "Rate difference: charge for"} ${to.card.name}`, label)].filter(
    (l) => !l.amount.isZero(),
  );
}

/** `charge` for `to` as one line per fixed rate of it (one line without rates), keyed by the rate's code and the card. */
function chargeLines(to: ChangeSide, charge: Decimal, named: string, label: string): BillLine[] {
  const rates = (to.rates ?? []).filter((r) => !r.fixed.isZero());
  if (rates.length === 0) return [{ ...prorationLine(`${named}${label}`, charge), key: cardKey(to.card.id) }];
  let left = charge;
  return rates.map((r, i) => {
    const share = i === rates.length - 1 ? left : roundAmount(charge.times(r.fixed).div(to.fixed));
    left = left.minus(share);
    return { ...prorationLine(`${named}${rates.length > 1 ? `: ${r.name}` : ""}${label}`, share), key: cardKey(to.card.id, r.code) };
  });
}

/**
 * `credit` (list-price unused time) valued at what the period's paid or still open invoices took
 * for their fixed charges: less the share their discounts took of them, rounded once, never more
 * than they took net of discounts; null when that is nothing. An open one counts as paid: the
 * upgrade charges the new card for the rest of the period, so the old card's time that invoice
 * still asks for is credited now, not charged twice once it is paid.
 */
function paidCredit(credit: BillLine, { billed, money, charge, credited }: PaidFor): BillLine | null {
  const owing = billed.filter((i) => i.status === "paid" || i.status === "open");
  // The old card's time paid by a change's charge that left the invoices (ChangeChargeTerms): worth what that charge took.
  const taken = charge ? { ...charge, took: charge.charged.minus(charge.discounted) } : fixedTaken(owing.map((i) => ({ ...i, status: "paid" as const })));
  const share = taken.charged.gt(0) ? taken.discounted.div(taken.charged) : dec(1);
  let value = roundAmount(credit.unitAmount.neg().times(dec(1).minus(share)));
  if (value.gt(taken.took)) value = taken.took;
  if (value.lte(ZERO)) return null;
  const less = credit.amount.neg().minus(value);
  // The unit amount stays the list-price credit: a minimum commitment counts the period's charges before discounts (commitments.ts).
  const valued = less.isZero() ? credit : { ...credit, amount: value.neg(), description: `${credit.description}, less the period's discounts on it: ${money(less)}` };
  if (charge) return valued;
  // The taxes paid on what it gives back of the old card's fixed lines (any rate), newest first (unused-credit.ts paidTax).
  const paid = paidTax([valued], owing, credited ?? {}, () => () => true).rates[0];
  return paid ? { ...valued, paidTax: paid } : valued;
}
