/**
 * The order grants are spent in (DESIGN §14): priority ascending (1 first), then the soonest
 * expires_at (a grant that never expires last), then the oldest (created_at, then id, so the order
 * is total and the same on every server).
 */
import type { CreditGrant } from "./types.js";

type Ordered = Pick<CreditGrant, "priority" | "expiresAt" | "createdAt" | "id">;

export function compareSpendOrder(a: Ordered, b: Ordered): number {
  if (a.priority !== b.priority) return a.priority - b.priority;
  const ea = a.expiresAt?.getTime() ?? Number.POSITIVE_INFINITY;
  const eb = b.expiresAt?.getTime() ?? Number.POSITIVE_INFINITY;
  if (ea !== eb) return ea < eb ? -1 : 1;
  const ca = a.createdAt.getTime();
  const cb = b.createdAt.getTime();
  if (ca !== cb) return ca - cb;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/** `grants` sorted in spend order (a new array). */
export function spendOrder<T extends Ordered>(grants: readonly T[]): T[] {
  return [...grants].sort(compareSpendOrder);
}
