/**
 * The IDs of a keyed credit purchase (purchase.ts): its grant's and invoice's, derived from the
 * environment and the key alone, so a repeat of the purchase with the same key (another server, a
 * retry) meets the first one's rows, and whoever holds the key can look its grant up (alerts.ts:
 * whether an auto top-up's crossing bought).
 */
import { derivedBase62 } from "../ids.js";

/** IDs of a keyed purchase: 22 base62 characters of SHA-256 of the environment and key, each. */
export function purchaseIds(environmentId: string, key: string): { grantId: string; invoiceId: string } {
  const part = (what: string) => derivedBase62(`${environmentId}\u0000${what}\u0000${key}`);
  return { grantId: `cg_${part("grant")}`, invoiceId: `inv_${part("invoice")}` };
}
