/**
 * The lines an upgrade of rate card charges (DESIGN §8, change rate card), pure, as Stripe writes them: a credit
 * for the old card's fixed charges over the part of the period left (what the period was billed
 * at), and a charge for the new card's over the same part; the full period with
 * `rate_difference`. Their sum is the fixed-price difference rounded once half-up: the credit is
 * round(−old × fraction) and the charge round((new − old) × fraction) − credit, so rounding each
 * on its own never makes them sum to a cent more or less than the difference (10.00 → 20.00
 * with ⅓ left: −3.33 and +6.66, the 3.33 the difference costs; not −3.33 and +6.67). A line of 0
 * is left out.
 * - Taxed, the credit can outweigh the charge (the old card's rates higher than the new one's):
 *   that net credit goes to the subject's credit balance, never onto the invoice
 *   (change-credit.ts).
 * - Each line names the card that priced it in its key (line-cards.ts: no rate code, so a coupon
 *   or grant limited to rate codes covers neither, as before), and booking taxes it by that
 *   card's default tax rates (DESIGN §15) as it taxes late usage of an earlier card: the
 *   charge by the new card's, the credit by the old card's, so both net out when the cards have
 *   the same rates.
 */
import type { RateCard } from "../catalog/types.js";
import { type Decimal, dec, formatDecimal, roundAmount } from "../money.js";
import type { BillLine } from "./invoice-building.js";
import { cardKey } from "./line-cards.js";
import { prorationLine } from "./proration.js";

/** One card's side of an upgrade: the card and its fixed charges per cycle (unrounded). */
export interface ChangeSide {
  card: Pick<RateCard, "id" | "name">;
  fixed: Decimal;
}

/**
 * The credit for `from` and the charge for `to` of an upgrade: prorated to `left` of `span` (ms),
 * or, without `part`, the whole period (rate_difference).
 */
export function upgradeLines(from: ChangeSide, to: ChangeSide, part: { left: number; span: number } | null): BillLine[] {
  const fraction = part ? dec(part.left).div(part.span) : dec(1);
  const label = part ? ` (prorated: ${formatDecimal(fraction.times(100).toDecimalPlaces(2))}% of the period left)` : "";
  const credit = prorationLine(`${part ? "Unused time on" : "Rate difference: credit for"} ${from.card.name}${label}`, from.fixed.times(fraction).neg());
  // The charge is what is left of the rounded difference once the credit is rounded: they sum to it exactly.
  const difference = roundAmount(to.fixed.minus(from.fixed).times(fraction));
  const charge = prorationLine(`${part ? "Remaining time on" : "Rate difference: charge for"} ${to.card.name}${label}`, difference.minus(credit.amount));
  return [
    { ...credit, key: cardKey(from.card.id) },
    { ...charge, key: cardKey(to.card.id) },
  ].filter((l) => !l.amount.isZero());
}
