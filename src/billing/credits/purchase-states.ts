/**
 * A credit purchase follows its invoice (DESIGN §14): however the invoice of a paid grant becomes
 * paid — its own charge, a dunning retry, a card replaced in the portal, the provider's webhook —
 * the grant becomes active in the same transaction, with its ledger entry and
 * `credit_grant.activated`; voided or uncollectible, the grant fails and grants nothing.
 */
import { type NewEvent, creditGrantEvent } from "../events/types.js";
import type { Invoice, InvoiceStatus } from "../subscriptions/types.js";
import type { CreditWrites } from "./ports.js";

/** The period key of a purchase's invoice: `credit:<grant id>`. */
const PURCHASE_KEY = "credit:";

/** The period key of the invoice that buys grant `grantId`. */
export const purchasePeriodKey = (grantId: string) => `${PURCHASE_KEY}${grantId}`;

/** The grant a credit purchase's invoice pays for; undefined for any other invoice. */
export function purchasedGrantId(inv: Pick<Invoice, "periodKey" | "subscriptionId">): string | undefined {
  return inv.subscriptionId === "" && inv.periodKey.startsWith(PURCHASE_KEY) ? inv.periodKey.slice(PURCHASE_KEY.length) : undefined;
}

/**
 * Whether `inv` is a purchase's invoice still awaiting its checkout: never charged, no charge
 * planned. A purchase charged to the card on file plans its first charge as it is written, a
 * checkout's as it is completed (purchase.ts), so only a checkout not completed leaves it so: the
 * customer's decision, which dunning never makes for them (attempts.ts retrySubject).
 */
export function awaitsCheckout(inv: Pick<Invoice, "periodKey" | "subscriptionId" | "attemptCount" | "nextPaymentAttempt">): boolean {
  return purchasedGrantId(inv) !== undefined && (inv.attemptCount ?? 0) === 0 && !inv.nextPaymentAttempt;
}

/**
 * The grants of the purchases among `moved` (invoices just moved to `to` in this transaction):
 * activated when paid (their ledger entry at `at`), failed when void or uncollectible. Returns the
 * events to emit with the move.
 */
export async function purchasesMoved(tx: { credits?: CreditWrites }, moved: readonly Invoice[], to: InvoiceStatus, at: Date): Promise<NewEvent[]> {
  const events: NewEvent[] = [];
  for (const inv of moved) {
    const grantId = purchasedGrantId(inv);
    if (grantId === undefined || !tx.credits) continue;
    if (to === "paid") {
      const active = await tx.credits.activate(inv.environmentId, grantId, at);
      if (active) events.push(creditGrantEvent("credit_grant.activated", active));
    } else if (to === "void" || to === "uncollectible") {
      await tx.credits.fail(inv.environmentId, grantId);
    }
  }
  return events;
}
