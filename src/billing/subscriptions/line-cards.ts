/**
 * A line priced by a rate card other than its invoice's names that card in its key
 * (`<code>|rate_card:<id>`): a change of rate card's credit for the old card (no rate code before
 * the bar: no credit grant limited to rate codes pays it, as for a line without a key) and its
 * charge for the new one, one line per fixed rate keyed by its code, so coupons and grants limited
 * to rates cover the lines of their rates (change-lines.ts). Booking taxes such a line by that card's default tax
 * rates (DESIGN §15; booking.ts, InvoiceParties.adjustedCardTaxRateIds).
 */
const CARD_KEY = "|rate_card:";

/** The key of a line priced by rate card `id`, for rate `code` (none: no rate in particular). */
export function cardKey(id: string, code = ""): string {
  return `${code}${CARD_KEY}${id}`;
}

/** The rate card a line's key names as the one that priced it, if any. */
export function cardOfKey(key: string | null | undefined): string | null {
  const at = key?.indexOf(CARD_KEY) ?? -1;
  return key && at >= 0 && !key.slice(0, at).includes("|") ? key.slice(at + CARD_KEY.length) : null;
}

/** The rate code of a line keyed `<code>|…`; null for a line without one. */
export function rateCodeOf(l: { key?: string | null }): string | null {
  const bar = l.key?.indexOf("|") ?? -1;
  return l.key && bar > 0 ? l.key.slice(0, bar) : null;
}
