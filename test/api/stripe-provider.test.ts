/**
 * The Stripe provider (DESIGN §16) against the real server on both stores, the official `stripe`
 * library pointed at the local Stripe-compatible server (test/stripe/fake-stripe.ts) through
 * STRIPE_API_BASE, the environment set to Stripe through PATCH /payment-settings:
 *
 * - subscribe through Stripe Checkout (setup): our checkout page leads to Stripe's session; the
 *   fake completes it; its webhook and the customer's return both arrive: one payment method, one
 *   completion, the subscription active, the first invoice charged off-session (one PaymentIntent,
 *   our key); a renewal charged by a clock advance;
 * - a card needing authentication (3184): the renewal open with a pay link and
 *   invoice.payment_action_required; the fake authenticates: payment_intent.succeeded → paid;
 * - a refund through a credit note: a Stripe refund of that PaymentIntent;
 * - webhooks delivered twice (nothing more), out of order (a failure after the success: still
 *   paid), with a bad signature (400, nothing changes);
 * - a crash (SIGKILL) right after the PaymentIntent and before our commit: the retry after the
 *   restart charges nothing more (one PaymentIntent for the key) and the invoice is paid once.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { form, useStripeServer } from "../helpers/payment-flows.js";
import Stripe from "stripe";
import { STORES, withDatabase } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { type TestServer, childServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";
import type { FakeStripe } from "../stripe/fake-stripe.js";

const AT = "2026-01-15T00:00:00Z";
const SK = `sk_test_${"51Hx".repeat(6)}AbCd`;
const WHSEC = `whsec_${"q1w2e3r4".repeat(4)}`;
const SECRETS_KEY = randomBytes(32).toString("base64");
const usd = (value: string) => ({ currency_code: "USD", value });

const eventsOf = async (s: Scenario, type: string, id?: string) => ((await s.call("GET", `/events?types=${type}&limit=100`)).events as Json[]).filter((e) => id === undefined || e.data.id === id);

/** A test environment on Stripe (its webhooks to `base`), a subject on a clock, a 49.00 monthly card. */
async function onStripe(server: TestServer, fake: FakeStripe, base = server.url): Promise<{ s: Scenario; env: string; card: string }> {
  const s = await Scenario.start(server, AT);
  const r = await s.raw("PATCH", "/payment-settings", { provider: "stripe", stripe_secret_key: SK, stripe_webhook_secret: WHSEC });
  if (r.status !== 200) throw new Error(`PATCH /payment-settings: ${r.status} ${JSON.stringify(r.body)}`);
  const env = String(r.body.stripe_webhook_url).split("/").pop() as string;
  fake.setWebhook(`${base}/providers/stripe/webhooks/${env}`, WHSEC);
  const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: usd("4900") } }] });
  return { s, env, card };
}

/** Through Stripe Checkout with `card` (a fake test card token): our page → Stripe → webhook and return. */
async function payOnStripe(server: TestServer, fake: FakeStripe, ourUrl: string, card: string): Promise<{ stripeUrl: string; returnUrl: string; final: string | null }> {
  const ours = await form(`${server.url}${new URL(ourUrl).pathname}`);
  await ours.body?.cancel();
  if (ours.status !== 303) throw new Error(`our page answered ${ours.status}`);
  const stripeUrl = ours.headers.get("location") ?? "";
  // The customer picks the card on Stripe's page: the webhook is sent, then the browser is sent back.
  const paid = await form(stripeUrl, { card });
  await paid.body?.cancel();
  const returnUrl = paid.headers.get("location") ?? "";
  await fake.settle();
  const back = await fetch(returnUrl.replace(/^https?:\/\/localhost:/, "http://127.0.0.1:"), { redirect: "manual" });
  await back.body?.cancel();
  return { stripeUrl, returnUrl, final: back.headers.get("location") };
}

async function subscribeOnStripe(server: TestServer, fake: FakeStripe, s: Scenario, card: string, stripeCard = "pm_card_visa") {
  const r = await s.call("POST", "/subscriptions", {
    subject_id: s.subjectId,
    rate_card_id: card,
    fixed_rate_quantities: { seats: 1 },
    create_checkout_session: "always",
    checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" },
  });
  return payOnStripe(server, fake, r.result.action.checkout_url, stripeCard);
}

/** Replaces the card through the portal and Stripe Checkout. */
async function replaceCardOnStripe(server: TestServer, fake: FakeStripe, s: Scenario, stripeCard: string) {
  const r = await s.raw("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: "https://app.example/account" });
  return payOnStripe(server, fake, `${r.body.url}/card`, stripeCard);
}

const intentsOf = (fake: FakeStripe, invoiceId: string) => fake.paymentIntents().filter((pi) => (pi.metadata as Json)?.invoice_id === invoiceId);

async function methodsOf(server: TestServer, subjectId: string): Promise<Json[]> {
  return withDatabase(server.db.url, (db) => db.dataSource.query("SELECT provider, provider_ref, customer_ref, brand, last4 FROM payment_methods WHERE subject_id = ?", [subjectId]));
}

/** A signed webhook of our own making, POSTed to the server (as Stripe would). */
async function sendEvent(server: TestServer, env: string, event: Json, secret = WHSEC): Promise<number> {
  const payload = JSON.stringify(event);
  const header = Stripe.webhooks.generateTestHeaderString({ payload, secret });
  const res = await fetch(`${server.url}/providers/stripe/webhooks/${env}`, { method: "POST", headers: { "content-type": "application/json", "stripe-signature": header }, body: payload });
  await res.body?.cancel();
  return res.status;
}

/** `npm start`'s process (src/main.ts) on the test server's database, with the fake as Stripe. */
const child = (server: TestServer, fake: FakeStripe, env: Record<string, string> = {}) => childServer(server, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY, STRIPE_API_BASE: fake.url, ...env });

/** The scenario's calls sent to another server (a child on the same database). */
function onServer(s: Scenario, url: string): Scenario {
  const moved = Object.create(s) as Scenario;
  Object.defineProperty(moved, "server", { value: { ...(s as unknown as { server: TestServer }).server, url } });
  return moved;
}

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY });

  test.serial(`${store}: subscribe through Stripe Checkout: one card, one completion, the first invoice and a renewal charged off-session with our keys`, async (t) => {
    const { server, fake } = ctx;
    const { s, card } = await onStripe(server, fake);
    const flow = await subscribeOnStripe(server, fake, s, card);
    t.true(flow.stripeUrl.startsWith(`${fake.url}/checkout/cs_`), flow.stripeUrl);
    t.regex(flow.returnUrl, /\/providers\/stripe\/return\/env_[^?]+\?ref=checkout%3A[0-9A-Za-z]+&session_id=cs_/);
    t.is(flow.final, "https://app.example/ok");
    // Both the webhook (checkout.session.completed) and the return arrived; one card, one completion.
    t.true(fake.deliveries().some((d) => d.type === "checkout.session.completed" && d.status === 200));
    const methods = await methodsOf(server, s.subjectId);
    t.is(methods.length, 1);
    t.like(methods[0], { provider: "stripe", brand: "visa", last4: "4242" });
    t.regex(String(methods[0]?.provider_ref), /^pm_/);
    t.regex(String(methods[0]?.customer_ref), /^cus_/);
    t.is((await eventsOf(s, "checkout.completed")).length, 1);
    const subs = (await s.call("GET", `/subscriptions?subject_id=${s.subjectId}`)).subscriptions as Json[];
    t.is(subs.length, 1);
    t.is(subs[0]?.status, "active");
    const [first] = await s.invoices();
    t.like(first, { status: "paid" });
    const intents = intentsOf(fake, first?.id);
    t.is(intents.length, 1);
    t.like(intents[0], {
      idempotency_key: `${first?.id}:attempt-1`,
      amount: 4900,
      currency: "usd",
      status: "succeeded",
      customer: methods[0]?.customer_ref,
      payment_method: methods[0]?.provider_ref,
      off_session: undefined,
    });
    // A renewal a month on: charged off-session, its own PaymentIntent.
    await s.advance("2026-02-15T00:00:00Z");
    const renewal = (await s.invoices()).at(-1) as Json;
    t.not(renewal.id, first?.id);
    t.is(renewal.status, "paid");
    t.deepEqual(
      intentsOf(fake, renewal.id).map((pi) => [pi.idempotency_key, pi.status]),
      [[`${renewal.id}:attempt-1`, "succeeded"]],
    );
    await fake.settle();
    t.is((await eventsOf(s, "invoice.paid", renewal.id)).length, 1, "payment_intent.succeeded after our own commit changes nothing");
  });

  test.serial(`${store}: authentication required: open with a pay link and invoice.payment_action_required; authenticated on Stripe: paid by its webhook`, async (t) => {
    const { server, fake } = ctx;
    const { s, card } = await onStripe(server, fake);
    await subscribeOnStripe(server, fake, s, card);
    await replaceCardOnStripe(server, fake, s, "pm_card_authenticationRequired");
    // The portal's card: saved once though the webhook and the return both arrived.
    const methods = await methodsOf(server, s.subjectId);
    t.is(methods.length, 2);
    t.like(methods.at(-1), { provider: "stripe", last4: "3184" });
    await s.advance("2026-02-15T00:00:00Z");
    // Stripe's payment_intent.payment_failed (authentication_required) is what made it wait, not its end.
    await fake.settle();
    const renewal = (await s.invoices()).at(-1) as Json;
    t.like(renewal, { status: "open" });
    t.truthy(renewal.payment_url);
    t.is((await eventsOf(s, "invoice.payment_action_required", renewal.id)).length, 1);
    const [pi] = intentsOf(fake, renewal.id);
    t.is(pi?.status, "requires_payment_method", "off-session, authentication required: Stripe leaves it for the customer");
    await fake.completeAuthentication(String(pi?.id));
    await fake.settle();
    t.like(await s.call("GET", `/invoices/${renewal.id}`), { status: "paid", attempt_count: 1, payment_url: null });
    t.is((await eventsOf(s, "invoice.paid", renewal.id)).length, 1);
    t.is(intentsOf(fake, renewal.id).length, 1, "no second charge");
  });

  test.serial(`${store}: a refund through a credit note is a Stripe refund of the invoice's PaymentIntent`, async (t) => {
    const { server, fake } = ctx;
    const { s, card } = await onStripe(server, fake);
    await subscribeOnStripe(server, fake, s, card);
    const [inv] = await s.invoices();
    const note = await s.raw("POST", "/credit-notes", { invoice_id: inv?.id, reason: "other", outcome: "refund", amount: "1000" });
    t.is(note.status, 200, JSON.stringify(note.body));
    const [pi] = intentsOf(fake, inv?.id);
    const refunds = fake.requests().filter((r) => r.operation === "POST /v1/refunds" && r.status === 200);
    t.true(refunds.some((r) => r.params.payment_intent === pi?.id && String(r.params.amount) === "1000"));
    t.regex(String(note.body.refund_id), /^re_/);
  });

  test.serial(`${store}: webhooks twice, out of order and with a bad signature`, async (t) => {
    const { server, fake } = ctx;
    const { s, env, card } = await onStripe(server, fake);
    await subscribeOnStripe(server, fake, s, card);
    const [inv] = await s.invoices();
    const [pi] = intentsOf(fake, inv?.id);
    const succeeded = fake.events().find((e) => e.type === "payment_intent.succeeded" && (e.data as Json).object.id === pi?.id) as Json;
    t.truthy(succeeded);
    // Twice: the second delivery changes nothing.
    const paidBefore = (await eventsOf(s, "invoice.paid", inv?.id)).length;
    t.is(await sendEvent(server, env, succeeded), 200);
    t.is(await sendEvent(server, env, succeeded), 200);
    t.is((await eventsOf(s, "invoice.paid", inv?.id)).length, paidBefore);
    // Out of order: a failure of the same invoice arriving after its success: still paid, nothing announced.
    const failed = {
      ...succeeded,
      id: `evt_late_${s.subjectId}`,
      type: "payment_intent.payment_failed",
      data: { object: { ...succeeded.data.object, status: "requires_payment_method", last_payment_error: { message: "declined", code: "card_declined" } } },
    };
    t.is(await sendEvent(server, env, failed), 200);
    t.like(await s.call("GET", `/invoices/${inv?.id}`), { status: "paid" });
    t.is((await eventsOf(s, "invoice.payment_failed", inv?.id)).length, 0);
    // A bad signature, an unknown environment: 400, nothing recorded.
    const forged = { ...failed, id: `evt_forged_${s.subjectId}` };
    t.is(await sendEvent(server, env, forged, `whsec_${"x".repeat(32)}`), 400);
    t.is(await sendEvent(server, "env_nosuchenvironment", forged), 400);
    const recorded = await withDatabase(server.db.url, (db) => db.dataSource.query("SELECT event_id FROM provider_events WHERE event_id = ?", [forged.id]));
    t.is(recorded.length, 0);
    // The fake's own switches: twice and a bad signature.
    await fake.redeliver(String(succeeded.id), { twice: true });
    await fake.redeliver(String(succeeded.id), { badSignature: true });
    const last = fake.deliveries().slice(-3);
    t.deepEqual(
      last.map((d) => d.status),
      [200, 200, 400],
    );
    t.is((await eventsOf(s, "invoice.paid", inv?.id)).length, paidBefore);
  });

  test.serial(`${store}: killed (SIGKILL) between the PaymentIntent and our commit: after the restart the retry charges nothing more and the invoice is paid once`, async (t) => {
    const { server, fake } = ctx;
    t.timeout(180_000);
    const { s, env, card } = await onStripe(server, fake);
    await subscribeOnStripe(server, fake, s, card);
    await replaceCardOnStripe(server, fake, s, "pm_card_chargeDeclinedInsufficientFunds");
    await s.advance("2026-02-15T00:00:00Z");
    const renewal = await s.call("GET", `/invoices/${((await s.invoices()).at(-1) as Json).id}`);
    t.like(renewal, { status: "open", attempt_count: 1, next_payment_attempt: "2026-02-18T00:00:00Z" });
    // Stripe's payment_intent.payment_failed of that decline was answered to the charge already: announced once.
    await fake.settle();
    t.true(fake.deliveries().some((d) => d.type === "payment_intent.payment_failed" && d.status === 200));
    t.is((await eventsOf(s, "invoice.payment_failed", renewal.id)).length, 1);
    const key = `${renewal.id}:attempt-2`;

    // A server that dies right after a PaymentIntent is made: a new card from the portal charges attempt 2 at once.
    const dying = await child(server, fake, { BILLING_TEST_DIE_AFTER_CHARGE: "1" });
    fake.setWebhook(`${dying.url}/providers/stripe/webhooks/${env}`, WHSEC);
    const portal = await onServer(s, dying.url).raw("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: "https://app.example/account" });
    const ours = await form(`${dying.url}${new URL(portal.body.url).pathname}/card`);
    await ours.body?.cancel();
    const paid = await form(ours.headers.get("location") ?? "", { card: "pm_card_visa" });
    await paid.body?.cancel();
    t.is(await dying.exited, "SIGKILL");
    await fake.settle();
    t.deepEqual(
      fake
        .paymentIntents()
        .filter((pi) => pi.idempotency_key === key)
        .map((pi) => pi.status),
      ["succeeded"],
      "Stripe charged attempt 2 once",
    );
    t.like(await s.call("GET", `/invoices/${renewal.id}`), { status: "open", attempt_count: 1 }, "our commit never happened");

    // Restarted on the same database: the planned retry (planned before the charge) is attempt 2 again, the same key: it finds the first PaymentIntent.
    const restarted = await child(server, fake);
    try {
      fake.setWebhook(`${restarted.url}/providers/stripe/webhooks/${env}`, WHSEC);
      await onServer(s, restarted.url).advance("2026-02-18T00:00:00Z");
      await fake.settle();
      t.like(await s.call("GET", `/invoices/${renewal.id}`), { status: "paid", attempt_count: 2 });
      const intents = fake.paymentIntents().filter((pi) => pi.idempotency_key === key);
      t.is(intents.length, 1, "one PaymentIntent for the key");
      // Looked up by its metadata charge_key (Stripe may have forgotten the key: it keeps them 24 h), not sent again.
      t.is(fake.requests().filter((r) => r.operation === "POST /v1/payment_intents" && r.idempotencyKey === key).length, 1);
      t.true(fake.requests().some((r) => r.operation === "GET /v1/payment_intents"));
      t.is((await eventsOf(s, "invoice.paid", renewal.id)).length, 1, "paid once");
    } finally {
      restarted.proc.kill("SIGTERM");
      await restarted.exited;
      fake.setWebhook(`${server.url}/providers/stripe/webhooks/${env}`, WHSEC);
    }
  });
}
