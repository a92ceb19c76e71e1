/**
 * An environment's Stripe key moved to another Stripe account (DESIGN §16), against the real
 * server on both stores and the local Stripe-compatible server (test/stripe/fake-stripe.ts), which
 * answers another account's customer "No such customer" as Stripe does: a subject whose customer
 * was made in account A gets a customer in account B at its next card setup (the portal's "Replace
 * card"), the card is saved on it, and the stored customer is B's from then on. A customer
 * deleted at Stripe is replaced the same way.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import Stripe from "stripe";
import { STORES, withDatabase } from "../helpers/db.js";
import { AT, STRIPE_WEBHOOK_SECRET, stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import { Scenario } from "../helpers/scenario.js";
import type { TestServer } from "../helpers/server.js";
import type { FakeStripe } from "../stripe/fake-stripe.js";

const SK_A = `sk_test_${"51Ac".repeat(6)}AccA`;
const SK_B = `sk_test_${"51Bd".repeat(6)}AccB`;
const SECRETS_KEY = randomBytes(32).toString("base64");

/** Sets the environment's Stripe key (and its webhook secret, pointed at the server). */
async function useKey(server: TestServer, fake: FakeStripe, s: Scenario, key: string): Promise<void> {
  const r = await s.raw("PATCH", "/payment-settings", { provider: "stripe", stripe_secret_key: key, stripe_webhook_secret: STRIPE_WEBHOOK_SECRET });
  if (r.status !== 200) throw new Error(`PATCH /payment-settings: ${r.status} ${JSON.stringify(r.body)}`);
  const env = String(r.body.stripe_webhook_url).split("/").pop() as string;
  fake.setWebhook(`${server.url}/providers/stripe/webhooks/${env}`, STRIPE_WEBHOOK_SECRET);
}

/** The subject's customers that the account of `key` has. */
async function customersIn(fake: FakeStripe, key: string, subjectId: string): Promise<string[]> {
  const stripe = new Stripe(key, { host: fake.host, port: fake.port, protocol: "http" });
  return (await stripe.customers.list({ limit: 100 })).data.filter((c) => c.metadata?.subject_id === subjectId).map((c) => c.id);
}

async function storedCustomer(server: TestServer, subjectId: string): Promise<string | undefined> {
  const rows = await withDatabase(server.db.url, (db) => db.dataSource.query("SELECT customer_ref FROM provider_customers WHERE subject_id = ?", [subjectId]));
  return rows[0]?.customer_ref;
}

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY });

  test.serial(`${store}: after the environment's key moves to another Stripe account, the portal saves a card on a customer in the new account`, async (t) => {
    const { server, fake } = ctx;
    fake.setAccount(SK_A, "acct_A");
    fake.setAccount(SK_B, "acct_B");
    const driver = stripeDriver(server, fake);
    const s = await Scenario.start(server, AT);

    await useKey(server, fake, s, SK_A);
    await driver.replaceCard(s, "visa");
    const [inA] = await customersIn(fake, SK_A, s.subjectId);
    t.truthy(inA, "the first card setup made the subject's customer in account A");
    t.is(await storedCustomer(server, s.subjectId), inA);

    // Same mode, another account: A's customer is unknown to B's key.
    await useKey(server, fake, s, SK_B);
    await driver.replaceCard(s, "mastercard");
    const inB = await customersIn(fake, SK_B, s.subjectId);
    t.is(inB.length, 1, "a customer was made in account B");
    t.not(inB[0], inA);
    t.is(await storedCustomer(server, s.subjectId), inB[0], "B's customer replaced A's");
    const cards = [...fake.state.paymentMethods.values()].filter((pm) => pm.customer === inB[0]);
    t.deepEqual(
      cards.map((pm) => pm.card?.last4),
      ["4444"],
      "the new card was saved on B's customer",
    );

    // The next card setup keeps B's customer: no third one.
    await driver.replaceCard(s, "visa");
    t.deepEqual(await customersIn(fake, SK_B, s.subjectId), inB);
    t.deepEqual(await customersIn(fake, SK_A, s.subjectId), [inA]);
  });

  test.serial(`${store}: a customer deleted at Stripe after this process synced it is replaced at the next card setup`, async (t) => {
    const { server, fake } = ctx;
    const driver = stripeDriver(server, fake);
    const s = await Scenario.start(server, AT);
    await useKey(server, fake, s, SK_A);
    await driver.replaceCard(s, "visa");
    const [first] = await customersIn(fake, SK_A, s.subjectId);
    t.truthy(first);
    // Deleted in Stripe's dashboard: the server's provider still has it synced, so it goes straight to Checkout.
    fake.state.customers.delete(first as string);
    await driver.replaceCard(s, "mastercard");
    const now = await customersIn(fake, SK_A, s.subjectId);
    t.is(now.length, 1);
    t.not(now[0], first);
    t.is(await storedCustomer(server, s.subjectId), now[0]);
  });
}
