/**
 * The pay link of a Stripe charge that needed the customer (DESIGN §16), both stores, the real
 * server on a port, the official `stripe` library against the local Stripe-compatible server
 * (test/stripe/fake-stripe.ts): a renewal to a card asking for authentication (3184 or 3155)
 * leaves the invoice open with `payment_url` and `invoice.payment_action_required`; the hosted
 * invoice page's "Complete payment" form POSTs to us and is answered a 303 to a Stripe Checkout
 * Session in payment mode (a second POST: the same session); the customer pays it on Stripe's
 * page; its webhooks pay the invoice once (one `invoice.paid`, no second charge under the
 * original attempt's key), the card used becomes the subject's, and the next renewal is charged
 * to it off-session; a credit note's refund refunds the PaymentIntent Checkout made.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { form, useStripeServer } from "../helpers/payment-flows.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import type { TestServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";
import type { FakeStripe } from "../stripe/fake-stripe.js";

const AT = "2026-01-15T00:00:00Z";
const SK = `sk_test_${"51Hx".repeat(6)}PayL`;
const WHSEC = `whsec_${"z9x8c7v6".repeat(4)}`;
const SECRETS_KEY = randomBytes(32).toString("base64");

const eventsOf = async (s: Scenario, type: string, id?: string) => ((await s.call("GET", `/events?types=${type}&limit=100`)).events as Json[]).filter((e) => id === undefined || e.data.id === id);

/** The test server's own address for a URL it made with its public base URL (localhost). */
const local = (server: TestServer, url: string) => `${server.url}${new URL(url).pathname}${new URL(url).search}`;

async function onStripe(server: TestServer, fake: FakeStripe): Promise<{ s: Scenario; env: string; card: string }> {
  const s = await Scenario.start(server, AT);
  const r = await s.raw("PATCH", "/payment-settings", { provider: "stripe", stripe_secret_key: SK, stripe_webhook_secret: WHSEC });
  if (r.status !== 200) throw new Error(`PATCH /payment-settings: ${r.status} ${JSON.stringify(r.body)}`);
  const env = String(r.body.stripe_webhook_url).split("/").pop() as string;
  fake.setWebhook(`${server.url}/providers/stripe/webhooks/${env}`, WHSEC);
  const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: { currency_code: "USD", value: "4900" } } }] });
  return { s, env, card };
}

/** Our page → Stripe Checkout (setup) with `stripeCard` → webhook and return. */
async function saveOnStripe(server: TestServer, fake: FakeStripe, ourUrl: string, stripeCard: string): Promise<void> {
  const ours = await form(local(server, ourUrl));
  await ours.body?.cancel();
  if (ours.status !== 303) throw new Error(`our page answered ${ours.status}`);
  const paid = await form(ours.headers.get("location") ?? "", { card: stripeCard });
  await paid.body?.cancel();
  await fake.settle();
  const back = await fetch(local(server, paid.headers.get("location") ?? ""), { redirect: "manual" });
  await back.body?.cancel();
}

/** The subject's saved payment method now (subjects.payment_method_id), and how many it ever had. */
async function subjectCard(server: TestServer, subjectId: string): Promise<{ current: Json | undefined; count: number }> {
  return withDatabase(server.db.url, async (db) => {
    const [current] = await db.dataSource.query("SELECT p.id, p.provider_ref, p.last4 FROM subjects s JOIN payment_methods p ON p.id = s.payment_method_id WHERE s.id = ?", [subjectId]);
    const all = await db.dataSource.query("SELECT id FROM payment_methods WHERE subject_id = ?", [subjectId]);
    return { current, count: all.length };
  });
}

const intentsOf = (fake: FakeStripe, invoiceId: string) => fake.paymentIntents().filter((pi) => (pi.metadata as Json)?.invoice_id === invoiceId);

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY });

  for (const [last4, token] of [
    ["3184", "pm_card_authenticationRequired"],
    ["3155", "pm_card_authenticationRequiredOnSetup"],
  ] as const) {
    test.serial(`${store}: card ${last4} needs the customer: the hosted page's form leads to Stripe Checkout (one session), paid there: the invoice paid once, the card kept`, async (t) => {
      const { server, fake } = ctx;
      const { s, card } = await onStripe(server, fake);
      const sub = await s.call("POST", "/subscriptions", {
        subject_id: s.subjectId,
        rate_card_id: card,
        fixed_rate_quantities: { seats: 1 },
        create_checkout_session: "always",
        checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" },
      });
      await saveOnStripe(server, fake, sub.result.action.checkout_url, "pm_card_visa");
      const portal = await s.raw("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: "https://app.example/account" });
      await saveOnStripe(server, fake, `${portal.body.url}/card`, token);
      t.is((await subjectCard(server, s.subjectId)).current?.last4, last4);

      // The renewal asks for authentication: open, a pay link, invoice.payment_action_required.
      await s.advance("2026-02-15T00:00:00Z");
      await fake.settle();
      const renewal = (await s.invoices()).at(-1) as Json;
      t.like(renewal, { status: "open", attempt_count: "1" });
      t.truthy(renewal.payment_url);
      t.is((await eventsOf(s, "invoice.payment_action_required", renewal.id)).length, 1);
      const hosted = local(server, String(renewal.payment_url));
      const pageRes = await fetch(hosted);
      const body = await pageRes.text();
      const payPath = `${new URL(hosted).pathname}/pay`;
      t.true(body.includes(`<form method="post" action="${payPath}">`), "the Complete payment form posts to our own origin");
      t.regex(String(pageRes.headers.get("content-security-policy")), /form-action 'self' https:\/\/checkout\.stripe\.com;/);

      // The form: a 303 to Stripe Checkout (payment mode); a double click gets the same session.
      const first = await form(`${server.url}${payPath}`);
      await first.body?.cancel();
      t.is(first.status, 303);
      const stripeUrl = String(first.headers.get("location"));
      t.true(stripeUrl.startsWith(`${fake.url}/checkout/cs_`), stripeUrl);
      const again = await form(`${server.url}${payPath}`);
      await again.body?.cancel();
      t.is(again.status, 303);
      t.is(again.headers.get("location"), stripeUrl, "a second POST: the same session");
      const creates = fake.requests().filter((r) => r.operation === "POST /v1/checkout/sessions" && r.params.mode === "payment" && (r.params.metadata as Json)?.invoice_id === renewal.id);
      t.is(creates.length, 2);
      t.is(creates.filter((r) => !r.replayed).length, 1, "one session made, the second answer a replay");
      t.is(creates[0]?.idempotencyKey, creates[1]?.idempotencyKey);
      const sessionId = stripeUrl.split("/").pop() as string;
      t.like(fake.state.session(sessionId), {
        mode: "payment",
        amount_total: 4900,
        currency: "usd",
        metadata: { invoice_id: renewal.id },
        success_url: `${new URL(String(renewal.payment_url)).origin}${new URL(hosted).pathname}`,
      });
      t.like(creates[0]?.params, { payment_intent_data: { setup_future_usage: "off_session", metadata: { invoice_id: renewal.id } } });

      // The customer pays on Stripe's page with another card: back to the invoice page; the webhooks pay it.
      const paid = await form(stripeUrl, { card: "pm_card_mastercard" });
      await paid.body?.cancel();
      t.is(new URL(String(paid.headers.get("location"))).pathname, new URL(hosted).pathname);
      await fake.settle();
      t.like(await s.call("GET", `/invoices/${renewal.id}`), { status: "paid", payment_url: null });
      t.is((await eventsOf(s, "invoice.paid", renewal.id)).length, 1, "paid once (checkout.session.completed and payment_intent.succeeded both came)");
      const intents = intentsOf(fake, renewal.id);
      t.is(intents.filter((pi) => pi.idempotency_key === `${renewal.id}:attempt-1`).length, 1, "no second charge of the original attempt");
      // The original attempt's PaymentIntent, which waited for the customer, is cancelled: completing it later charges nothing.
      t.deepEqual(intents.map((pi) => pi.status).sort(), ["canceled", "succeeded"]);
      // The card used is the subject's now.
      const kept = await subjectCard(server, s.subjectId);
      t.is(kept.current?.last4, "4444");
      t.is(kept.count, 3);

      // Stripe delivers the completion again: nothing changes. The form after payment: back to the invoice.
      const completed = fake.events().find((e) => e.type === "checkout.session.completed" && (e.data as Json).object.id === sessionId) as Json;
      await fake.redeliver(String(completed.id));
      await fake.settle();
      t.is((await eventsOf(s, "invoice.paid", renewal.id)).length, 1);
      t.is((await subjectCard(server, s.subjectId)).count, 3);
      const after = await form(`${server.url}${payPath}`);
      await after.body?.cancel();
      t.is(after.status, 303);
      t.is(after.headers.get("location"), new URL(hosted).pathname);

      // A refund through a credit note refunds the PaymentIntent Checkout made.
      const paidBy = intents.find((pi) => pi.status === "succeeded");
      const note = await s.raw("POST", "/credit-notes", { invoice_id: renewal.id, reason: "other", outcome: "refund", amount: "900" });
      t.is(note.status, 200, JSON.stringify(note.body));
      t.true(fake.requests().some((r) => r.operation === "POST /v1/refunds" && r.status === 200 && r.params.payment_intent === paidBy?.id && String(r.params.amount) === "900"));

      // The next renewal: charged off-session to the card kept.
      await s.advance("2026-03-15T00:00:00Z");
      const next = (await s.invoices()).at(-1) as Json;
      t.not(next.id, renewal.id);
      t.is(next.status, "paid");
      t.like(intentsOf(fake, next.id)[0], { idempotency_key: `${next.id}:attempt-1`, status: "succeeded", payment_method: kept.current?.provider_ref });
    });
  }
}
