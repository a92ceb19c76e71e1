/**
 * A subject's Stripe customer kept in sync (DESIGN §16), against the real server on both stores
 * and the local Stripe-compatible server (test/stripe/fake-stripe.ts): once a card setup made the
 * subject's customer, PUT /subjects/{id} changing its name, email or billing details updates the
 * customer at once (before the answer); a subject without a customer makes none; and Stripe
 * failing never fails the subject's update (the next card setup syncs again).
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import Stripe from "stripe";
import { STORES } from "../helpers/db.js";
import { useStripeServer } from "../helpers/payment-flows.js";
import { Scenario } from "../helpers/scenario.js";
import type { TestServer } from "../helpers/server.js";
import { type FakeStripe, startFakeStripe } from "../stripe/fake-stripe.js";

const AT = "2026-01-15T00:00:00Z";
const SK = `sk_test_${"51Hx".repeat(6)}SyNc`;
const WHSEC = `whsec_${"z9x8c7v6".repeat(4)}`;
const SECRETS_KEY = randomBytes(32).toString("base64");

/** A test environment on Stripe, a subject, and a card setup started for it (which makes its Stripe customer). */
async function withCustomer(server: TestServer, fake: FakeStripe): Promise<{ s: Scenario; stripe: Stripe; customerId: () => Promise<string | undefined> }> {
  const s = await Scenario.start(server, AT);
  const r = await s.raw("PATCH", "/payment-settings", { provider: "stripe", stripe_secret_key: SK, stripe_webhook_secret: WHSEC });
  if (r.status !== 200) throw new Error(`PATCH /payment-settings: ${r.status} ${JSON.stringify(r.body)}`);
  const stripe = new Stripe(SK, { host: fake.host, port: fake.port, protocol: "http" });
  const customerId = async () => (await stripe.customers.list({ limit: 100 })).data.find((c) => c.metadata?.subject_id === s.subjectId)?.id;
  return { s, stripe, customerId };
}

/** Starts a card setup through the portal's "Replace card" (our page → Stripe Checkout): the subject's customer is made. */
async function startCardSetup(server: TestServer, s: Scenario): Promise<void> {
  const portal = await s.call("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: "https://app.example/account" });
  const res = await fetch(`${server.url}${new URL(portal.url).pathname}/card`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "", redirect: "manual" });
  await res.body?.cancel();
  if (res.status !== 303) throw new Error(`the card form answered ${res.status}`);
}

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY });

  test.serial(`${store}: a subject's update of its name, email and billing address updates its Stripe customer`, async (t) => {
    const { server, fake } = ctx;
    const { s, stripe, customerId } = await withCustomer(server, fake);
    await startCardSetup(server, s);
    const id = await customerId();
    t.truthy(id, "the card setup made the subject's customer");

    await s.call("PUT", `/subjects/${s.subjectId}`, { name: "Renamed Co", email: "billing@renamed.example" });
    let c = await stripe.customers.retrieve(id as string);
    t.like(c, { name: "Renamed Co", email: "billing@renamed.example" });

    await s.call("PUT", `/subjects/${s.subjectId}`, {
      billing_details: { legal_name: "Renamed Company GmbH", address: { line1: "Hauptstr. 1", city: "Berlin", postal_code: "10115", country: "DE" } },
    });
    c = await stripe.customers.retrieve(id as string);
    t.like(c, { name: "Renamed Company GmbH", email: "billing@renamed.example" });
    t.like((c as Stripe.Customer).address, { line1: "Hauptstr. 1", city: "Berlin", postal_code: "10115", country: "DE" });

    // Metadata alone is not Stripe's business: no update sent.
    const updates = () => fake.requests().filter((q) => q.method === "POST" && q.path === `/v1/customers/${id}`).length;
    const before = updates();
    await s.call("PUT", `/subjects/${s.subjectId}`, { metadata: { plan: "gold" } });
    t.is(updates(), before);
  });

  test.serial(`${store}: a subject without a Stripe customer gets none from an update`, async (t) => {
    const { server, fake } = ctx;
    const { s, customerId } = await withCustomer(server, fake);
    await s.call("PUT", `/subjects/${s.subjectId}`, { name: "Nobody Yet" });
    t.is(await customerId(), undefined);
  });

  test.serial(`${store}: Stripe failing does not fail the subject's update`, async (t) => {
    const { server, fake } = ctx;
    const { s, customerId } = await withCustomer(server, fake);
    await startCardSetup(server, s);
    t.truthy(await customerId());
    // Stripe unreachable: the update still answers 200 and is stored.
    await fake.stop();
    try {
      const r = await s.raw("PUT", `/subjects/${s.subjectId}`, { name: "Offline Co" });
      t.is(r.status, 200);
      t.is((await s.call("GET", `/subjects/${s.subjectId}`)).name, "Offline Co");
    } finally {
      ctx.fake = await startFakeStripe();
    }
  });
}
