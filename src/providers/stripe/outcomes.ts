/** A PaymentIntent, or the error its creation answered, as a ChargeOutcome (DESIGN §16). */
import Stripe from "stripe";
import type { ChargeOutcome } from "../../billing/payments/types.js";

/** Where the customer completes a PaymentIntent's action (3-D Secure), when Stripe gives a page for it. */
function actionUrl(pi: Stripe.PaymentIntent | undefined): string | undefined {
  return pi?.next_action?.redirect_to_url?.url ?? undefined;
}

/**
 * A PaymentIntent as created (or found again by its charge key): succeeded → paid; processing (a
 * bank debit: SEPA, ACH, Bacs, saved through Checkout's setup mode, which offers every method of
 * the currency) → processing with its reference, settled later by its webhook
 * (payment_intent.succeeded / payment_intent.payment_failed), never the customer's to act on;
 * waiting for the customer (or an off-session confirm that asked for authentication, as its 402
 * said) → requiresAction with its reference; else declined with Stripe's message and code.
 */
export function outcomeOfIntent(pi: Stripe.PaymentIntent): ChargeOutcome {
  if (pi.status === "succeeded") return { ok: true, reference: pi.id };
  if (pi.status === "processing") return { ok: false, processing: true, reference: pi.id, message: "The payment is processing; its outcome comes later.", code: "processing" };
  const authenticate = pi.status === "requires_payment_method" && pi.last_payment_error?.code === "authentication_required";
  if (pi.status === "requires_action" || pi.status === "requires_confirmation" || authenticate) {
    const url = actionUrl(pi);
    return { ok: false, requiresAction: true, reference: pi.id, message: "The payment needs the customer's authentication.", code: "authentication_required", ...(url ? { actionUrl: url } : {}) };
  }
  const e = pi.last_payment_error;
  return { ok: false, message: e?.message ?? "The card was declined.", code: e?.decline_code ?? e?.code ?? "card_declined" };
}

/**
 * Stripe refusing the request itself, for good: the secret key invalid or revoked
 * (StripeAuthenticationError, 401), a permission the key or account lacks (StripePermissionError,
 * 403), a request it cannot take (StripeInvalidRequestError, 400/404: a card or customer gone, an
 * account not set up to charge). What Stripe could not answer is not this: connection failures and
 * timeouts (StripeConnectionError), 5xx and 409 (StripeAPIError), 429 (StripeRateLimitError) pass
 * later. Nor is StripeIdempotencyError (the key used before with other parameters: the amount or
 * the card changed since): it says an earlier request under that key reached Stripe, whose charge
 * may well have succeeded; the provider answers from what was made under the key (charges.ts).
 */
function refusedForGood(err: unknown): err is Stripe.errors.StripeError {
  const e = Stripe.errors;
  return err instanceof e.StripeAuthenticationError || err instanceof e.StripePermissionError || err instanceof e.StripeInvalidRequestError;
}

/**
 * A card error as an outcome: authentication required → requiresAction (the PaymentIntent in the
 * error); other card errors → declined. An amount below Stripe's minimum charge for its currency
 * (400 amount_too_small: USD 0.50, https://docs.stripe.com/currencies#minimum-and-maximum-charge-amounts)
 * → belowMinimum: no card and no retry changes it, so it is no failure (dunning.ts settling).
 * Stripe refusing the request for good otherwise (refusedForGood) → a failure refusedByProvider, with Stripe's message. Anything else (connection, timeout, 5xx,
 * rate limit) is not an outcome: undefined, and the caller throws it (the attempt stays planned).
 */
export function outcomeOfError(err: unknown): ChargeOutcome | undefined {
  if (err instanceof Stripe.errors.StripeInvalidRequestError && err.code === "amount_too_small") {
    return { ok: false, belowMinimum: true, message: `Not charged: the amount due is below Stripe's minimum charge for this currency (${err.message}).`, code: "amount_too_small" };
  }
  if (refusedForGood(err)) return { ok: false, refusedByProvider: true, message: `Stripe refused the payment request: ${err.message}`, code: err.code ?? err.rawType ?? err.type };
  if (!(err instanceof Stripe.errors.StripeCardError)) return undefined;
  const pi = err.payment_intent;
  if (err.code === "authentication_required" && pi) {
    const url = actionUrl(pi);
    return { ok: false, requiresAction: true, reference: pi.id, message: err.message, code: err.code, ...(url ? { actionUrl: url } : {}) };
  }
  return { ok: false, message: err.message, code: err.decline_code ?? err.code ?? "card_declined" };
}
