/**
 * PaymentIntents and refunds of the fake Stripe: an off-session confirm charges the test card
 * behind the PaymentMethod and answers as Stripe does (see cards.ts for each card's outcome).
 * A failed confirm is a 402 `card_error` carrying the PaymentIntent (status
 * `requires_payment_method`, `last_payment_error` set), which the library surfaces as a
 * `StripeCardError` with `code`, `decline_code` and `payment_intent`.
 */
import { randomBytes } from "node:crypto";
import type { TestCard } from "./cards.js";
import { type FakeStripeState, invalid, mergeMetadata, newId, now, nullable, type Obj, page, StripeFail } from "./objects.js";

/** What a charge did, for the server to turn into webhook events. */
export interface ChargeResult {
  intent: Obj;
  events: { type: string; object: Obj }[];
}

const DECLINES = {
  authenticate: { code: "authentication_required", decline_code: "authentication_required", message: "Your card was declined. This transaction requires authentication." },
  insufficient_funds: { code: "card_declined", decline_code: "insufficient_funds", message: "Your card has insufficient funds." },
  generic_decline: { code: "card_declined", decline_code: "generic_decline", message: "Your card was declined." },
} as const;

/**
 * Stripe's minimum charge per currency, in Stripe's unit (https://docs.stripe.com/currencies#minimum-and-maximum-charge-amounts),
 * for the currencies the tests charge in; Stripe checks others after converting to the settlement
 * currency, which the fake does not (no minimum).
 */
const MINIMUM_CHARGE: Record<string, number> = { usd: 50, eur: 50, gbp: 30, cad: 50, aud: 50, chf: 50, jpy: 50, sek: 300, nok: 300, dkk: 250, huf: 17500, mxn: 1000 };

/** Below its currency's minimum: 400 `amount_too_small`, as Stripe answers (no PaymentIntent made). */
function checkMinimum(amount: number, currency: string): void {
  const min = MINIMUM_CHARGE[currency.toLowerCase()];
  if (min === undefined || amount >= min) return;
  const shown = currency.toLowerCase() === "jpy" ? `¥${min}` : `${(min / 100).toFixed(2)}`;
  throw invalid(`Amount must be at least ${shown} ${currency.toLowerCase()}`, "amount", "amount_too_small");
}

export function createPaymentIntent(st: FakeStripeState, p: Obj): ChargeResult {
  if (!Number.isInteger(p.amount) || p.amount < 1) throw invalid("This value must be greater than or equal to 1.", "amount");
  if (!p.currency) throw invalid("Missing required param: currency.", "currency");
  checkMinimum(p.amount, String(p.currency));
  if (p.customer) st.customer(p.customer, "customer");
  // A test token (`pm_card_visa`) makes a new PaymentMethod, usable once without being attached.
  const fromToken = typeof p.payment_method === "string" && !st.paymentMethods.has(p.payment_method);
  const pm = p.payment_method ? st.paymentMethod(p.payment_method, "payment_method") : null;
  if (pm && p.customer && pm.customer && pm.customer !== p.customer) throw invalid(`The provided PaymentMethod belongs to a different Customer.`, "payment_method");
  if (pm && !fromToken && p.off_session === true && p.customer && !pm.customer)
    throw invalid("The provided PaymentMethod was previously used without being attached to a Customer or was detached from a Customer, and may not be used again.", "payment_method");
  const id = newId("pi");
  const pi: Obj = {
    id,
    object: "payment_intent",
    amount: p.amount,
    amount_capturable: 0,
    amount_details: { tip: {} },
    amount_received: 0,
    application: null,
    application_fee_amount: null,
    automatic_payment_methods: null,
    canceled_at: null,
    cancellation_reason: null,
    capture_method: "automatic",
    client_secret: `${id}_secret_${randomBytes(12).toString("hex")}`,
    confirmation_method: "automatic",
    created: now(),
    currency: String(p.currency).toLowerCase(),
    customer: nullable(p.customer),
    description: nullable(p.description),
    invoice: null,
    last_payment_error: null,
    latest_charge: null,
    livemode: false,
    metadata: mergeMetadata({}, p.metadata),
    next_action: null,
    on_behalf_of: null,
    payment_method: pm?.id ?? null,
    payment_method_configuration_details: null,
    payment_method_options: { card: { installments: null, mandate_options: null, network: null, request_three_d_secure: "automatic" } },
    payment_method_types: p.payment_method_types ?? ["card"],
    processing: null,
    receipt_email: nullable(p.receipt_email),
    review: null,
    setup_future_usage: null,
    shipping: null,
    source: null,
    statement_descriptor: nullable(p.statement_descriptor),
    statement_descriptor_suffix: nullable(p.statement_descriptor_suffix),
    status: pm ? "requires_confirmation" : "requires_payment_method",
    transfer_data: null,
    transfer_group: null,
  };
  st.paymentIntents.set(id, pi);
  const events: ChargeResult["events"] = [{ type: "payment_intent.created", object: structuredClone(pi) }];
  if (p.confirm !== true) return { intent: pi, events };
  if (!pm) throw invalid("You cannot confirm this PaymentIntent because it's missing a payment method.", "payment_method");
  const card = st.cardOf.get(pm.id) as TestCard;
  if (card.outcome === "debit_succeeds" || card.outcome === "debit_fails") {
    // A bank debit: accepted and processing; settleDebit ends it as its IBAN says.
    Object.assign(pi, { status: "processing", payment_method_types: ["sepa_debit"], payment_method_options: { sepa_debit: {} } });
    events.push({ type: "payment_intent.processing", object: structuredClone(pi) });
    return { intent: pi, events };
  }
  if (card.outcome === "succeed" || (card.outcome === "authenticate" && p.off_session !== true)) {
    if (card.outcome === "authenticate") {
      // On-session: the customer is asked to authenticate (completeAuthentication finishes it).
      Object.assign(pi, { status: "requires_action", next_action: { type: "use_stripe_sdk", use_stripe_sdk: {} } });
      events.push({ type: "payment_intent.requires_action", object: structuredClone(pi) });
      return { intent: pi, events };
    }
    succeed(pi);
    events.push({ type: "payment_intent.succeeded", object: structuredClone(pi) });
    return { intent: pi, events };
  }
  const d = DECLINES[card.outcome];
  const lastError = {
    ...d,
    type: "card_error",
    charge: card.outcome === "authenticate" ? undefined : newId("ch"),
    doc_url: `https://stripe.com/docs/error-codes/${d.code.replace(/_/g, "-")}`,
    payment_method: structuredClone(pm),
  };
  if (lastError.charge === undefined) delete lastError.charge;
  Object.assign(pi, { status: "requires_payment_method", last_payment_error: lastError, latest_charge: lastError.charge ?? null });
  // A declined card is removed from the PaymentIntent, named by its last error only (as Stripe does).
  if (card.outcome !== "authenticate") pi.payment_method = null;
  events.push({ type: "payment_intent.payment_failed", object: structuredClone(pi) });
  const { payment_method: _pm, ...errorBase } = lastError;
  throw Object.assign(new StripeFail(402, { ...errorBase, payment_intent: structuredClone(pi), payment_method: structuredClone(pm) }), { events });
}

function succeed(pi: Obj) {
  Object.assign(pi, { status: "succeeded", amount_received: pi.amount, latest_charge: newId("ch"), last_payment_error: null, next_action: null });
}

export function paymentIntent(st: FakeStripeState, id: string): Obj {
  const pi = st.paymentIntents.get(id);
  if (!pi) throw new StripeFail(404, { type: "invalid_request_error", code: "resource_missing", param: "intent", message: `No such payment_intent: '${id}'` });
  return pi;
}

/** PaymentIntents, newest first, of one customer if asked (`created` filters are not served). */
export function listPaymentIntents(st: FakeStripeState, q: Obj): Obj {
  const all = [...st.paymentIntents.values()].filter((pi) => q.customer === undefined || pi.customer === q.customer).reverse();
  return page(all, q, "/v1/payment_intents");
}

/** Checkout Sessions, newest first, of one customer when asked (`customer`). */
export function listSessions(st: FakeStripeState, q: Obj): Obj {
  const all = [...st.sessions.values()].filter((s) => q.customer === undefined || s.customer === q.customer).reverse();
  return page(all, q, "/v1/checkout/sessions");
}

/** Expires an open Checkout Session (its page no longer takes a payment); Stripe refuses one complete or expired already. */
export function expireSession(st: FakeStripeState, id: string): { session: Obj; events: ChargeResult["events"] } {
  const s = st.session(id);
  if (s.status !== "open") throw invalid('Only Checkout Sessions with a status in ["open"] can be expired.', "session");
  Object.assign(s, { status: "expired", url: null });
  return { session: s, events: [{ type: "checkout.session.expired", object: structuredClone(s) }] };
}

/** The customer came back and authenticated: the PaymentIntent succeeds. */
export function completeAuthentication(st: FakeStripeState, id: string): ChargeResult {
  const pi = paymentIntent(st, id);
  const waiting = pi.status === "requires_action" || (pi.status === "requires_payment_method" && pi.last_payment_error?.code === "authentication_required");
  if (!waiting) throw invalid(`This PaymentIntent is ${pi.status}; it awaits no authentication.`, "intent");
  succeed(pi);
  return { intent: pi, events: [{ type: "payment_intent.succeeded", object: structuredClone(pi) }] };
}

/**
 * A processing bank debit settles, as its test IBAN says (cards.ts): succeeded
 * (`payment_intent.succeeded`), or failed (`requires_payment_method` with `last_payment_error`,
 * `payment_intent.payment_failed`).
 */
export function settleDebit(st: FakeStripeState, id: string): ChargeResult {
  const pi = paymentIntent(st, id);
  if (pi.status !== "processing") throw invalid(`This PaymentIntent is ${pi.status}; it is not processing.`, "intent");
  const card = st.cardOf.get(pi.payment_method) as TestCard | undefined;
  if (card?.outcome !== "debit_fails") {
    succeed(pi);
    return { intent: pi, events: [{ type: "payment_intent.succeeded", object: structuredClone(pi) }] };
  }
  const lastError = {
    type: "invalid_request_error",
    code: "payment_intent_payment_attempt_failed",
    message: "The latest payment attempt of this PaymentIntent has failed or been canceled, and the attached payment method has been removed.",
    doc_url: "https://stripe.com/docs/error-codes/payment-intent-payment-attempt-failed",
    payment_method: structuredClone(st.paymentMethod(pi.payment_method)),
  };
  Object.assign(pi, { status: "requires_payment_method", last_payment_error: lastError, latest_charge: newId("ch") });
  return { intent: pi, events: [{ type: "payment_intent.payment_failed", object: structuredClone(pi) }] };
}

/**
 * What Stripe lets cancel: a PaymentIntent not yet paid nor cancelled. Its documentation adds
 * "in rare cases, processing"; a bank debit on its way (the only processing PaymentIntent here) is
 * not one of them: refused with payment_intent_unexpected_state until it settles.
 */
const CANCELABLE = ["requires_payment_method", "requires_capture", "requires_confirmation", "requires_action"];

/**
 * Cancels a PaymentIntent (POST /v1/payment_intents/{id}/cancel): it can no longer be confirmed
 * nor authenticated. Stripe refuses any other status (succeeded, canceled already) with 400
 * `payment_intent_unexpected_state`, the PaymentIntent in the error.
 */
export function cancelPaymentIntent(st: FakeStripeState, id: string, p: Obj): ChargeResult {
  const pi = paymentIntent(st, id);
  if (!CANCELABLE.includes(pi.status)) {
    throw new StripeFail(400, {
      type: "invalid_request_error",
      code: "payment_intent_unexpected_state",
      doc_url: "https://stripe.com/docs/error-codes/payment-intent-unexpected-state",
      message: `You cannot cancel this PaymentIntent because it has a status of ${pi.status}. Only a PaymentIntent with one of the following statuses may be canceled: ${CANCELABLE.join(", ")}.`,
      payment_intent: structuredClone(pi),
    });
  }
  Object.assign(pi, { status: "canceled", canceled_at: now(), cancellation_reason: nullable(p.cancellation_reason), next_action: null });
  return { intent: pi, events: [{ type: "payment_intent.canceled", object: structuredClone(pi) }] };
}

export function createRefund(st: FakeStripeState, p: Obj): { refund: Obj; events: ChargeResult["events"] } {
  if (!p.payment_intent) throw invalid("One of `charge` or `payment_intent` is required.", "payment_intent");
  st.beforeRefund?.(p);
  const pi = paymentIntent(st, p.payment_intent);
  if (pi.status !== "succeeded") throw invalid(`This PaymentIntent (${pi.id}) does not have a successful charge to refund.`, "payment_intent", "charge_not_refundable");
  const refunded = [...st.refunds.values()].filter((r) => r.payment_intent === pi.id).reduce((n, r) => n + (r.amount as number), 0);
  const left = pi.amount_received - refunded;
  if (left <= 0) throw invalid(`Charge ${pi.latest_charge} has already been refunded.`, undefined, "charge_already_refunded");
  const amount = p.amount ?? left;
  if (!Number.isInteger(amount) || amount < 1) throw invalid("This value must be greater than or equal to 1.", "amount");
  if (amount > left) throw invalid(`Refund amount (${amount}) is greater than unrefunded amount on charge (${left})`, "amount", "amount_too_large");
  const refund: Obj = {
    id: newId("re"),
    object: "refund",
    amount,
    balance_transaction: null,
    charge: pi.latest_charge,
    created: now(),
    currency: pi.currency,
    metadata: mergeMetadata({}, p.metadata),
    payment_intent: pi.id,
    reason: nullable(p.reason),
    receipt_number: null,
    source_transfer_reversal: null,
    status: st.refundStatus,
    transfer_reversal: null,
  };
  st.refunds.set(refund.id, refund);
  return { refund, events: [{ type: "refund.created", object: structuredClone(refund) }] };
}

/**
 * Refunds, newest first, of one PaymentIntent or charge when asked (`payment_intent`, `charge`;
 * `created` filters are not served). A PaymentIntent it does not know is 404 resource_missing, as
 * Stripe answers a list filtered on one.
 */
export function listRefunds(st: FakeStripeState, q: Obj): Obj {
  if (typeof q.payment_intent === "string") paymentIntent(st, q.payment_intent);
  const all = [...st.refunds.values()].filter((r) => (q.payment_intent === undefined || r.payment_intent === q.payment_intent) && (q.charge === undefined || r.charge === q.charge)).reverse();
  return page(all, q, "/v1/refunds");
}

/**
 * Refund `id` settles later, as Stripe's do: its status becomes `status` (with `failure_reason`
 * when "failed") and `refund.updated` is sent, then `refund.failed` too for a failure.
 */
export function settleRefund(st: FakeStripeState, id: string, status: "succeeded" | "failed" | "pending", failureReason?: string): { refund: Obj; events: ChargeResult["events"] } {
  const refund = st.refunds.get(id);
  if (!refund) throw invalid(`No such refund: '${id}'`, "refund", "resource_missing");
  Object.assign(refund, { status, ...(status === "failed" ? { failure_reason: failureReason ?? "unknown" } : {}) });
  const events = [{ type: "refund.updated", object: structuredClone(refund) }];
  if (status === "failed") events.push({ type: "refund.failed", object: structuredClone(refund) });
  return { refund, events };
}

/**
 * The customer pays a payment-mode Checkout Session with `card` on its page: a PaymentMethod,
 * attached to the customer when the session keeps it (`payment_intent_data[setup_future_usage]`),
 * and a PaymentIntent confirmed on-session (a card asking for authentication is authenticated on
 * the page) that succeeds with the session's `payment_intent_data` metadata; the session complete
 * and paid. A declining card: the 402 card error, the session still open.
 */
export function completePaymentSession(st: FakeStripeState, id: string, card: TestCard): { session: Obj; paymentMethod: Obj; intent: Obj; events: ChargeResult["events"] } {
  const s = st.session(id);
  if (s.status !== "open") throw invalid(`This Checkout Session is ${s.status}.`, "session");
  if (s.mode !== "payment") throw invalid("This Checkout Session is not in payment mode.", "session");
  const data = st.sessionIntentData.get(id) ?? {};
  const customer: string = s.customer ?? st.createCustomer({ email: s.customer_email ?? undefined }).id;
  const pm = st.newPaymentMethod(card);
  const events: ChargeResult["events"] = [];
  if (data.setup_future_usage) events.push({ type: "payment_method.attached", object: structuredClone(st.attach(pm.id, customer)) });
  const made = createPaymentIntent(st, { amount: s.amount_total, currency: s.currency, customer, payment_method: pm.id, confirm: true, metadata: data.metadata, description: data.description });
  const intent = made.intent;
  const more = intent.status === "requires_action" ? completeAuthentication(st, intent.id).events : [];
  intent.setup_future_usage = nullable(data.setup_future_usage);
  for (const e of [...made.events, ...more]) {
    e.object.setup_future_usage = intent.setup_future_usage;
    events.push(e);
  }
  Object.assign(s, {
    customer,
    status: "complete",
    payment_status: "paid",
    payment_intent: intent.id,
    customer_details: { address: null, email: st.customer(customer).email, name: null, phone: null, tax_exempt: "none", tax_ids: [] },
  });
  return { session: s, paymentMethod: pm, intent, events };
}
