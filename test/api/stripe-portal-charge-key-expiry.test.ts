/**
 * A portal charge whose answer is lost, retried after Stripe forgot its idempotency key (DESIGN
 * §12, §16; payments/plan-ahead.ts), through the real server on both stores against the fake
 * Stripe. A 49.00 USD monthly subscription on a declining card: its renewal on 02-15 is declined
 * (attempt_count 1, the next attempt 02-18). The customer saves a Visa in the portal on 02-15: the
 * server charges attempt 2 (`<invoice>:attempt-2`, 4900 cents) and dies (SIGKILL) right after the
 * PaymentIntent, before its commit. Then:
 * - the charge was planned before it was made: the invoice is due a minute later (02-15 00:01),
 *   not on its old schedule three days later;
 * - Stripe keeps idempotency keys 24 hours (the fake forgets them): the retry, whenever it comes,
 *   finds the PaymentIntent made under its key (metadata.charge_key) and adopts it. The customer
 *   is charged once: 49.00, not 49.00 + 49.00 = 98.00.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { form, useStripeServer } from "../helpers/payment-flows.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { type TestServer, childServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";
import type { FakeStripe } from "../stripe/fake-stripe.js";

const AT = "2026-01-15T00:00:00Z";
const SK = `sk_test_${"51Hx".repeat(6)}AbCd`;
const WHSEC = `whsec_${"q1w2e3r4".repeat(4)}`;
const SECRETS_KEY = randomBytes(32).toString("base64");
const usd = (value: string) => ({ currency_code: "USD", value });

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

  test.serial(`${store}: a portal charge that died after its PaymentIntent is retried within minutes, and adopts that PaymentIntent after Stripe forgot the key: charged 49.00 once`, async (t) => {
    const { server, fake } = ctx;
    t.timeout(180_000);
    const { s, env, card } = await onStripe(server, fake);
    await subscribeOnStripe(server, fake, s, card);
    await replaceCardOnStripe(server, fake, s, "pm_card_chargeDeclinedInsufficientFunds");
    await s.advance("2026-02-15T00:00:00Z");
    const renewal = await s.call("GET", `/invoices/${((await s.invoices()).at(-1) as Json).id}`);
    t.like(renewal, { status: "open", attempt_count: 1, next_payment_attempt: "2026-02-18T00:00:00Z" });
    await fake.settle();
    const key = `${renewal.id}:attempt-2`;
    const dying = await child(server, fake, { BILLING_TEST_DIE_AFTER_CHARGE: "1" });
    fake.setWebhook(`${dying.url}/providers/stripe/webhooks/${env}`, WHSEC);
    const portal = await onServer(s, dying.url).raw("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: "https://app.example/account" });
    const ours = await form(`${dying.url}${new URL(portal.body.url).pathname}/card`);
    await ours.body?.cancel();
    const paid = await form(ours.headers.get("location") ?? "", { card: "pm_card_visa" });
    await paid.body?.cancel();
    t.is(await dying.exited, "SIGKILL");
    await fake.settle();
    // Planned before the charge: due at 02-15 00:01 (the portal's time + 60 s), not 02-18.
    const after = await s.call("GET", `/invoices/${renewal.id}`);
    t.like(after, { status: "open", attempt_count: 1, next_payment_attempt: "2026-02-15T00:01:00Z" });
    t.deepEqual(
      intentsOf(fake, renewal.id).map((pi) => [pi.status, pi.amount, pi.idempotency_key]),
      [
        ["requires_payment_method", 4900, `${renewal.id}:attempt-1`],
        ["succeeded", 4900, key],
      ],
    );
    // Real Stripe prunes idempotency keys after 24 h: the retry may come later than that (the server down meanwhile).
    fake.forgetIdempotencyKeys();
    const restarted = await child(server, fake);
    try {
      fake.setWebhook(`${restarted.url}/providers/stripe/webhooks/${env}`, WHSEC);
      await onServer(s, restarted.url).advance("2026-02-18T00:00:00Z");
      await fake.settle();
      // The retry adopted the PaymentIntent of attempt 2: paid with it, no second one, nothing to refund.
      const inv = await s.call("GET", `/invoices/${renewal.id}`);
      t.like(inv, { status: "paid", attempt_count: 2, amount_due: usd("4900") });
      const succeeded = intentsOf(fake, renewal.id).filter((pi) => pi.status === "succeeded");
      t.deepEqual(
        succeeded.map((pi) => [pi.amount, pi.idempotency_key]),
        [[4900, key]],
        "4900 cents taken once, not 4900 + 4900 = 9800",
      );
      t.is(intentsOf(fake, renewal.id).length, 2);
      t.is(fake.requests().filter((r) => r.operation === "POST /v1/refunds").length, 0);
    } finally {
      restarted.proc.kill("SIGTERM");
      await restarted.exited;
    }
  });
}
