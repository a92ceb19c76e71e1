/**
 * Dunning (DESIGN §16), the rules: each charge of an invoice is attempt n (its provider key is
 * chargeKey(invoice, n), so a crash between the charge and its commit charges nothing twice, and
 * a retry is a new attempt). A failed attempt records the count and plans the next one at the
 * first failure + schedule[n-1] days on the invoice's clock; after the last, the environment's
 * policy applies to the subscription, and the invoice becomes uncollectible if so configured. A
 * charge that needs the customer (authentication) is a failed attempt as well, on the same
 * schedule: the invoice stays open with its pay link meanwhile, and the next attempt cancels that
 * payment before it charges (waiting.ts), so a customer who never authenticates still reaches the
 * last attempt and its policy. A credit purchase's invoice (DESIGN §14) has one rule of its own, whichever path makes
 * its attempt (purchaseDecision). Pure functions here and the ports the use case (attempts.ts)
 * works through.
 */
import { purchasedGrantId } from "../credits/purchase-states.js";
import { dec } from "../money.js";
import type { Invoice } from "../subscriptions/types.js";
import { amountDueOf } from "../subscriptions/types.js";
import { type AfterLastAttempt, type ChargeOutcome, type PaymentSettings, defaultPaymentSettings } from "./types.js";

export type { InvoicePayment } from "./types.js";
import type { InvoicePayment } from "./types.js";

export const DAY_MS = 86_400_000;

/** How far ahead the sweep plans a cancel written with the move that ended its invoice (payments/cancels.ts): longer than the call after the commit takes. */
export const CANCEL_GRACE_MS = 60_000;

/**
 * How often an open invoice whose bank debit is processing has that payment looked up at the
 * provider (payments/processing.ts), in case its webhook never comes: Stripe stops sending a
 * webhook after about 3 days, while a SEPA debit may take 14 to settle.
 */
export const PROCESSING_CHECK_MS = 6 * 3_600_000;

/** The provider's idempotency key of the cancel of attempt `attempt`'s payment, waiting for the customer when its invoice ended. */
export const cancelKey = (invoiceId: string, attempt: number) => `${invoiceId}:attempt-${attempt}:cancel`;

/**
 * When the attempt after `failedAttempts` failures is due: the first failure plus the schedule's
 * entry for that many failures (days); null when the schedule is exhausted (that was the last).
 */
export function nextAttemptAt(firstFailedAt: Date, retryScheduleDays: readonly number[], failedAttempts: number): Date | null {
  if (failedAttempts < 1) return null;
  const days = retryScheduleDays[failedAttempts - 1];
  return days === undefined ? null : new Date(firstFailedAt.getTime() + days * DAY_MS);
}

/** How many attempts an invoice gets in all: the first charge and one per scheduled retry. */
export function attemptsAllowed(retryScheduleDays: readonly number[]): number {
  return retryScheduleDays.length + 1;
}

/** Whether an invoice can be charged: open, something due (a void, paid or uncollectible invoice never is). */
export function isCollectible(i: Pick<Invoice, "status" | "total" | "amountDue">): boolean {
  return i.status === "open" && dec(amountDueOf(i)).gt(0);
}

/**
 * Whether dunning may retry it on its own: collectible, and not waiting for the customer to
 * authenticate, unless an attempt that cancels that payment first was planned (payments/waiting.ts:
 * the schedule's next attempt after a charge that needed authentication, or a new card's).
 */
export function isRetryable(i: Pick<Invoice, "status" | "total" | "amountDue" | "payment"> & { nextPaymentAttempt?: Date | null }): boolean {
  return isCollectible(i) && (!i.payment?.actionRequired || !!i.nextPaymentAttempt);
}

/** What an attempt's outcome makes of the invoice (decide's answer). */
export interface AttemptDecision {
  /** The invoice's next status: paid, still open, uncollectible (the last attempt failed and the policy says so), or void (a credit purchase's charge failed). */
  status: "paid" | "open" | "uncollectible" | "void";
  attemptCount: number;
  nextPaymentAttempt: Date | null;
  payment: InvoicePayment;
  /** The event announcing it; null: none (an attempt neither paid nor failed: settling). */
  event: "invoice.paid" | "invoice.payment_failed" | null;
  /** Announced after it: the charge waits for the customer (its pay link). */
  also?: "invoice.payment_action_required";
  /** The last attempt failed: the subscription follows this policy. */
  afterLast: AfterLastAttempt | null;
}

/**
 * The invoice `id` after attempt `n` succeeded. Paid by another payment than the one that waited
 * for the customer (a pay link's): that one is to be cancelled at the provider, as an ended
 * invoice's is (payments/cancels.ts), so completing it later charges nothing.
 */
function paid(before: InvoicePayment, n: number, outcome: ChargeOutcome & { ok: true }, id?: string): AttemptDecision {
  const waiting = before.actionRequired && before.reference && outcome.reference && outcome.reference !== before.reference ? before.reference : undefined;
  return {
    status: "paid",
    attemptCount: n,
    nextPaymentAttempt: null,
    payment: {
      ...before,
      reference: outcome.reference ?? null,
      actionRequired: false,
      actionUrl: null,
      lastError: null,
      // Paid after its last attempt failed, before the policy ran (a pay link): no policy for a paid invoice.
      ...(before.pendingPolicy ? { pendingPolicy: null } : {}),
      ...(waiting && id ? { cancel: { reference: waiting, key: cancelKey(id, n) } } : {}),
    },
    event: "invoice.paid",
    afterLast: null,
  };
}

/**
 * The invoice after attempt `n` answered neither paid nor failed: no failure counted against it
 * (no invoice.payment_failed, no first failure, the retry schedule and the policy after the last
 * attempt untouched), no retry planned, no pay link. `n` is kept as its count: the provider was
 * asked under chargeKey(invoice, n), and an invoice attempted is never planned again as a first
 * charge lost (DunningStore.unplanned). Either
 * - below the provider's minimum charge (Stripe refuses a PaymentIntent under USD 0.50 with
 *   amount_too_small, whatever the card): as Stripe Billing does, the invoice is paid (its
 *   invoice.paid), settled by carrying its amount due `due` to the subject's next invoice
 *   (payments/carries.ts: `belowMinimum`, `carried`, the reason in `lastError`; the debit is
 *   written with the move, record.ts), or
 * - processing (a bank debit): `processing` with its reference; it stays open, no other charge is
 *   made meanwhile (attempts.ts), and its webhook resolves it as this attempt (provider-events.ts): paid, or
 *   failed attempt `n` on the schedule, its policy after the last. In case that webhook never
 *   comes, next_payment_attempt is its look-up at the provider, PROCESSING_CHECK_MS after `at`
 *   (payments/processing.ts: a status check, never a charge; not shown as the invoice's next attempt).
 */
function settling(before: InvoicePayment, n: number, outcome: { message: string; processing?: true; reference?: string }, at: Date, due: string): AttemptDecision {
  const processing = outcome.processing && outcome.reference ? { reference: outcome.reference, processing: true as const, lastError: null } : undefined;
  if (!processing) {
    const carried = { actionRequired: false, actionUrl: null, belowMinimum: true as const, carried: due, lastError: outcome.message };
    return { status: "paid", attemptCount: n, nextPaymentAttempt: null, payment: { ...before, ...carried }, event: "invoice.paid", afterLast: null };
  }
  return {
    status: "open",
    attemptCount: n,
    nextPaymentAttempt: new Date(at.getTime() + PROCESSING_CHECK_MS),
    payment: { ...before, actionRequired: false, actionUrl: null, ...processing },
    event: null,
    afterLast: null,
  };
}

/**
 * The payment state an attempt's decision starts from: the invoice's, marked refusedByProvider
 * when `outcome` is such a failure (a failed attempt all the same: counted, on the schedule),
 * that mark dropped otherwise.
 */
function stateBefore(payment: InvoicePayment | null | undefined, outcome: ChargeOutcome): InvoicePayment {
  const { refusedByProvider: _, belowMinimum: _b, carried: _c, processing: _p, ...before } = payment ?? {};
  return !outcome.ok && !outcome.requiresAction && outcome.refusedByProvider ? { ...before, refusedByProvider: true } : before;
}

/**
 * A credit purchase's invoice after attempt `n` answered `outcome`; undefined for any other
 * invoice. A purchase is charged once, never retried on a schedule: paid, or else (declined, no
 * card, a charge that needs the customer's authentication) void, no next attempt, and its grant
 * fails with the move (purchase-states.ts). The same whichever path makes the attempt: the
 * purchase's own charge (credits/purchase-charge.ts), dunning making it after a process died
 * before recording it, a card saved in the portal.
 */
export function purchaseDecision(i: Pick<Invoice, "payment" | "periodKey" | "subscriptionId"> & { id?: string }, n: number, outcome: ChargeOutcome): AttemptDecision | undefined {
  if (purchasedGrantId(i) === undefined) return undefined;
  const before = stateBefore(i.payment, outcome);
  if (outcome.ok) return paid(before, n, outcome, i.id);
  // A charge waiting for authentication (or processing) keeps its reference (what the provider holds), not waited
  // for: the invoice is void, so that payment is cancelled at the provider (payments/cancels.ts).
  const held = outcome.requiresAction ? outcome.reference : outcome.processing ? outcome.reference : undefined;
  const reference = held ?? before.reference ?? null;
  const cancel = held && i.id ? { cancel: { reference: held, key: cancelKey(i.id, n) } } : {};
  return {
    status: "void",
    attemptCount: n,
    nextPaymentAttempt: null,
    payment: { ...before, reference, actionRequired: false, actionUrl: null, lastError: outcome.message, ...cancel },
    event: "invoice.payment_failed",
    afterLast: null,
  };
}

/**
 * The invoice after attempt `n` answered `outcome` at `at` (on its clock), under `settings`
 * (a credit purchase's: purchaseDecision). Pure: the use case writes what it says.
 */
export function decide(
  i: Pick<Invoice, "payment" | "periodKey" | "subscriptionId"> & Partial<Pick<Invoice, "total" | "amountDue">> & { id?: string },
  n: number,
  outcome: ChargeOutcome,
  at: Date,
  settings: Pick<PaymentSettings, "retryScheduleDays" | "afterLastAttempt" | "markUncollectible" | "provider">,
): AttemptDecision {
  const purchase = purchaseDecision(i, n, outcome);
  if (purchase) return purchase;
  const before = stateBefore(i.payment, outcome);
  if (outcome.ok) return paid(before, n, outcome, i.id);
  if (!outcome.requiresAction && (outcome.belowMinimum || outcome.processing)) return settling(before, n, outcome, at, i.amountDue ?? i.total ?? "0");
  const first = before.firstFailedAt ? new Date(before.firstFailedAt) : at;
  const next = nextAttemptAt(first, settings.retryScheduleDays, n);
  const last = next === null;
  const status = last && settings.markUncollectible ? "uncollectible" : "open";
  const failed = { status, attemptCount: n, nextPaymentAttempt: next, event: "invoice.payment_failed", afterLast: last ? settings.afterLastAttempt : null } as const;
  if (outcome.requiresAction) {
    // A failed attempt like any other (Stripe keeps its schedule for an invoice that needs action):
    // counted, the next planned (its retry cancels this payment first, waiting.ts), the policy after
    // the last. Until then the payment waits with its pay link. Made uncollectible by this attempt
    // (no policy for the subscription to run first), its payment is cancelled (cancels.ts).
    const ends = status === "uncollectible" && settings.afterLastAttempt === "leave_active" && i.id !== undefined;
    const waiting = ends
      ? { actionRequired: false, actionUrl: null, cancel: { reference: outcome.reference, key: cancelKey(i.id as string, n) } }
      : { actionRequired: true, actionUrl: outcome.actionUrl ?? null };
    return {
      ...failed,
      payment: { ...before, reference: outcome.reference, ...waiting, lastError: outcome.message, firstFailedAt: first.toISOString(), provider: before.provider ?? settings.provider },
      // No pay link announced for an invoice this last attempt makes uncollectible (its payment is cancelled once the policy ran, last-attempt.ts).
      ...(waiting.actionRequired && status !== "uncollectible" ? { also: "invoice.payment_action_required" as const } : {}),
    };
  }
  return { ...failed, payment: { ...before, actionRequired: false, actionUrl: null, lastError: outcome.message, firstFailedAt: first.toISOString() } };
}

/** An environment's payment settings, as dunning reads them (the payment settings store, settings.ts, once wired). */
export interface PaymentSettingsSource {
  settingsOf(environmentId: string): Promise<PaymentSettings>;
}

/** Settings for environments that configured none: the test provider, 3/5/7 days, leave active. */
export function defaultSettingsSource(now: () => Date = () => new Date()): PaymentSettingsSource {
  return { settingsOf: async (environmentId) => defaultPaymentSettings(environmentId, now()) };
}

/** An invoice dunning may retry: due, read without a lock (the claim locks it). */
export interface DueInvoice {
  id: string;
  environmentId: string;
  subjectId: string;
}

/** What dunning reads outside transactions. */
export interface DunningStore {
  /** Open invoices whose next attempt is due by `now` on real time (clockId null) or one test clock, earliest first, none of `exclude`. */
  due(now: Date, clockId: string | null, limit: number, exclude: readonly string[]): Promise<DueInvoice[]>;
  /** When the earliest retry of an open invoice on test clock `clockId` is due: after `after` (if given) and by `upTo`, none of `exclude`; null when none is (the scheduler steps an advance through them). */
  nextDue(after: Date | null, upTo: Date, clockId: string, exclude?: readonly string[]): Promise<Date | null>;
  /**
   * Open invoices due to finalize (or made) by `before`, on real time or one test clock's time
   * (finalized_at is real time), with something
   * to charge, never attempted and with no attempt planned, whose subject has a card on file: a
   * first charge cut short before its plan committed (the database went away under it). Never a
   * credit purchase's (one without a plan awaits its checkout: awaitsCheckout). Oldest first.
   */
  unplanned(before: Date, clockId: string | null, limit: number): Promise<DueInvoice[]>;
  /** Paid, void and uncollectible invoices whose payment's cancel is pending and due by `now` (real time), earliest first (payments/cancels.ts). */
  cancelsDue(now: Date, limit: number): Promise<DueInvoice[]>;
}

/** What dunning writes in a billing transaction (BillingTx.dunning). */
export interface DunningWrites {
  /**
   * The invoice with its lines, locked until the transaction ends. `dueBy`: only if it is still
   * open and due by then, and a row another transaction holds is skipped (undefined; SKIP LOCKED
   * on MySQL): N servers never retry one invoice at once.
   */
  claim(environmentId: string, id: string, dueBy?: Date): Promise<Invoice | undefined>;
  /** claim for many invoices of one environment at once (no `dueBy`: each waits for its lock), in the order of `ids`; those not found are left out. */
  claimAll(environmentId: string, ids: readonly string[]): Promise<Invoice[]>;
  /**
   * Plans a first attempt of each invoice (of one environment) at its `at` when none was made or
   * planned (attempt_count 0, no next attempt, open): committed before the charge, so a process that
   * dies between the provider's answer and its own commit leaves a planned attempt that dunning
   * makes again with the same key.
   */
  planFirsts(environmentId: string, plans: readonly { id: string; at: Date }[]): Promise<void>;
  /** Writes attempts' outcomes on invoices of one environment (the count, the next attempt, the payment state), in one statement. */
  recordAttempts(environmentId: string, list: readonly { id: string; attempt: AttemptWrite }[], at: Date): Promise<void>;
}

/** What an attempt writes on its invoice: the count, the next attempt, the payment state. */
export interface AttemptWrite {
  attemptCount: number;
  nextPaymentAttempt: Date | null;
  payment: InvoicePayment;
}
