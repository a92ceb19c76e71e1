/**
 * Where the customer's return from Stripe Checkout (setup mode) sends them (DESIGN §16), both
 * stores, the real server on a port, the official `stripe` library against the fake: the return
 * (GET /providers/stripe/return/{env}) answers a 303 to the checkout's success URL when the
 * checkout is completed, whether this very return completed it (Stripe's webhooks held back) or
 * the webhook did before; a checkout cancelled on our page meanwhile sends the customer to its
 * cancelled URL, and nothing is charged or granted (the purchase ended with the cancel: void, failed).
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { STORES, withDatabase } from "../helpers/db.js";
import { form, location303, stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import type { Scenario } from "../helpers/scenario.js";
import type { TestServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";
import type { FakeStripe } from "../stripe/fake-stripe.js";

const SECRETS_KEY = randomBytes(32).toString("base64");
const CALLBACKS = { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" };
const usd = (value: string) => ({ currency_code: "USD", value });

const ledgerOf = async (s: Scenario): Promise<[string, string][]> => ((await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`)).entries as Json[]).map((e) => [e.entry_type, e.amount.value]);

const checkoutStatus = async (server: TestServer, token: string) =>
  (await withDatabase(server.db.url, (db) => db.dataSource.query("SELECT status FROM checkout_sessions WHERE token = ?", [token])))[0]?.status;

/** A credit purchase of 7.00 waiting for its checkout, our page's 303 to Stripe Checkout followed. */
async function atStripe(server: TestServer, fake: FakeStripe): Promise<{ s: Scenario; grant: Json; token: string; stripeUrl: string }> {
  const s = await stripeDriver(server, fake).start(server);
  const r = await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("700"), category: "paid", checkout_callback_urls: CALLBACKS });
  if (r.credit_grant?.status !== "pending_payment") throw new Error(`purchase: ${JSON.stringify(r)}`);
  const token = new URL(String(r.checkout_url)).pathname.split("/").pop() as string;
  const stripeUrl = await location303(await form(`${server.url}/hosted/checkout/${token}`), "our checkout page");
  return { s, grant: r.credit_grant, token, stripeUrl };
}

/** The customer pays on Stripe's page and comes back: our return endpoint's answer. */
async function payAndReturn(server: TestServer, fake: FakeStripe, stripeUrl: string, settleFirst: boolean): Promise<Response> {
  const back = await location303(await form(stripeUrl, { card: "pm_card_visa" }), "Stripe Checkout");
  if (settleFirst) await fake.settle();
  const url = new URL(back);
  const res = await fetch(`${server.url}${url.pathname}${url.search}`, { redirect: "manual" });
  await res.body?.cancel();
  return res;
}

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY });

  test.serial(`${store}: the customer's return completes the checkout (webhooks held): sent to the success URL, the credit granted once`, async (t) => {
    const { server, fake } = ctx;
    const { s, grant, token, stripeUrl } = await atStripe(server, fake);
    fake.webhookOptions({ outOfOrder: true });
    let res: Response;
    try {
      res = await payAndReturn(server, fake, stripeUrl, false);
    } finally {
      fake.webhookOptions({});
    }
    t.is(res.status, 303);
    t.is(res.headers.get("location"), CALLBACKS.success_url);
    t.is(await checkoutStatus(server, token), "completed");
    // 7.00 bought = 7.00 granted, paid by the card the return saved.
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "paid", amount_due: usd("700") });
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "active", remaining_amount: usd("700") });
    // The held webhook (checkout.session.completed) arrives after: a repeat, nothing more granted.
    await fake.releaseHeld();
    await fake.settle();
    t.deepEqual(await ledgerOf(s), [["grant", "700"]]);
  });

  test.serial(`${store}: the webhook completed the checkout before the customer's return: sent to the success URL`, async (t) => {
    const { server, fake } = ctx;
    const { s, grant, token, stripeUrl } = await atStripe(server, fake);
    const res = await payAndReturn(server, fake, stripeUrl, true);
    t.is(res.status, 303);
    t.is(res.headers.get("location"), CALLBACKS.success_url);
    t.is(await checkoutStatus(server, token), "completed");
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "active", remaining_amount: usd("700") });
    t.deepEqual(await ledgerOf(s), [["grant", "700"]]);
  });

  test.serial(`${store}: a checkout cancelled on our page before the customer's return: sent to the cancelled URL, nothing charged or granted`, async (t) => {
    const { server, fake } = ctx;
    const { s, grant, token, stripeUrl } = await atStripe(server, fake);
    t.is(await location303(await form(`${server.url}/hosted/checkout/${token}/cancel`), "cancel"), CALLBACKS.cancelled_url);
    const res = await payAndReturn(server, fake, stripeUrl, true);
    t.is(res.status, 303);
    t.is(res.headers.get("location"), CALLBACKS.cancelled_url);
    t.is(await checkoutStatus(server, token), "cancelled");
    // The cancel ended the purchase as a decline does (hosted-checkout.ts cancelCheckout): no card saved later can charge it.
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "void", attempt_count: 0 });
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "failed" });
    t.deepEqual(
      fake.paymentIntents().filter((pi) => (pi.metadata as Json)?.invoice_id === grant.invoice_id),
      [],
      "no charge",
    );
    t.deepEqual(await ledgerOf(s), []);
  });
}
