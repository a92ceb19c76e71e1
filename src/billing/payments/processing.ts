/**
 * A bank debit that is processing (DESIGN §16: SEPA, ACH, Bacs; dunning.ts settling) is resolved
 * by the provider's webhook, payment_intent.succeeded or payment_intent.payment_failed
 * (provider-events.ts). That webhook may never come: Stripe stops sending one after about 3 days,
 * while a SEPA debit may take 14 to settle; and a payment_failed that arrives before the charge's
 * transaction committed the processing state finds nothing waiting on it and is acknowledged
 * unchanged. Without more, such an invoice would stay open for ever, never charged again.
 *
 * So its next_payment_attempt is a look-up, not a charge: every PROCESSING_CHECK_MS, dunning's
 * run (attempts.ts, under the invoice's row lock, as a retry is claimed) asks the provider where
 * the payment stands (PaymentProvider.paymentOutcome) and resolves it as the webhook would, as
 * that same attempt: succeeded → paid (invoice.paid); failed → failed attempt n on the schedule
 * (invoice.payment_failed with its next attempt, the policy after the last); still processing, or
 * the provider unreachable → looked up again PROCESSING_CHECK_MS later. The webhook that comes
 * after it changes nothing (the invoice no longer waits on that payment).
 */
import type { Invoice, PaymentProvider } from "../subscriptions/types.js";
import { type DunningWrites, PROCESSING_CHECK_MS, decide } from "./dunning.js";
import { type AttemptResult, type Tx, recordDecisions } from "./record.js";
import type { ChargeOutcome, PaymentSettings } from "./types.js";

/** What a look-up runs with: the transaction holding the invoice's row lock, and the environment's provider and settings. */
export interface LookUp {
  tx: Tx;
  writes: DunningWrites;
  provider: PaymentProvider;
  settings: PaymentSettings;
  /** Real time, when it is written. */
  now: () => Date;
  /** Told of a look-up that failed (the provider unreachable): it is made again later. */
  failed?: (invoiceId: string, err: unknown) => void;
}

/** Whether an outcome says the payment is still processing. */
const stillProcessing = (o: ChargeOutcome) => !o.ok && !o.requiresAction && o.processing === true;

/**
 * The look-up of the processing payment of the open invoice `i` (claimed, due at `at` on its
 * clock), made at `checkedAt` (the run's time on that clock): the attempt resolved as its webhook
 * would resolve it, or undefined when it is still processing, its next look-up planned.
 */
export async function lookUpProcessing(l: LookUp, i: Invoice, at: Date, checkedAt: Date): Promise<AttemptResult | undefined> {
  const reference = i.payment?.reference;
  let outcome: ChargeOutcome | undefined;
  try {
    outcome = reference && l.provider.paymentOutcome ? await l.provider.paymentOutcome(reference) : undefined;
  } catch (err) {
    l.failed?.(i.id, err);
  }
  if (!outcome || stillProcessing(outcome)) {
    const next = new Date(checkedAt.getTime() + PROCESSING_CHECK_MS);
    await l.writes.recordAttempts(i.environmentId, [{ id: i.id, attempt: { attemptCount: i.attemptCount ?? 0, nextPaymentAttempt: next, payment: i.payment ?? {} } }], l.now());
    return undefined;
  }
  // The same attempt as the charge that started it (its key chargeKey(invoice, n)), as the webhook records it.
  const n = Math.max(i.attemptCount ?? 1, 1);
  return (await recordDecisions(l.tx, l.writes, l.now(), [{ i, d: decide(i, n, outcome, at, l.settings), at }]))[0];
}
