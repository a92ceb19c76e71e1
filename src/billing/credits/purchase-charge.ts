/**
 * The charge of a credit purchase's invoice (DESIGN §14, §16), made the way dunning makes an
 * attempt (payments/attempts.ts): inside the transaction that holds the invoice's row lock, read
 * under it. A void, a mark-uncollectible or a credit note on the same invoice waits for that lock
 * (their conditional UPDATE, or their own locking read), so the two never interleave:
 * - the charge first: the void then finds the invoice paid (or void, after a decline) and is
 *   refused; a charge that succeeded never ends on a void invoice;
 * - the void first: the charge finds it void and makes no charge.
 *
 * Crash-safe as dunning's first charge is: the attempt is planned (a minute ahead, committed
 * before the charge), so a process that dies between the provider's answer and its own commit
 * leaves a planned attempt that dunning makes again with the same key (chargeKey of attempt 1);
 * the provider answers it with the first charge's outcome, never a second charge. A charge that
 * throws (the provider unreachable) rolls back and leaves the plan too: dunning charges it then.
 * What the outcome makes of the invoice is dunning's rule for a purchase (payments/dunning.ts
 * purchaseDecision), recorded as dunning records an attempt (payments/record.ts), so the charge
 * made here and the same attempt made by dunning after a crash end alike: paid, the grant active
 * (purchase-states.ts); declined, the invoice void and the grant failed, in the same transaction
 * (nothing was granted, nothing is owed), never a retry days later.
 */
import { awaitsCheckout } from "./purchase-states.js";
import { type DunningWrites, isCollectible, purchaseDecision } from "../payments/dunning.js";
import { type AttemptResult, recordDecisions } from "../payments/record.js";
import type { BillingStores } from "../subscriptions/ports.js";
import { retryingRaces } from "../subscriptions/races.js";
import { type Invoice, type PaymentMethod, type PaymentProvider, amountDueOf, chargeKey } from "../subscriptions/types.js";

/** How far ahead the charge is planned: longer than any charge takes (as dunning plans a first charge). */
export const PLAN_AHEAD_MS = 60_000;

type Tx = Parameters<Parameters<BillingStores["transaction"]>[0]>[0];

/** The transaction's dunning writes (the invoice's row lock and attempts); every store that charges keeps them. */
export function dunning(tx: Tx): DunningWrites {
  if (!tx.dunning) throw new Error("this store keeps no dunning state");
  return tx.dunning;
}

/**
 * Charges the purchase invoice `ref` (attempt 1) to `pm` at `at` (the subject's clock) and records
 * the outcome, under the invoice's row lock. Nothing is charged when, read under that lock, it is
 * no longer open with something due (voided, marked uncollectible, paid another way) or was
 * attempted already (dunning made the planned attempt): what it became stands. Answers the
 * attempt as recorded (undefined: no charge made).
 */
export async function chargePurchase(
  stores: BillingStores,
  provider: PaymentProvider,
  pm: PaymentMethod,
  ref: Pick<Invoice, "environmentId" | "id">,
  at: Date,
  realNow: () => Date,
): Promise<AttemptResult | undefined> {
  const env = ref.environmentId;
  await retryingRaces(() =>
    stores.transaction(async (tx) => {
      const [i] = await dunning(tx).claimAll(env, [ref.id]);
      if (i && isCollectible(i) && (i.attemptCount ?? 0) === 0) await dunning(tx).planFirsts(env, [{ id: i.id, at: new Date(at.getTime() + PLAN_AHEAD_MS) }]);
    }),
  );
  return retryingRaces(() =>
    stores.transaction(async (tx) => {
      const i = await dunning(tx).claim(env, ref.id);
      if (!i || !isCollectible(i) || (i.attemptCount ?? 0) > 0) return undefined;
      const meta = { invoiceId: i.id, environmentId: env, subjectId: i.subjectId, ...(i.number ? { description: i.number } : {}) };
      const outcome = await provider.charge(pm, amountDueOf(i), i.currency, chargeKey(i.id, 1), meta);
      const d = purchaseDecision(i, 1, outcome);
      if (!d) throw new Error(`invoice ${i.id} is not a credit purchase's`);
      return (await recordDecisions(tx, dunning(tx), realNow(), [{ i, d, at }]))[0];
    }),
  );
}

/**
 * A purchase whose checkout was cancelled or expired (`message` says which), in that transaction:
 * read under the invoice's row lock, still awaiting its checkout (awaitsCheckout), it ends as a
 * declined charge ends it (purchaseDecision, recorded as dunning records it): the invoice void
 * (`invoice.payment_failed`, `invoice.voided`), the grant failed; no attempt counted, nothing
 * charged. One charged or planned meanwhile is left as it stands.
 */
export async function endUncharged(tx: Tx, environmentId: string, invoiceId: string, message: string, at: Date, realNow: Date): Promise<void> {
  const i = await dunning(tx).claim(environmentId, invoiceId);
  if (!i || !isCollectible(i) || !awaitsCheckout(i)) return;
  const d = purchaseDecision(i, i.attemptCount ?? 0, { ok: false, message, code: "checkout_not_completed" });
  if (d) await recordDecisions(tx, dunning(tx), realNow, [{ i, d, at }]);
}
