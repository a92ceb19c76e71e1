/**
 * The end of an invoice after its last attempt failed with a policy pending (DESIGN §16;
 * attempts.ts finishLast runs it once the policy was applied to the subscription), in the
 * transaction that holds the invoice's row lock: no next attempt, nothing pending, and the invoice
 * uncollectible if so configured. An invoice made uncollectible so while that last attempt's
 * payment waits for the customer's authentication has that payment cancelled at the provider, as
 * any invoice that ends does (cancels.ts): the cancel to make is written here, due for the sweep
 * CANCEL_GRACE_MS from now, and made after the commit (attempts.ts). Otherwise the customer could
 * still authenticate it, be charged for an uncollectible invoice and then refunded in full.
 */
import { purchasesMoved } from "../credits/purchase-states.js";
import { checkTransition, transitionEvents } from "../subscriptions/invoice-states.js";
import type { Invoice } from "../subscriptions/types.js";
import { endedPayment } from "./cancels.js";
import { CANCEL_GRACE_MS, type DunningWrites } from "./dunning.js";
import type { Tx } from "./record.js";

/** Ends `cur` (claimed under its row lock, its policy pending and applied) at `realNow`; returns it as written. A cancel to make is on its payment (payment.cancel). */
export async function endAfterLast(tx: Tx, writes: DunningWrites, cur: Invoice, markUncollectible: boolean, realNow: Date): Promise<Invoice> {
  let after: Invoice = { ...cur, nextPaymentAttempt: null, payment: { ...cur.payment, pendingPolicy: null } };
  if (cur.status === "open" && markUncollectible) {
    const move = checkTransition("open", "uncollectible");
    if ((await tx.moveInvoices([cur.id], move.from, move.to, realNow, cur.environmentId)).length > 0) {
      // Its payment still waiting for the customer: no longer payable, its cancel to make.
      const ended = endedPayment(after);
      after = { ...after, status: move.to, ...(ended ? { payment: ended, nextPaymentAttempt: new Date(realNow.getTime() + CANCEL_GRACE_MS) } : {}) };
      await tx.emit([...transitionEvents(move, [after]), ...(await purchasesMoved(tx, [after], move.to, realNow))]);
    }
  }
  await writes.recordAttempts(
    cur.environmentId,
    [{ id: cur.id, attempt: { attemptCount: cur.attemptCount ?? 0, nextPaymentAttempt: after.nextPaymentAttempt ?? null, payment: after.payment ?? {} } }],
    realNow,
  );
  return after;
}
