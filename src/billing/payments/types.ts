/**
 * Payments (DESIGN §16): an environment's provider and its dunning. The provider port itself is
 * `PaymentProvider` in ../subscriptions/types.ts (charge, refund, card entry); this file holds what
 * an environment configures and what a charge can answer.
 */

export type ProviderKind = "test" | "stripe";
export const PROVIDER_KINDS: readonly ProviderKind[] = ["test", "stripe"];

/** After the last attempt of dunning fails: what happens to the subscription. */
export type AfterLastAttempt = "cancel" | "pause" | "leave_active";
export const AFTER_LAST_ATTEMPT: readonly AfterLastAttempt[] = ["cancel", "pause", "leave_active"];

/** The default retry schedule: days after the first failure (DESIGN §16). */
export const DEFAULT_RETRY_DAYS: readonly number[] = [3, 5, 7];

/** An environment's payment settings as stored; secrets encrypted (secret-box.ts), never in clear here. */
export interface PaymentSettings {
  environmentId: string;
  provider: ProviderKind;
  /** AES-256-GCM sealed Stripe secret key (see secret-box.ts); null: none stored. */
  stripeSecretKeySealed: string | null;
  /** The last 4 characters of the Stripe secret key, to tell keys apart (not a secret). */
  stripeSecretKeyLast4: string | null;
  stripeWebhookSecretSealed: string | null;
  retryScheduleDays: number[];
  afterLastAttempt: AfterLastAttempt;
  markUncollectible: boolean;
  updatedAt: Date;
}

/** The settings of an environment that never configured any: the test provider (test environments) and the default dunning. */
export function defaultPaymentSettings(environmentId: string, at: Date): PaymentSettings {
  return {
    environmentId,
    provider: "test",
    stripeSecretKeySealed: null,
    stripeSecretKeyLast4: null,
    stripeWebhookSecretSealed: null,
    retryScheduleDays: [...DEFAULT_RETRY_DAYS],
    afterLastAttempt: "leave_active",
    markUncollectible: false,
    updatedAt: at,
  };
}

/**
 * What a charge answers: paid; declined (the message for people, the provider's code); or waiting
 * for the customer (authentication), with where the customer completes it. `refusedByProvider`:
 * not the card but the request was refused by the provider itself, for good (the merchant's
 * credentials revoked, a permission or account it lacks, a request it cannot take): a failed
 * attempt like a decline, which the same request would meet again until someone fixes it there.
 * A charge the provider could not answer (unreachable, timed out, a 5xx, rate limited) is no
 * outcome: the provider throws, and the attempt stays planned (the same key later).
 * Two answers are neither paid nor failed (dunning.ts settling): `belowMinimum`, the amount is
 * below the provider's minimum charge for its currency (Stripe's amount_too_small: USD 0.50), which
 * no retry and no other card changes; `processing`, the payment (`reference`, a bank debit: SEPA,
 * ACH, Bacs) was taken and settles later, its outcome told by the provider's webhook.
 */
export type ChargeOutcome =
  | { ok: true; reference?: string }
  | { ok: false; message: string; code?: string; requiresAction?: false; refusedByProvider?: true; belowMinimum?: true; processing?: true; reference?: string }
  | { ok: false; message: string; code?: string; requiresAction: true; reference: string; actionUrl?: string };

/** An invoice waiting for the customer, to be paid on the provider's own page (DESIGN §16, Stripe Checkout in payment mode). */
export interface PaymentPageRequest {
  invoiceId: string;
  subjectId: string;
  /** The amount due in the currency's smallest unit, and the currency. */
  amount: string;
  currency: string;
  /** The invoice's attempt count: one page per attempt waiting for the customer (double clicks make one). */
  attempt: number;
  /** What the provider's page shows (the invoice's number). */
  description: string;
  /** Where the customer comes back to, paid or not: the hosted invoice page's path on this service. */
  returnPath: string;
}

/** An invoice's payment at its provider (DESIGN §16): what dunning and a pending authentication need. */
export interface InvoicePayment {
  /** The provider's reference of the last charge (a PaymentIntent `pi_…`), if any. */
  reference?: string | null;
  /** A charge waiting for the customer (authentication): it is not retried until they act; the provider's own page, if it has one. */
  actionRequired?: boolean;
  actionUrl?: string | null;
  /** The provider's message of the last failed attempt. */
  lastError?: string | null;
  /** The last failed attempt was refused by the provider itself, not declined (ChargeOutcome.refusedByProvider); absent otherwise. */
  refusedByProvider?: true;
  /**
   * The last attempt was not made: its amount due is below the provider's minimum charge
   * (ChargeOutcome.belowMinimum; `lastError` says so). No failure: no retry planned, no policy;
   * the invoice is paid by carrying `carried` (its amount due) to the subject's next invoice
   * (dunning.ts settling, payments/carries.ts). Absent otherwise.
   */
  belowMinimum?: true;
  carried?: string;
  /**
   * The payment `reference` was taken and is processing (a bank debit): no retry, no pay link, no
   * other charge until the provider's webhook says how it ended (payment_intent.succeeded: paid;
   * payment_intent.payment_failed: this attempt failed, on the schedule). Absent otherwise.
   */
  processing?: true;
  provider?: string | null;
  /** When the first attempt failed, on the invoice's clock (ISO 8601): the retry schedule counts from it. */
  firstFailedAt?: string | null;
  /**
   * The last attempt failed and the subscription's policy (cancel or pause) is not applied yet:
   * written with that attempt, the invoice kept open and due at once until the policy is done
   * (then it becomes uncollectible if `markUncollectible`). A process that dies in between leaves
   * it so, and dunning's next run applies the policy (attempts.ts finishLast), never a charge.
   */
  pendingPolicy?: { policy: AfterLastAttempt; markUncollectible: boolean } | null;
  /**
   * The invoice was voided or marked uncollectible while a payment waited for the customer: that
   * payment (`reference`) is to be cancelled at the provider with idempotency key `key`. Written in
   * the transaction that ended the invoice, cleared once the provider answered (payments/cancels.ts).
   */
  cancel?: PendingCancel | null;
  /** The provider's payment cancelled after the invoice ended (its reference). */
  cancelled?: string | null;
  /**
   * What paid the invoice when no payment did: a credit note crediting it to zero
   * (reduce_amount_due). Any payment that succeeds on it afterwards is refunded (payments/cancels.ts).
   */
  paidBy?: "credit_note";
  /** Payments that succeeded on the ended invoice all the same (a cancel that lost the race, a pay link), each refunded. */
  refundedAfterEnd?: RefundAfterEnd[] | null;
  /**
   * The payment that paid the invoice took more than its amount due (a pay link opened before a
   * credit note lowered it): the difference to refund (payments/cancels.ts), in the currency's
   * smallest unit. Written once it paid, cleared once the provider answered the refund.
   */
  excess?: { reference: string; amount: string } | null;
  /** The refunds of such differences, one per payment (made, or refused for good). */
  refundedExcess?: RefundAfterEnd[] | null;
}

/** A payment waiting for the customer on an ended invoice, to be cancelled at the provider. */
export interface PendingCancel {
  reference: string;
  key: string;
}

/**
 * A payment that succeeded on an ended invoice, and its refund: made (its id, the amount the
 * provider refunded), or refused by the provider for good (`refused`, its message: the payment
 * refunded by hand already, say), which is not asked again.
 */
export interface RefundAfterEnd {
  reference: string;
  refundId: string | null;
  /** In the currency's smallest unit, exact decimal text; null when refused. */
  amount: string | null;
  refused?: string | null;
  /** Made, the money not back yet (Stripe's refund `pending`): its events tell how it ends (payments/refund-failures.ts). */
  pending?: true;
  /**
   * Made, then failed at the provider (Stripe's refund.failed: a closed card, say): the provider's
   * reason. The money did not go back; `invoice.refund_failed` announced it, once.
   */
  failed?: string | null;
}

/** Why a payment of an invoice is refunded other than by a credit note (payments/cancels.ts): it succeeded on an ended invoice, or took more than the amount due. */
export type InvoiceRefundKind = "after_end" | "excess";

/** A provider's refund as its event tells it (Stripe's refund.updated / refund.failed). */
export interface RefundUpdate {
  refundId: string;
  status: "pending" | "succeeded" | "failed";
  /** The provider's reason of a failed refund (Stripe's failure_reason); null otherwise. */
  failureReason: string | null;
  /** The credit note the refund was made for, as the refund names it (Stripe: its metadata); absent for other refunds. */
  creditNoteId?: string | null;
  /** The invoice whose payment the refund gives back, and why, as the refund names it (RefundContext.invoiceRefund); absent for other refunds. */
  invoiceRefund?: { invoiceId: string; kind: InvoiceRefundKind } | null;
}

/**
 * What a refund event did (credit-notes/refund-status.ts, payments/refund-failures.ts): "repeat"
 * (recorded already), "unknown" (no credit note or invoice of the environment has that refund),
 * "early" (the refund names a credit note not written yet, or an invoice that has not recorded it
 * yet: nothing recorded, the provider is to deliver it again), "unchanged" (its refund is there
 * already, or further: a stale event), or the status its refund moved to.
 */
export interface RefundUpdated {
  outcome: "repeat" | "unknown" | "early" | "unchanged" | RefundUpdate["status"];
  creditNoteId?: string;
  /** The invoice whose payment the refund gives back (a refund naming an invoice, payments/refund-failures.ts). */
  invoiceId?: string;
}

/**
 * What a provider's refund answers: made (its id, the amount when the provider tells it, and
 * `pending` when the money is not back yet: Stripe's refund in status pending, which may still
 * fail days later, told by its webhooks), or refused for good.
 */
/** A refusal may name the refund the provider made and failed at once (Stripe: a refund created `failed`), whose events name it later. */
export type RefundOutcome = { ok: true; refundId: string; amount?: string; pending?: boolean } | { ok: false; message: string; refundId?: string };

/** A refund the provider made and did not refuse or fail: its ID, its amount, and `pending` when the money is not back yet. */
export type MadeRefundAnswer = { refundId: string; amount: string; pending?: boolean };

/** The read-only side of a provider's payments (PaymentProvider extends it). */
export interface PaymentLookup {
  /**
   * Where the payment `reference` stands at the provider now, read, nothing changed (Stripe: the
   * PaymentIntent retrieved): paid, still processing, or failed, as a charge's outcome. Dunning's
   * look-up of a processing bank debit whose webhook may never come (payments/processing.ts).
   * Unreachable throws. Absent: never looked up.
   */
  paymentOutcome?(reference: string): Promise<ChargeOutcome>;
}

/** The read-only side of a provider's refunds (PaymentProvider extends it). */
export interface RefundLookup {
  /**
   * The refund of the charge made with key `chargeKey` that the provider made under
   * `idempotencyKey`, for credit note `context.creditNoteId`, when it made one (one it refused, or
   * that failed, is none): asked, never made (credit-notes/refunded-earlier.ts asks it before a keyed
   * note is planned, its earlier attempt's answer lost). Unreachable throws. Absent: never asked.
   */
  refundMade?(chargeKey: string, idempotencyKey: string, context: { reference?: string | null; creditNoteId: string }): Promise<MadeRefundAnswer | undefined>;
}

/**
 * What a provider answers to the cancel of a payment waiting for the customer: cancelled (now or
 * before); succeeded (the customer completed it first: the money was taken); or still open (it is
 * being processed: asked again later).
 */
export type CancelOutcome = "canceled" | "succeeded" | "open";

/** What a provider with its own card page is asked to set up (DESIGN §16). */
export interface CardSetupRequest {
  environmentId: string;
  subjectId: string;
  /** The subject's email and name, for the provider's customer. */
  email: string | null;
  name: string | null;
  /** The hosted checkout (or portal session) this completes, and where the provider sends the customer back. */
  returnReference: string;
  successUrl: string;
  cancelUrl: string;
  /** The currency the card will be charged in (lower or upper case), when known: Stripe shows the methods that fit it. */
  currency?: string;
}

/** What a refund refunds beyond the charge's key: the charge's provider reference (Stripe `pi_…`) when kept; what it is for, named by the refund: its credit note, or the invoice whose payment it gives back and why (payments/cancels.ts). */
export type RefundContext = { reference?: string | null; creditNoteId?: string; invoiceRefund?: { invoiceId: string; kind: InvoiceRefundKind } };

/** What a charge is for, for the provider's records and its payment link (DESIGN §16). */
export interface ChargeContext {
  invoiceId: string;
  environmentId: string;
  subjectId: string;
  /** The invoice's number, for the statement and the provider's dashboard. */
  description?: string;
  /** The key may have been sent before, its answer lost (payments/plan-ahead.ts): a payment made under it is the outcome (Stripe forgets keys after 24 h). */
  sentBefore?: boolean;
}
