/**
 * A new attempt on an open invoice whose payment still waits for the customer (DESIGN §16; a new
 * card saved in the portal, or dunning making the attempt that one planned): that payment (Stripe:
 * PaymentIntent A, waiting for the authentication) is cancelled at the provider first, keyed as an
 * ended invoice's cancel (cancelKey of its attempt), and only then is the new charge made
 * (attempts.ts), so that the customer can never complete A next to a charge that succeeded.
 *
 * The order of the writes, each committed before the next call to the provider:
 * 1. the next attempt is planned (next_payment_attempt, a minute ahead; the invoice still waits),
 *    so a process that dies from here on leaves an attempt dunning makes on its schedule
 *    (isRetryable: a waiting invoice with a planned attempt is retried, this cancel first);
 * 2. the cancel, under the invoice's row lock, and its answer in the same transaction: cancelled,
 *    the invoice no longer waits, A recorded as cancelled, the plan kept; or A succeeded (the
 *    customer completed it first): that attempt paid it, no charge; or A still processing: no
 *    charge now, the plan dropped (A's own outcome comes with its webhook);
 * 3. the charge, in a transaction of its own (attempts.ts), keyed chargeKey(invoice, count + 1).
 * A cancel the provider confirmed is never forgotten: a charge that throws (timeout, 5xx) rolls
 * back only its own transaction, which leaves the invoice not waiting, A cancelled and the attempt
 * planned, which dunning makes with the same key (the provider answers the first outcome if the
 * charge was made after all). A process that dies before step 2 committed leaves the invoice
 * waiting with its plan: dunning cancels again with the same key (answered as the first time) and
 * charges. A cancel that throws (the provider unreachable, or refusing it: a revoked key) leaves the
 * invoice waiting with its plan moved CANCEL_RETRY_MS ahead, in a transaction of its own, so that
 * dunning asks again then, not on every run.
 */
import { retryingRaces } from "../subscriptions/races.js";
import type { BillingStores } from "../subscriptions/ports.js";
import type { Invoice, PaymentProvider } from "../subscriptions/types.js";
import { type DunningWrites, cancelKey, decide, isCollectible } from "./dunning.js";
import { type AttemptResult, type Tx, recordDecisions } from "./record.js";
import type { InvoicePayment, PaymentSettings } from "./types.js";

/** How far ahead the attempt after a cancel is planned (step 1): longer than the cancel and the charge take. */
export const CANCEL_FIRST_GRACE_MS = 60_000;

/** How far ahead the attempt is planned again after its cancel threw (as an ended invoice's cancel, cancels.ts). */
export const CANCEL_RETRY_MS = 5 * 60_000;

/** What the attempt goes on with: the charge, a result (the waiting payment succeeded and paid it), or nothing now. */
export type CancelFirst = { charge: true } | { result: AttemptResult } | undefined;

const CHARGE: CancelFirst = { charge: true };

/** What cancelWaiting works with: the attempt's stores and dunning writes, and real time. */
export interface WaitingDeps {
  stores: BillingStores;
  writes: (tx: Tx) => DunningWrites;
  now: () => Date;
}

/** The reference of the payment of `i` waiting for the customer, if one does. */
export const waitingOn = (i: Pick<Invoice, "payment">): string | undefined => (i.payment?.actionRequired && i.payment.reference) || undefined;

/** Writes the next attempt and payment state of `i` under its row lock, its attempt count as it is. */
function rewrite(w: DunningWrites, i: Invoice, next: Date | null, payment: InvoicePayment, realNow: Date): Promise<void> {
  return w.recordAttempts(i.environmentId, [{ id: i.id, attempt: { attemptCount: i.attemptCount ?? 0, nextPaymentAttempt: next, payment } }], realNow);
}

/**
 * Steps 1 and 2 above for the invoice `ref` before attempt charges it (at `at` on its clock;
 * `dueBy`: dunning's retry, planned already). Answers CHARGE when nothing waits (or the provider
 * cannot cancel): the attempt charges as it would have.
 */
export async function cancelWaiting(
  deps: WaitingDeps,
  provider: PaymentProvider,
  ref: Pick<Invoice, "environmentId" | "id">,
  at: (i: Invoice) => Date,
  settings: PaymentSettings,
  dueBy?: Date,
): Promise<CancelFirst> {
  // Read without a lock: most attempts find nothing waiting. One that starts to wait meanwhile is
  // not charged (attempts.ts checks again under the lock).
  const seen = await deps.stores.invoices.get(ref.environmentId, ref.id);
  if (!provider.cancel || !seen || !waitingOn(seen)) return CHARGE;
  const planAt = (i: Invoice) => new Date(at(i).getTime() + CANCEL_FIRST_GRACE_MS);
  if (!dueBy) {
    const planned = await retryingRaces(() =>
      deps.stores.transaction(async (tx) => {
        const w = deps.writes(tx);
        const i = await w.claim(ref.environmentId, ref.id);
        if (!i || !isCollectible(i) || !waitingOn(i)) return false;
        // Planned a minute ahead, unless the schedule's next attempt comes sooner.
        if (!i.nextPaymentAttempt || i.nextPaymentAttempt.getTime() > planAt(i).getTime()) await rewrite(w, i, planAt(i), i.payment ?? {}, deps.now());
        return true;
      }),
    );
    if (!planned) return CHARGE;
  }
  const cancel = provider.cancel.bind(provider);
  let cancelThrew = false;
  try {
    return await retryingRaces(() =>
      deps.stores.transaction(async (tx): Promise<CancelFirst> => {
        const w = deps.writes(tx);
        const i = await w.claim(ref.environmentId, ref.id, dueBy);
        if (!i) return undefined;
        const reference = waitingOn(i);
        if (!isCollectible(i) || !reference || i.payment?.pendingPolicy) return CHARGE;
        const n = Math.max(i.attemptCount ?? 1, 1);
        const answer = await cancel(reference, cancelKey(i.id, n)).catch((err: unknown) => {
          cancelThrew = true;
          throw err;
        });
        if (answer === "succeeded") {
          const [result] = await recordDecisions(tx, w, deps.now(), [{ i, d: decide(i, n, { ok: true, reference }, at(i), settings), at: at(i) }]);
          return result && { result };
        }
        const p = i.payment ?? {};
        const next = answer === "open" ? null : (i.nextPaymentAttempt ?? planAt(i));
        const payment = answer === "open" ? p : { ...p, actionRequired: false, actionUrl: null, cancelled: reference };
        await rewrite(w, i, next, payment, deps.now());
        return answer === "open" ? undefined : CHARGE;
      }),
    );
  } catch (err) {
    // Not due again on every run: the plan moved ahead of this attempt's time (the error is the caller's to report).
    if (cancelThrew) await later(deps, ref, (i) => new Date(Math.max(at(i).getTime(), dueBy?.getTime() ?? 0))).catch(() => undefined);
    throw err;
  }
}

/** After the cancel threw: the invoice, still waiting, has its next attempt CANCEL_RETRY_MS after `base`, in a transaction of its own. */
async function later(deps: WaitingDeps, ref: Pick<Invoice, "environmentId" | "id">, base: (i: Invoice) => Date): Promise<void> {
  await retryingRaces(() =>
    deps.stores.transaction(async (tx) => {
      const w = deps.writes(tx);
      const i = await w.claim(ref.environmentId, ref.id);
      if (!i || !isCollectible(i) || !waitingOn(i)) return;
      await rewrite(w, i, new Date(base(i).getTime() + CANCEL_RETRY_MS), i.payment ?? {}, deps.now());
    }),
  );
}
