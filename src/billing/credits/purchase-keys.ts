/**
 * The IDs of a keyed credit purchase (purchase.ts): its grant's and invoice's, derived from the
 * environment and the key alone, so a repeat of the purchase with the same key (another server, a
 * retry) meets the first one's rows, and whoever holds the key can look its grant up (alerts.ts:
 * whether an auto top-up's crossing bought).
 */
import { createHash } from "node:crypto";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** IDs of a keyed purchase: 22 base62 characters of SHA-256 of the environment and key, each. */
export function purchaseIds(environmentId: string, key: string): { grantId: string; invoiceId: string } {
  const part = (what: string) => {
    const bytes = createHash("sha256").update(`${environmentId}\u0000${what}\u0000${key}`).digest();
    let out = "";
    for (const b of bytes) if (b < 248 && out.length < 22) out += BASE62[b % 62];
    return out.padEnd(22, "0");
  };
  return { grantId: `cg_${part("grant")}`, invoiceId: `inv_${part("invoice")}` };
}
