/**
 * The plan written before a charge that dunning had not planned (DESIGN §12, §16): a first charge
 * (settlement, a purchase) or a new card's charge from the portal, a minute ahead so the scheduler
 * leaves it to the call that makes it. Committed before the provider is called: a process that dies
 * (or a transaction that rolls back, a provider that times out) between the provider's answer and
 * the commit of the outcome leaves the invoice planned minutes ahead, not on its old schedule days
 * away, and dunning makes that attempt again with the same key (attempts.ts). That retry tells the
 * provider the key may have been sent already (ChargeContext.sentBefore), so a payment made under it
 * is found and adopted even after the provider forgot the key (Stripe keeps them 24 hours).
 */
import { awaitsCheckout } from "../credits/purchase-states.js";
import { retryingRaces } from "../subscriptions/races.js";
import type { Invoice } from "../subscriptions/types.js";
import { isCollectible } from "./dunning.js";
import type { WaitingDeps } from "./waiting.js";

/**
 * Plans the next attempt of the invoice `ref` at `planAt` under its row lock, in a transaction of
 * its own: a first one only when none was planned; a later one unless the schedule's comes sooner.
 * Nothing for an invoice not charged now (not collectible, a purchase awaiting its checkout, a
 * bank debit processing, a policy pending after its last attempt).
 */
export async function planAhead(deps: WaitingDeps, ref: Pick<Invoice, "environmentId" | "id">, planAt: (i: Invoice) => Date): Promise<void> {
  await retryingRaces(() =>
    deps.stores.transaction(async (tx) => {
      const w = deps.writes(tx);
      const i = await w.claim(ref.environmentId, ref.id);
      if (!i || !isCollectible(i) || awaitsCheckout(i) || i.payment?.processing || i.payment?.pendingPolicy) return;
      const at = planAt(i);
      if ((i.attemptCount ?? 0) === 0) return w.planFirsts(i.environmentId, [{ id: i.id, at }]);
      if (i.nextPaymentAttempt && i.nextPaymentAttempt.getTime() <= at.getTime()) return;
      await w.recordAttempts(i.environmentId, [{ id: i.id, attempt: { attemptCount: i.attemptCount ?? 0, nextPaymentAttempt: at, payment: i.payment ?? {} } }], deps.now());
    }),
  );
}

/**
 * Whether the charge of `i` at `at` may send a key sent before, its answer lost: dunning's retry
 * (`dueBy`: every attempt that did not commit ends up there, planned), or a charge of an invoice
 * whose plan is overdue (a retry the scheduler has not made yet, the process down meanwhile).
 */
export function maySendAgain(i: Pick<Invoice, "nextPaymentAttempt">, at: Date, dueBy: Date | undefined): boolean {
  return dueBy !== undefined || (!!i.nextPaymentAttempt && i.nextPaymentAttempt.getTime() <= at.getTime());
}
