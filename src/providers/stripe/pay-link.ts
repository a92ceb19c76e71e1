/**
 * The pay link of a Stripe charge that needed the customer (DESIGN §16). An off-session
 * PaymentIntent refused with `authentication_required` has no page of its own for the customer,
 * so the hosted invoice page's "Complete payment" button POSTs to us and we send the customer to
 * a Checkout Session in payment mode for the amount due (startPayment): the card entered there
 * pays the invoice and is kept for later charges (`setup_future_usage: off_session`). Its
 * idempotency key is the invoice and its attempt count: double clicks make one session.
 * Completion arrives by `checkout.session.completed` (completedPayment) and by
 * `payment_intent.succeeded`, both with the invoice in their metadata. When the PaymentIntent that
 * waited is cancelled (a new card charged, the invoice ended or paid otherwise), its invoice's
 * sessions still open are expired (expirePayLinks).
 */
import Stripe from "stripe";
import type { Received, SavedCard } from "../../billing/payments/provider-events.js";
import type { PaymentPageRequest } from "../../billing/payments/types.js";
import { fromStripeAmount } from "./amounts.js";
import type { StripeCustomers } from "./customers.js";

/** A payment-mode Checkout Session once paid: the invoice, the PaymentIntent and the card it used. */
export interface CompletedPayment {
  environmentId: string;
  sessionId: string;
  invoiceId: string;
  /** The PaymentIntent (pi_…). */
  reference: string;
  card: SavedCard | undefined;
  /** What the PaymentIntent took, in this service's unit (receivedOf). */
  received: Received | undefined;
}

/**
 * What a succeeded PaymentIntent took (amount_received), in this service's minor units
 * (amounts.ts); undefined when Stripe's answer does not convert (never guessed).
 */
export function receivedOf(pi: Pick<Stripe.PaymentIntent, "amount_received" | "currency">): Received | undefined {
  try {
    return { amount: fromStripeAmount(pi.amount_received, pi.currency), currency: pi.currency.toUpperCase() };
  } catch {
    return undefined;
  }
}

/**
 * The idempotency key of an invoice's pay link for `attempt` and the amount it asks: a double
 * click gets one session; an amount due that changed meanwhile (a credit note, say) a new one.
 */
export function payLinkKey(environmentId: string, invoiceId: string, attempt: number, amount: number): string {
  return `pay-link:${environmentId}:${invoiceId}:attempt-${attempt}:${amount}`;
}

export async function startPayment(stripe: Stripe, customers: StripeCustomers, env: string, base: string, amount: number, r: PaymentPageRequest): Promise<{ url: string; reference: string }> {
  const customer = await customers.forSubject(r.subjectId);
  const metadata = { invoice_id: r.invoiceId, environment_id: env };
  const session = await stripe.checkout.sessions.create(
    {
      mode: "payment",
      customer,
      line_items: [{ quantity: 1, price_data: { currency: r.currency.toLowerCase(), unit_amount: amount, product_data: { name: r.description } } }],
      payment_intent_data: { setup_future_usage: "off_session", metadata },
      metadata,
      success_url: `${base}${r.returnPath}`,
      cancel_url: `${base}${r.returnPath}`,
    },
    { idempotencyKey: payLinkKey(env, r.invoiceId, r.attempt, amount) },
  );
  if (!session.url) throw new Error(`Stripe gave checkout session ${session.id} no URL`);
  return { url: session.url, reference: session.id };
}

/**
 * Expires the pay links of invoice `invoiceId` (environment `env`) still open for `customer`, once
 * the PaymentIntent they were made beside is cancelled or paid (provider.ts cancel): a session
 * asks the amount due when it was made, and completing it later would take a payment the invoice
 * no longer waits for. Each expire is keyed `key`:expire:<session>; a session completed or
 * expired meanwhile (Stripe refuses to expire it) is left as it is, its payment handled by its
 * webhooks. Anything else throws: the cancel is asked again, and so is this.
 */
export async function expirePayLinks(stripe: Stripe, env: string, customer: string, invoiceId: string, key: string): Promise<void> {
  // All the customer's sessions (few: its card setups and pay links), the open ones picked here.
  for await (const s of stripe.checkout.sessions.list({ customer, limit: 100 })) {
    if (s.status !== "open" || s.mode !== "payment" || s.metadata?.invoice_id !== invoiceId || s.metadata?.environment_id !== env) continue;
    try {
      await stripe.checkout.sessions.expire(s.id, {}, { idempotencyKey: `${key}:expire:${s.id}` });
    } catch (err) {
      if (!(err instanceof Stripe.errors.StripeInvalidRequestError) || (await stripe.checkout.sessions.retrieve(s.id)).status === "open") throw err;
    }
  }
}

/** A payment-mode Checkout Session of environment `env` once paid; else undefined. */
export async function completedPaymentOf(stripe: Stripe, env: string, sessionId: string): Promise<CompletedPayment | undefined> {
  const s = await stripe.checkout.sessions.retrieve(sessionId, { expand: ["payment_intent"] });
  const pi = s.payment_intent as Stripe.PaymentIntent | string | null;
  const invoiceId = s.metadata?.invoice_id;
  if (s.mode !== "payment" || s.payment_status !== "paid" || !pi || typeof pi === "string" || pi.status !== "succeeded") return undefined;
  if (!invoiceId || s.metadata?.environment_id !== env) return undefined;
  const customer = typeof s.customer === "string" ? s.customer : s.customer?.id;
  const used = pi.payment_method as Stripe.PaymentMethod | string | null;
  const pm = typeof used === "string" ? await stripe.paymentMethods.retrieve(used) : used;
  // Kept for later charges only when Stripe attached it to the customer (setup_future_usage).
  const card: SavedCard | undefined =
    pm && customer && (typeof pm.customer === "string" ? pm.customer : pm.customer?.id) === customer
      ? { provider: "stripe", brand: pm.card?.brand ?? "card", last4: pm.card?.last4 ?? "????", providerRef: pm.id, customerRef: customer }
      : undefined;
  return { environmentId: env, sessionId: s.id, invoiceId, reference: pi.id, card, received: receivedOf(pi) };
}
