/**
 * A Stripe card setup completes only its own environment's checkout or portal session (DESIGN §3),
 * both stores, the real server on a port, the official `stripe` library against the fake. Two
 * environments on their own Stripe accounts: B's operator, knowing A's checkout (or portal)
 * token, completes a setup Checkout Session in B's account that names it
 * (`return_reference: "checkout:<A token>"`, `environment_id: B`) and calls B's return URL, and
 * B's webhook endpoint gets its `checkout.session.completed`: A's checkout stays open (nothing
 * granted), A's subject gets no card from B's account. B's own checkout and portal still complete.
 */
import { randomBytes } from "node:crypto";
import test, { type ExecutionContext } from "ava";
import Stripe from "stripe";
import { STORES, withDatabase } from "../helpers/db.js";
import { AT, form, location303, useStripeServer } from "../helpers/payment-flows.js";
import { Scenario } from "../helpers/scenario.js";
import type { TestServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";
import type { FakeStripe } from "../stripe/fake-stripe.js";

const SECRETS_KEY = randomBytes(32).toString("base64");
const SK_A = `sk_test_${"51Ee".repeat(6)}EnvA`;
const SK_B = `sk_test_${"51Ff".repeat(6)}EnvB`;
const WH_A = `whsec_${"3nv4".repeat(8)}`;
const WH_B = `whsec_${"3nvb".repeat(8)}`;
const CALLBACKS = { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" };
const usd = (value: string) => ({ currency_code: "USD", value });
/** `url` on the test server (the public base URL may name another host). */
const local = (server: TestServer, url: string) => `${server.url}${new URL(url).pathname}${new URL(url).search}`;
const lastSegment = (url: string) => new URL(url).pathname.split("/").pop() as string;

interface Env {
  s: Scenario;
  env: string;
}

/** A new environment on Stripe with `key` (its own account); its webhooks are not pointed anywhere yet. */
async function stripeEnvironment(server: TestServer, key: string, secret: string): Promise<Env> {
  const s = await Scenario.start(server, AT);
  const r = await s.raw("PATCH", "/payment-settings", { provider: "stripe", stripe_secret_key: key, stripe_webhook_secret: secret });
  if (r.status !== 200) throw new Error(`PATCH /payment-settings: ${r.status} ${JSON.stringify(r.body)}`);
  return { s, env: lastSegment(String(r.body.stripe_webhook_url)) };
}

const webhookTo = (server: TestServer, fake: FakeStripe, e: Env, secret: string) => fake.setWebhook(`${server.url}/providers/stripe/webhooks/${e.env}`, secret);

/** A credit purchase of 7.00 waiting for its checkout: the grant and the checkout's token. */
async function purchase(s: Scenario): Promise<{ grant: Json; token: string }> {
  const r = await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("700"), category: "paid", checkout_callback_urls: CALLBACKS });
  if (r.credit_grant?.status !== "pending_payment") throw new Error(`purchase: ${JSON.stringify(r)}`);
  return { grant: r.credit_grant, token: lastSegment(String(r.checkout_url)) };
}

async function portalToken(s: Scenario): Promise<string> {
  const r = await s.raw("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: "https://app.example/account" });
  if (r.status !== 200) throw new Error(`POST /customer-portal/sessions: ${r.status} ${JSON.stringify(r.body)}`);
  return lastSegment(String(r.body.url));
}

const checkoutStatus = async (server: TestServer, token: string) =>
  (await withDatabase(server.db.url, (db) => db.dataSource.query("SELECT status FROM checkout_sessions WHERE token = ?", [token])))[0]?.status;

/** The subject's payment methods (any environment) and the one it uses. */
async function cardsOf(server: TestServer, subjectId: string): Promise<{ cards: string[]; current: string | null }> {
  return withDatabase(server.db.url, async (db) => {
    const rows = await db.dataSource.query("SELECT provider_ref FROM payment_methods WHERE subject_id = ?", [subjectId]);
    const [subject] = await db.dataSource.query("SELECT payment_method_id FROM subjects WHERE id = ?", [subjectId]);
    return { cards: rows.map((r: Json) => String(r.provider_ref)), current: subject?.payment_method_id ?? null };
  });
}

/**
 * B's operator, in B's own Stripe account: a setup Checkout Session naming `reference` (another
 * environment's token) with B as its environment, completed with a card on the fake's page (its
 * `checkout.session.completed` sent to B's endpoint, or held); answers B's return URL.
 */
async function forgedSetup(server: TestServer, fake: FakeStripe, b: Env, reference: string): Promise<string> {
  const stripe = new Stripe(SK_B, { host: fake.host, port: fake.port, protocol: "http" });
  const customer = await stripe.customers.create({ name: "B's own" });
  const metadata = { environment_id: b.env, subject_id: b.s.subjectId, return_reference: reference };
  const session = await stripe.checkout.sessions.create({
    mode: "setup",
    customer: customer.id,
    currency: "usd",
    success_url: `${server.url}/providers/stripe/return/${b.env}?ref=${encodeURIComponent(reference)}&session_id={CHECKOUT_SESSION_ID}`,
    cancel_url: "https://b.example/cancel",
    metadata,
    setup_intent_data: { metadata },
  });
  return location303(await form(String(session.url), { card: "pm_card_visa" }), "Stripe Checkout");
}

/** B's return URL called as the browser would: its status. */
async function returnTo(server: TestServer, back: string): Promise<number> {
  const res = await fetch(local(server, back), { redirect: "manual" });
  await res.body?.cancel();
  return res.status;
}

/** The customer goes from our page (`ourUrl`) through Stripe Checkout and back: our return's redirect. */
async function throughStripe(server: TestServer, fake: FakeStripe, ourUrl: string): Promise<string> {
  const stripeUrl = await location303(await form(local(server, ourUrl)), "our page");
  const back = await location303(await form(stripeUrl, { card: "pm_card_visa" }), "Stripe Checkout");
  await fake.settle();
  return location303(await fetch(local(server, back), { redirect: "manual" }), "our return");
}

/** The forged setup's webhooks (held until now, or sent at once) delivered to B's endpoint: its checkout.session.completed answered 200. */
async function delivered(fake: FakeStripe, t: ExecutionContext, before: number): Promise<void> {
  fake.webhookOptions({});
  await fake.releaseHeld();
  await fake.settle();
  const completed = fake
    .deliveries()
    .slice(before)
    .filter((d) => d.type === "checkout.session.completed");
  t.is(completed.length, 1, "B's endpoint got the setup's checkout.session.completed");
  t.is(completed[0]?.status, 200);
}

/**
 * Two environments on their own accounts; A's checkout or portal token named by B's forged setup,
 * whose return (`first: "return"`, the webhook held) or webhook (`first: "webhook"`) comes first,
 * then the other. `unchanged` checks A after each.
 */
async function forged(
  t: ExecutionContext,
  server: TestServer,
  fake: FakeStripe,
  first: "return" | "webhook",
  named: (a: Env) => Promise<string>,
  unchanged: (a: Env, what: string) => Promise<void>,
): Promise<Env> {
  fake.setAccount(SK_A, "acct_env_a");
  fake.setAccount(SK_B, "acct_env_b");
  const a = await stripeEnvironment(server, SK_A, WH_A);
  const b = await stripeEnvironment(server, SK_B, WH_B);
  const reference = await named(a);
  webhookTo(server, fake, b, WH_B);
  fake.webhookOptions({ outOfOrder: first === "return" });
  t.teardown(() => fake.webhookOptions({}));
  const before = fake.deliveries().length;
  const back = await forgedSetup(server, fake, b, reference);
  if (first === "webhook") {
    await delivered(fake, t, before);
    await unchanged(a, "after B's webhook");
  }
  t.not(await returnTo(server, back), 303, "B's return sends nobody on");
  await unchanged(a, "after B's return");
  if (first === "return") {
    await delivered(fake, t, before);
    await unchanged(a, "after B's webhook");
  }
  return b;
}

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY });

  for (const first of ["return", "webhook"] as const) {
    test.serial(`${store}: B's ${first} (then the other) naming A's checkout leaves it open and A's subject without a card; B's own checkout completes`, async (t) => {
      const { server, fake } = ctx;
      let bought: { grant: Json; token: string } | undefined;
      const b = await forged(
        t,
        server,
        fake,
        first,
        async (a) => {
          bought = await purchase(a.s);
          return `checkout:${bought.token}`;
        },
        async (a, what) => {
          t.is(await checkoutStatus(server, bought?.token ?? ""), "open", what);
          t.deepEqual(await cardsOf(server, a.s.subjectId), { cards: [], current: null }, what);
          t.like(await a.s.call("GET", `/credit-grants/${bought?.grant.id}`), { status: "pending_payment" }, what);
        },
      );

      // B's own purchase, through its own Stripe account, completes as ever.
      const own = await purchase(b.s);
      t.is(await throughStripe(server, fake, `${server.url}/hosted/checkout/${own.token}`), CALLBACKS.success_url);
      t.is(await checkoutStatus(server, own.token), "completed");
      t.like(await b.s.call("GET", `/credit-grants/${own.grant.id}`), { status: "active", remaining_amount: usd("700") });
    });

    test.serial(`${store}: B's ${first} (then the other) naming A's portal session saves no card on A's subject; B's own portal saves one`, async (t) => {
      const { server, fake } = ctx;
      const b = await forged(
        t,
        server,
        fake,
        first,
        async (a) => `portal:${await portalToken(a.s)}`,
        async (a, what) => {
          t.deepEqual(await cardsOf(server, a.s.subjectId), { cards: [], current: null }, what);
        },
      );

      // B's own portal card replacement, through its own Stripe account, saves the card.
      const own = await portalToken(b.s);
      const to = new URL(await throughStripe(server, fake, `${server.url}/hosted/portal/${own}/card`));
      t.is(`${to.pathname}${to.search}`, `/hosted/portal/${own}?done=card`);
      const saved = await cardsOf(server, b.s.subjectId);
      t.is(saved.cards.length, 1);
      t.truthy(saved.current);
    });
  }

  test.serial(`${store}: a portal card setup finished on Stripe after the portal link expired still saves the card`, async (t) => {
    const { server, fake } = ctx;
    fake.setAccount(SK_A, "acct_env_a");
    const a = await stripeEnvironment(server, SK_A, WH_A);
    webhookTo(server, fake, a, WH_A);
    const token = await portalToken(a.s);
    const stripeUrl = await location303(await form(local(server, `${server.url}/hosted/portal/${token}/card`)), "our page");
    // The customer takes longer on Stripe's page than the portal link lives (60 minutes): it expired a minute ago.
    const past = new Date(Date.now() - 60_000).toISOString().replace("T", " ").replace("Z", "");
    await withDatabase(server.db.url, (db) => db.dataSource.query("UPDATE customer_portal_sessions SET expires_at = ? WHERE token = ?", [past, token]));
    const back = await location303(await form(stripeUrl, { card: "pm_card_visa" }), "Stripe Checkout");
    await fake.settle();
    await returnTo(server, back);
    const saved = await cardsOf(server, a.s.subjectId);
    t.is(saved.cards.length, 1, "the card saved on Stripe is the subject's");
    t.truthy(saved.current);
  });
}
