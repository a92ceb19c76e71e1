/**
 * A line priced by a rate card other than its invoice's names that card in its key
 * (`|rate_card:<id>`: no rate code before the bar, so a coupon or credit grant limited to rate
 * codes covers it as it covers a line without a key): a change of rate card's credit for the old
 * card and charge for the new one (change-lines.ts). Booking taxes such a line by that card's
 * default tax rates (DESIGN §15; booking.ts, InvoiceParties.adjustedCardTaxRateIds).
 */
const CARD_KEY = "|rate_card:";

/** The key of a line priced by rate card `id`. */
export function cardKey(id: string): string {
  return `${CARD_KEY}${id}`;
}

/** The rate card a line's key names as the one that priced it, if any. */
export function cardOfKey(key: string | null | undefined): string | null {
  return key?.startsWith(CARD_KEY) ? key.slice(CARD_KEY.length) : null;
}

/** The rate code of a line keyed `<code>|…`; null for a line without one. */
export function rateCodeOf(l: { key?: string | null }): string | null {
  const bar = l.key?.indexOf("|") ?? -1;
  return l.key && bar > 0 ? l.key.slice(0, bar) : null;
}
