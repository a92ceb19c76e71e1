/** A PaymentIntent, or the error its creation answered, as a ChargeOutcome (DESIGN §16). */
import Stripe from "stripe";
import type { ChargeOutcome } from "../../billing/payments/types.js";

/** Where the customer completes a PaymentIntent's action (3-D Secure), when Stripe gives a page for it. */
function actionUrl(pi: Stripe.PaymentIntent | undefined): string | undefined {
  return pi?.next_action?.redirect_to_url?.url ?? undefined;
}

/**
 * A PaymentIntent as created: succeeded → paid; waiting for the customer (or still processing,
 * settled later by its webhook) → requiresAction with its reference; else declined with Stripe's
 * message and code.
 */
export function outcomeOfIntent(pi: Stripe.PaymentIntent): ChargeOutcome {
  if (pi.status === "succeeded") return { ok: true, reference: pi.id };
  if (pi.status === "requires_action" || pi.status === "requires_confirmation" || pi.status === "processing") {
    const url = actionUrl(pi);
    return { ok: false, requiresAction: true, reference: pi.id, message: "The payment needs the customer's authentication.", code: "authentication_required", ...(url ? { actionUrl: url } : {}) };
  }
  const e = pi.last_payment_error;
  return { ok: false, message: e?.message ?? "The card was declined.", code: e?.decline_code ?? e?.code ?? "card_declined" };
}

/**
 * A card error as an outcome: authentication required → requiresAction (the PaymentIntent in the
 * error); other card errors → declined. Anything else (API, connection, authentication with
 * Stripe) is not an outcome: undefined, and the caller throws it (the invoice stays open).
 */
export function outcomeOfError(err: unknown): ChargeOutcome | undefined {
  if (!(err instanceof Stripe.errors.StripeCardError)) return undefined;
  const pi = err.payment_intent;
  if (err.code === "authentication_required" && pi) {
    const url = actionUrl(pi);
    return { ok: false, requiresAction: true, reference: pi.id, message: err.message, code: err.code, ...(url ? { actionUrl: url } : {}) };
  }
  return { ok: false, message: err.message, code: err.decline_code ?? err.code ?? "card_declined" };
}
