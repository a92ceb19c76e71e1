/**
 * An invoice line's key as stored (InvoiceLine.key): `<code>|<what the line prices within its
 * rate>` (invoice-building.ts), which late usage compares with the key of the window's lines
 * priced again (late-usage.ts). A dimensional cell's part is its coordinates as JSON, whose
 * values have no length limit (a rate card's, or an event's for a combination without a cell), so
 * a key may be longer than the stored column (MAX_LINE_KEY characters). Such a key is stored as
 * `<code>|#<SHA-256 of the rest>`: fixed length, the same for the same line every time it is
 * priced, and still `<code>|…` (credit-application.ts and unused-credit.ts read the rate code
 * before the bar). A key that fits is kept as it is. No key is cut: rows written before this cut
 * a long key to its first MAX_LINE_KEY characters (legacyKeyOf), and late usage of their windows
 * still compares under that form (comparedKey).
 */
import { hash } from "node:crypto";

/** The characters a stored line key holds (invoice_lines.line_key, varchar(1000)). */
export const MAX_LINE_KEY = 1000;

/** `key` as an invoice stores it: itself when it fits, else `<code>|#<hash of the rest>`. */
export function storedKey(key: string): string;
export function storedKey(key: string | null): string | null;
export function storedKey(key: string | null): string | null {
  if (key === null || key.length <= MAX_LINE_KEY) return key;
  const bar = key.indexOf("|");
  return `${key.slice(0, bar + 1)}#${hash("sha256", key.slice(bar + 1), "hex")}`;
}

/** What rows written before keys were hashed stored for `key`: its first MAX_LINE_KEY characters; null for a key that fits (stored as is). */
export function legacyKeyOf(key: string): string | null {
  // A cut through a surrogate pair left half a character, which the drivers stored as U+FFFD (readBackKey drops it).
  return key.length > MAX_LINE_KEY ? key.slice(0, MAX_LINE_KEY).replace(/[\uD800-\uDBFF]$/, "") : null;
}

/**
 * A stored key as late usage compares it: without the replacement characters (U+FFFD) that end a
 * key cut through a surrogate pair by rows written before keys were hashed (MariaDB stores one,
 * SQLite three). No key priced today ends in one: a cell's coordinates end in `"]]`, a tier in its
 * number.
 */
export function readBackKey(key: string): string {
  return key.replace(/\uFFFD+$/, "");
}

/**
 * The key a recomputed line of a window is compared and written under, given the keys the
 * window's invoice and its adjustments hold (`billed`): its stored form, unless `billed` holds
 * only the cut form rows written before keys were hashed hold (then that form: every line of the
 * window's cell sums under it, as those rows did; a tiered cell's tier lines shared their first
 * MAX_LINE_KEY characters). Grouping lines under one key never changes what a window's lines add
 * up to, only how its adjustments are split into lines.
 */
export function comparedKey(key: string, billed: ReadonlySet<string | null>): string {
  const stored = storedKey(key);
  const legacy = legacyKeyOf(key);
  return legacy !== null && billed.has(legacy) && !billed.has(stored) ? legacy : stored;
}
