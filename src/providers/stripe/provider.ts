/**
 * The Stripe payment provider (DESIGN §16), every call through the official `stripe` library:
 *
 * - startCardSetup: a Checkout Session in setup mode for the subject's customer (customers.ts: one
 *   Stripe does not know under the environment's key, as after a change of the key to another
 *   Stripe account, is replaced by a new one in the key's account);
 *   Stripe sends the customer back to GET /providers/stripe/return/{environment} (webhooks.ts),
 *   and its `checkout.session.completed` webhook arrives too: both complete it, once (completeSetup).
 * - charge: an off-session PaymentIntent confirmed at once, its idempotency key the invoice's
 *   attempt key, so a retry after a crash answers the first PaymentIntent, never a second charge;
 *   a retry that may resend a key (ChargeContext.sentBefore) first looks for the PaymentIntent made
 *   with it (metadata.charge_key), since Stripe forgets idempotency keys after 24 hours; one made to
 *   another card that took nothing is no answer for a card saved since, charged under its own key (charges.ts).
 * - refund: a Refund of the PaymentIntent made with the charge key (no amount: what is left of it);
 *   one Stripe made `pending` is answered pending (its end comes by webhook: refund.updated / refund.failed),
 *   so each names what it is for (metadata): its credit note, or its invoice, kind (after_end, excess) and key;
 *   such an invoice's refund made already under its key is found by it and answered, never made again
 *   (Stripe forgets idempotency keys after 24 hours).
 *   refundMade: a credit note's refund made already, found by the note it names (nothing refunded).
 * - cancel: the cancel of a PaymentIntent waiting for the customer (its invoice ended, paid
 *   otherwise, or charged again), and the expiry of that invoice's pay links still open.
 * - paymentOutcome: a PaymentIntent retrieved (a processing bank debit looked up, its webhook lost).
 *
 * Every amount sent or read back goes through amounts.ts: this service's ISO minor units are not
 * always Stripe's (ISK, MGA, the three-decimal dinars), and one Stripe cannot take is refused.
 */
import Stripe from "stripe";
import type { SavedCard } from "../../billing/payments/provider-events.js";
import type { CancelOutcome, ChargeOutcome, MadeRefundAnswer, RefundOutcome } from "../../billing/payments/types.js";
import type { PaymentPageRequest } from "../../billing/payments/types.js";
import type { CardSetupRequest, ChargeContext, RefundContext } from "../../billing/payments/types.js";
import type { PaymentMethod, PaymentProvider } from "../../billing/subscriptions/types.js";
import { type StripeApi, isTestKey, stripeClient } from "./client.js";
import { type StripeCustomerStore, StripeCustomers, isMissingCustomer } from "./customers.js";
import { UnrepresentableAmount, toStripeAmount } from "./amounts.js";
import { chargeCard, intentsOfAttempt } from "./charges.js";
import { outcomeOfIntent } from "./outcomes.js";
import { type CompletedPayment, completedPaymentOf, expirePayLinks, startPayment } from "./pay-link.js";
import { outcomeOfRefund, refundIntent, refundNaming } from "./refunds.js";

/** What the provider needs of storage: customers, and the PaymentIntent an invoice was charged with. */
export interface StripeStore extends StripeCustomerStore {
  /** The provider's reference stored in the invoice's payment_state (pi_…), if any. */
  paymentReference(environmentId: string, invoiceId: string): Promise<string | undefined>;
  /** The subject an invoice bills. */
  invoiceSubject(environmentId: string, invoiceId: string): Promise<string | undefined>;
}

export interface StripeProviderOptions {
  secretKey: string;
  environmentId: string;
  /** STRIPE_API_BASE as host, port, protocol; undefined: Stripe's own API. */
  api?: StripeApi;
  store: StripeStore;
  /** This service's public base URL (PUBLIC_BASE_URL), for Stripe's return URL. */
  publicBaseUrl: () => string;
  /** Tests only (BILLING_TEST_DIE_AFTER_CHARGE=1): the process kills itself right after a PaymentIntent is made, before anything is committed. */
  dieAfterCharge?: boolean;
}

/** A card setup as Stripe completed it: the reference it was started for and the card saved. */
export interface CompletedSetup {
  environmentId: string;
  /** The Checkout Session (cs_…). */
  sessionId: string;
  reference: string;
  card: SavedCard;
}

export interface StripeProvider extends PaymentProvider {
  readonly kind: "stripe";
  /** The library's client (webhooks.ts verifies signatures with it). */
  readonly stripe: Stripe;
  /** Reads a completed setup-mode Checkout Session; undefined while it is not complete. */
  completedSetup(sessionId: string): Promise<CompletedSetup | undefined>;
  /** The pay link of a charge that waited for the customer: a payment-mode Checkout Session (pay-link.ts). */
  startPayment(request: PaymentPageRequest): Promise<{ url: string; reference: string }>;
  /** Reads a paid payment-mode Checkout Session; undefined while it is not paid. */
  completedPayment(sessionId: string): Promise<CompletedPayment | undefined>;
}

/** The invoice of a charge key (`<invoice>:attempt-<n>`, chargeKey in subscriptions/types.ts). */
function invoiceOfKey(key: string): string {
  const at = key.lastIndexOf(":attempt-");
  return at < 0 ? key : key.slice(0, at);
}

/** A setup-mode Checkout Session of environment `env` once complete: the card saved and what it was for; else undefined. */
async function completedSetupOf(stripe: Stripe, env: string, sessionId: string): Promise<CompletedSetup | undefined> {
  const s = await stripe.checkout.sessions.retrieve(sessionId, { expand: ["setup_intent"] });
  const si = s.setup_intent as Stripe.SetupIntent | string | null;
  if (s.mode !== "setup" || s.status !== "complete" || !si || typeof si === "string" || si.status !== "succeeded") return undefined;
  const attached = si.payment_method as Stripe.PaymentMethod | string | null;
  const pm = typeof attached === "string" ? await stripe.paymentMethods.retrieve(attached) : attached;
  const customer = typeof s.customer === "string" ? s.customer : s.customer?.id;
  const reference = s.metadata?.return_reference;
  if (!pm || !customer || !reference || s.metadata?.environment_id !== env) return undefined;
  return {
    environmentId: env,
    sessionId: s.id,
    reference,
    card: { provider: "stripe", brand: pm.card?.brand ?? "card", last4: pm.card?.last4 ?? "????", providerRef: pm.id, customerRef: customer },
  };
}

/** `amount` in Stripe's units for `currency`; one Stripe cannot take is answered, never rounded into another amount (amounts.ts). */
function inStripeUnits(amount: string, currency: string): number | UnrepresentableAmount {
  try {
    return toStripeAmount(amount, currency);
  } catch (err) {
    if (err instanceof UnrepresentableAmount) return err;
    throw err;
  }
}

/**
 * A setup-mode Checkout Session for the subject's customer (customers.ts): one synced earlier by
 * this process but gone at Stripe since (deleted) is asked for again, and so replaced, once.
 */
async function startSetupSession(stripe: Stripe, customers: StripeCustomers, env: string, publicBaseUrl: string, r: CardSetupRequest): Promise<{ url: string; reference: string }> {
  // {CHECKOUT_SESSION_ID} is Stripe's placeholder, filled in when it sends the customer back.
  const back = `${publicBaseUrl}/providers/stripe/return/${encodeURIComponent(env)}?ref=${encodeURIComponent(r.returnReference)}&session_id={CHECKOUT_SESSION_ID}`;
  const metadata = { environment_id: env, subject_id: r.subjectId, return_reference: r.returnReference };
  const create = (customer: string) =>
    stripe.checkout.sessions.create({
      mode: "setup",
      customer,
      // Setup mode without a list of method types takes a currency (Stripe shows the methods that fit it).
      currency: (r.currency ?? "usd").toLowerCase(),
      success_url: back,
      cancel_url: r.cancelUrl,
      metadata,
      setup_intent_data: { metadata },
    });
  const customer = await customers.forSubject(r.subjectId);
  let session: Stripe.Checkout.Session;
  try {
    session = await create(customer);
  } catch (err) {
    // Synced earlier by this process but gone at Stripe since (deleted): asked again, it is replaced (customers.ts).
    if (!isMissingCustomer(err) || (err as Stripe.errors.StripeInvalidRequestError).param !== "customer") throw err;
    customers.forget(customer);
    session = await create(await customers.forSubject(r.subjectId));
  }
  if (!session.url) throw new Error(`Stripe gave checkout session ${session.id} no URL`);
  return { url: session.url, reference: session.id };
}

export function stripeProvider(o: StripeProviderOptions): StripeProvider {
  const stripe = stripeClient(o.secretKey, o.api);
  const customers = new StripeCustomers(stripe, o.store, o.environmentId);
  const env = o.environmentId;

  async function charge(pm: PaymentMethod, amount: string, currency: string, idempotencyKey: string, context?: ChargeContext): Promise<ChargeOutcome> {
    if (pm.provider !== "stripe" || !pm.providerRef || !pm.customerRef) return { ok: false, message: "This card was not saved through Stripe.", code: "payment_method_unknown" };
    const invoiceId = context?.invoiceId ?? invoiceOfKey(idempotencyKey);
    // No storage read here: dunning charges under the invoice's row lock (on SQLite, the one
    // connection's transaction), so the customer is the card's, synced when the card was set up.
    const asked = inStripeUnits(amount, currency);
    if (typeof asked !== "number") return { ok: false, refusedByProvider: true, message: asked.message, code: asked.code };
    const request = { card: pm.providerRef, customer: pm.customerRef, amount: asked, currency, env, invoiceId, attemptKey: idempotencyKey, description: context?.description };
    const outcome = await chargeCard(stripe, request, context?.sentBefore === true);
    // Tests of a crash between the charge and its commit (test/api/stripe-provider.test.ts).
    if (o.dieAfterCharge) process.kill(process.pid, "SIGKILL");
    return outcome;
  }

  /**
   * The PaymentIntent made with `chargeKey`: the reference the invoice kept (given by the caller),
   * else the stored one, else found among its customer's by metadata.
   */
  async function intentOf(chargeKey: string, reference: string | null | undefined): Promise<string | undefined> {
    if (reference?.startsWith("pi_")) return reference;
    const invoiceId = invoiceOfKey(chargeKey);
    const stored = await o.store.paymentReference(env, invoiceId);
    if (stored?.startsWith("pi_")) return stored;
    const subjectId = await o.store.invoiceSubject(env, invoiceId);
    const customer = subjectId ? await o.store.customerRef(env, subjectId, "stripe") : undefined;
    return customer ? (await intentsOfAttempt(stripe, customer, chargeKey)).find((pi) => pi.status === "succeeded")?.id : undefined;
  }

  async function refund(chargeKey: string, amount: string | null, currency: string, idempotencyKey: string, context?: RefundContext): Promise<RefundOutcome> {
    const asked = amount === null ? undefined : inStripeUnits(amount, currency);
    if (asked instanceof UnrepresentableAmount) return { ok: false, message: asked.message };
    const intent = await intentOf(chargeKey, context?.reference);
    if (!intent) return { ok: false, message: `No Stripe payment was made for ${chargeKey}.` };
    return refundIntent(stripe, env, intent, asked, currency, idempotencyKey, context);
  }

  /**
   * The credit note's refund Stripe made, read (nothing refunded): Stripe cannot be asked by an
   * idempotency key, but the note's refund names it (metadata.credit_note_id, as made with the key
   * `<note>:refund`), found among the refunds of the PaymentIntent that paid `chargeKey`. One
   * failed or canceled is none (no money went back).
   */
  async function refundMade(chargeKey: string, _idempotencyKey: string, context: { reference?: string | null; creditNoteId: string }): Promise<MadeRefundAnswer | undefined> {
    const intent = await intentOf(chargeKey, context.reference);
    const r = intent === undefined ? undefined : await refundNaming(stripe, env, intent, context.creditNoteId);
    const out = r === undefined ? undefined : outcomeOfRefund(r, r.currency);
    return out?.ok && out.amount !== undefined ? { refundId: out.refundId, amount: out.amount, ...(out.pending ? { pending: true } : {}) } : undefined;
  }

  /**
   * Cancels the PaymentIntent `reference` waiting for the customer, keyed `idempotencyKey` (a retry
   * answers the first cancel). One Stripe no longer lets cancel (it succeeded, or was cancelled
   * already) answers its status instead: Stripe refuses with payment_intent_unexpected_state. One
   * Stripe does not know (404 resource_missing) can charge nothing: cancelled. Cancelled or
   * succeeded, the invoice's pay links still open are expired (pay-link.ts expirePayLinks); one
   * that cannot be expired now throws, and the cancel is asked again with the same key.
   */
  async function cancel(reference: string, idempotencyKey: string): Promise<CancelOutcome> {
    let pi: Stripe.PaymentIntent;
    try {
      pi = await stripe.paymentIntents.cancel(reference, {}, { idempotencyKey });
    } catch (err) {
      if (err instanceof Stripe.errors.StripeInvalidRequestError && err.code === "resource_missing" && err.statusCode === 404) return "canceled";
      if (!(err instanceof Stripe.errors.StripeInvalidRequestError) || err.code !== "payment_intent_unexpected_state") throw err;
      pi = await stripe.paymentIntents.retrieve(reference);
    }
    const answer = pi.status === "canceled" ? "canceled" : pi.status === "succeeded" ? "succeeded" : "open";
    // The invoice no longer waits on it: its pay links are expired too, so none is paid later.
    const customer = typeof pi.customer === "string" ? pi.customer : pi.customer?.id;
    if (answer !== "open" && customer) await expirePayLinks(stripe, env, customer, pi.metadata?.invoice_id ?? invoiceOfKey(idempotencyKey), idempotencyKey);
    return answer;
  }

  /**
   * Where the PaymentIntent `reference` stands now (retrieved, nothing changed), as a charge's
   * outcome (outcomeOfIntent): a bank debit still processing, succeeded, or failed (Stripe puts a
   * bounced debit back to requires_payment_method with its last_payment_error).
   */
  async function paymentOutcome(reference: string): Promise<ChargeOutcome> {
    return outcomeOfIntent(await stripe.paymentIntents.retrieve(reference));
  }

  return {
    kind: "stripe",
    test: isTestKey(o.secretKey),
    stripe,
    startCardSetup: (r) => startSetupSession(stripe, customers, env, o.publicBaseUrl(), r),
    // Cards are never typed into our pages with Stripe: startCardSetup sends the customer to Stripe.
    tokenize: () => ({ ok: false, message: "Cards are entered on Stripe's page." }),
    charge,
    refund,
    refundMade,
    cancel,
    paymentOutcome,
    completedSetup: (sessionId) => completedSetupOf(stripe, env, sessionId),
    startPayment: (r) => startPayment(stripe, customers, env, o.publicBaseUrl(), toStripeAmount(r.amount, r.currency), r),
    completedPayment: (sessionId) => completedPaymentOf(stripe, env, sessionId),
  };
}

/**
 * The factory the per-environment provider choice calls (PaymentProviders.forEnvironment): one
 * provider per environment and key, kept (its customer cache with it).
 */
export function stripeFactory(deps: Omit<StripeProviderOptions, "secretKey" | "environmentId">): (secretKey: string, environmentId: string) => StripeProvider {
  const made = new Map<string, StripeProvider>();
  return (secretKey, environmentId) => {
    const key = `${environmentId}\u0000${secretKey}`;
    let p = made.get(key);
    if (!p) {
      if (made.size > 1_000) made.clear();
      p = stripeProvider({ ...deps, secretKey, environmentId });
      made.set(key, p);
    }
    return p;
  };
}
