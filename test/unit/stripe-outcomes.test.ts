/**
 * The Stripe adapter's pure parts (src/providers/stripe): a PaymentIntent or a library error as a
 * ChargeOutcome, and amounts as Stripe's integers (whole smallest units only).
 */
import test from "ava";
import Stripe from "stripe";
import { outcomeOfError, outcomeOfIntent } from "../../src/providers/stripe/outcomes.js";
import { toStripeAmount } from "../../src/providers/stripe/amounts.js";

const intent = (fields: Record<string, unknown>) => ({ id: "pi_1", object: "payment_intent", ...fields }) as unknown as Stripe.PaymentIntent;

test("a PaymentIntent's status as an outcome", (t) => {
  t.deepEqual(outcomeOfIntent(intent({ status: "succeeded" })), { ok: true, reference: "pi_1" });
  t.like(outcomeOfIntent(intent({ status: "requires_action", next_action: { redirect_to_url: { url: "https://hooks.stripe.com/3ds" } } })), {
    ok: false,
    requiresAction: true,
    reference: "pi_1",
    actionUrl: "https://hooks.stripe.com/3ds",
  });
  t.like(
    outcomeOfIntent(intent({ status: "requires_payment_method", last_payment_error: { message: "Your card has insufficient funds.", code: "card_declined", decline_code: "insufficient_funds" } })),
    {
      ok: false,
      message: "Your card has insufficient funds.",
      code: "insufficient_funds",
    },
  );
});

test("card errors are outcomes (authentication required waits with its PaymentIntent); other errors are not", (t) => {
  const auth = new Stripe.errors.StripeCardError({
    type: "card_error",
    code: "authentication_required",
    message: "Authentication required.",
    payment_intent: intent({ status: "requires_payment_method" }),
  } as never);
  t.like(outcomeOfError(auth), { ok: false, requiresAction: true, reference: "pi_1", code: "authentication_required" });
  const declined = new Stripe.errors.StripeCardError({ type: "card_error", code: "card_declined", decline_code: "generic_decline", message: "Your card was declined." } as never);
  t.deepEqual(outcomeOfError(declined), { ok: false, message: "Your card was declined.", code: "generic_decline" });
  t.is(outcomeOfError(new Stripe.errors.StripeAPIError({ type: "api_error", message: "boom" } as never)), undefined);
  t.is(outcomeOfError(new Error("ECONNRESET")), undefined);
});

test("Stripe refusing the request for good (authentication, permission, invalid request) is a failure refusedByProvider; what it could not answer (connection, 5xx, 409, 429) is not an outcome", (t) => {
  const raw = (type: string, statusCode: number, message: string) => ({ type, statusCode, message }) as never;
  t.deepEqual(outcomeOfError(new Stripe.errors.StripeAuthenticationError(raw("invalid_request_error", 401, "Invalid API Key provided: sk_test_****oked"))), {
    ok: false,
    refusedByProvider: true,
    message: "Stripe refused the payment request: Invalid API Key provided: sk_test_****oked",
    code: "invalid_request_error",
  });
  t.like(outcomeOfError(new Stripe.errors.StripePermissionError(raw("invalid_request_error", 403, "The key lacks a permission."))), { ok: false, refusedByProvider: true });
  t.like(outcomeOfError(new Stripe.errors.StripeInvalidRequestError(raw("invalid_request_error", 400, "No such PaymentMethod: 'pm_gone'"))), { ok: false, refusedByProvider: true });
  t.is(outcomeOfError(new Stripe.errors.StripeConnectionError(raw("api_error", 0, "An error occurred with our connection to Stripe."))), undefined);
  t.is(outcomeOfError(new Stripe.errors.StripeAPIError(raw("api_error", 503, "Stripe is unavailable."))), undefined);
  t.is(outcomeOfError(new Stripe.errors.StripeAPIError(raw("invalid_request_error", 409, "Concurrent requests with one key."))), undefined);
  t.is(outcomeOfError(new Stripe.errors.StripeRateLimitError(raw("invalid_request_error", 429, "Too many requests."))), undefined);
});

test("the key reused with other parameters (StripeIdempotencyError) is no refusal: an earlier request under it reached Stripe, the provider looks its PaymentIntent up", (t) => {
  const reused = new Stripe.errors.StripeIdempotencyError({
    type: "idempotency_error",
    statusCode: 400,
    message: "Keys for idempotent requests can only be used with the same parameters they were first used with.",
  } as never);
  t.is(outcomeOfError(reused), undefined);
});

test("a PaymentIntent found again whose off-session confirm asked for authentication waits for the customer, as its 402 said", (t) => {
  const found = intent({ status: "requires_payment_method", last_payment_error: { message: "Authentication required.", code: "authentication_required" } });
  t.like(outcomeOfIntent(found), { ok: false, requiresAction: true, reference: "pi_1", code: "authentication_required" });
});

test("amounts: whole smallest units as Stripe's integer; anything else refused", (t) => {
  t.is(toStripeAmount("4900", "USD"), 4900);
  for (const bad of ["49.5", "-1", "0", "1e3", "", "99999999999999999999"]) t.throws(() => toStripeAmount(bad, "USD"), undefined, bad);
});
