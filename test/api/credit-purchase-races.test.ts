/**
 * A credit purchase's charge and a void of its invoice never interleave (DESIGN §14, §16): the
 * charge is made under the invoice's row lock, as dunning makes its attempts. Through the real
 * server, with Stripe (the fake, behind a proxy that holds the charge's request):
 * - a void (or mark-uncollectible) arrives while the charge is at Stripe: it waits for the charge,
 *   then is refused (the invoice is paid); the customer was charged once and holds the credit;
 * - the void lands first (the checkout's completion held on its row, MariaDB only): the
 *   completion then charges nothing, the invoice stays void and the grant failed; the checkout
 *   is not completed and the customer lands on its cancelled URL.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import mysql from "mysql2/promise";
import { reasonOf } from "../helpers/clients.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { buyOnDyingServer, form, location303, stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import type { Scenario } from "../helpers/scenario.js";
import { stripeProxy } from "../helpers/stripe-outage.js";
import { type TestServer, childServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";
import type { FakeStripe } from "../stripe/fake-stripe.js";

const SECRETS_KEY = randomBytes(32).toString("base64");
const CALLBACKS = { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" };
const usd = (value: string) => ({ currency_code: "USD", value });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A proxy in front of the fake Stripe that can hold the next charge (POST /v1/payment_intents) until released. */
interface HoldingProxy {
  url: string;
  /** Holds the next charge: `arrived` once it reached the proxy (with the invoice it charges), `release` sends it on. */
  holdNextCharge(): { arrived: Promise<string>; release: () => void };
  stop(): Promise<void>;
}

async function holdingProxy(target: string): Promise<HoldingProxy> {
  let hold: { arrive: (invoiceId: string) => void; released: Promise<void> } | undefined;
  const proxy = await stripeProxy(target, async (req, _res, body) => {
    if (hold && req.method === "POST" && req.url?.startsWith("/v1/payment_intents")) {
      const h = hold;
      hold = undefined;
      h.arrive(new URLSearchParams(body.toString("utf8")).get("metadata[invoice_id]") ?? "");
      await h.released;
    }
    return undefined;
  });
  return {
    url: proxy.url,
    holdNextCharge() {
      let arrive: (invoiceId: string) => void = () => {};
      let release = () => {};
      const arrived = new Promise<string>((r) => {
        arrive = r;
      });
      const released = new Promise<void>((r) => {
        release = r;
      });
      hold = { arrive, released };
      return { arrived, release };
    },
    stop: () => proxy.stop(),
  };
}

/** `npm start`'s process (src/main.ts) on the test server's database and Stripe, with `env` on top. */
const child = (server: TestServer, stripe: string, env: Record<string, string>) => childServer(server, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY, STRIPE_API_BASE: stripe, ...env });

const ledgerOf = async (s: Scenario): Promise<[string, string][]> => ((await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`)).entries as Json[]).map((e) => [e.entry_type, e.amount.value]);
const succeeded = (fake: FakeStripe, invoiceId: string) => fake.paymentIntents().filter((pi) => (pi.metadata as Json)?.invoice_id === invoiceId && pi.status === "succeeded");

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY }, holdingProxy);

  for (const action of ["void", "mark_uncollectible"] as const)
    test.serial(`${store}: a ${action} sent while the purchase's charge is at Stripe waits for it, then is refused: charged once, the credit granted`, async (t) => {
      const { server, fake, front: proxy } = ctx;
      const d = stripeDriver(server, fake);
      const s = await d.start(server);
      await d.replaceCard(s, "visa");
      const held = proxy.holdNextCharge();
      const buying = s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("700"), category: "paid" });
      // The invoice as the charge names it (nothing is read meanwhile: on SQLite every call waits behind the charge's transaction).
      const invoiceId = await held.arrived;
      t.regex(invoiceId, /^inv_/);
      let voidAnswered = false;
      const voiding = s.raw("POST", `/invoices/${invoiceId}/${action}`, {}).finally(() => {
        voidAnswered = true;
      });
      // The void is sent and held back by the charge's row lock while the charge is at Stripe.
      await sleep(1500);
      t.false(voidAnswered, `the ${action} waited for the charge`);
      held.release();
      const bought = await buying;
      const voided = await voiding;
      t.is(voided.status, 400);
      t.is(reasonOf(voided.body as Json), "INVOICE_NOT_OPEN");
      t.like(bought.credit_grant, { status: "active", remaining_amount: usd("700") });
      t.like(await s.call("GET", `/invoices/${invoiceId}`), { status: "paid", amount_due: usd("700"), attempt_count: 1 });
      // 7.00 charged once = 7.00 granted.
      t.is(succeeded(fake, invoiceId).length, 1);
      t.deepEqual(await ledgerOf(s), [["grant", "700"]]);
      await fake.settle();
    });

  // The window held on the checkout's row: InnoDB's row lock (SQLite's whole-file lock would hold the void too).
  (store === "mysql" ? test.serial : test.skip)(`${store}: a void that lands before a checkout's completion charges it: no charge is made, the grant fails`, async (t) => {
    t.timeout(180_000);
    const { server, fake } = ctx;
    const d = stripeDriver(server, fake);
    const s = await d.start(server);
    const r = await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("700"), category: "paid", checkout_callback_urls: CALLBACKS });
    const grant = r.credit_grant as Json;
    const token = new URL(String(r.checkout_url)).pathname.split("/").pop() as string;
    const stripeUrl = await location303(await form(`${server.url}/hosted/checkout/${token}`), "our checkout page");
    // Stripe's webhooks held: the customer's return completes the checkout.
    fake.webhookOptions({ outOfOrder: true });
    const back = await location303(await form(stripeUrl, { card: "pm_card_visa" }), "Stripe Checkout");
    const lock = await mysql.createConnection(server.db.url);
    let returning: Promise<Response> | undefined;
    try {
      await lock.beginTransaction();
      await lock.query("SELECT id FROM checkout_sessions WHERE token = ? FOR UPDATE", [token]);
      // The customer returns: the completion finds the purchase pending, then waits for the checkout's row.
      returning = fetch(`${server.url}${new URL(back).pathname}${new URL(back).search}`, { redirect: "manual" });
      returning.catch(() => undefined);
      const until = Date.now() + 60_000;
      for (;;) {
        // A locking read by unique key waits inside the optimizer (state "Statistics"), where
        // INNODB_TRX may not list it as LOCK WAIT: the statement itself is looked for.
        const [rows] = await lock.query("SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID <> CONNECTION_ID() AND INFO LIKE '%checkout_sessions%FOR UPDATE%'");
        if (Number((rows as { n: number }[])[0]?.n) > 0) {
          break;
        }
        if (Date.now() > until) throw new Error("the checkout's completion never waited for its row");
        await sleep(50);
      }
      t.like(await s.call("POST", `/invoices/${grant.invoice_id}/void`, {}), { status: "void" });
    } finally {
      await lock.rollback().catch(() => undefined);
      await lock.end();
    }
    const res = await (returning as Promise<Response>);
    await res.body?.cancel();
    fake.webhookOptions({});
    await fake.releaseHeld();
    await fake.settle();
    // The completion reads the purchase's invoice under its lock with the checkout's: void, so the
    // checkout is not completed (no card saved, as its page treats a voided purchase) and the
    // customer's return lands on the cancelled URL, never the success URL with nothing charged.
    t.is(res.status, 303);
    t.is(res.headers.get("location"), CALLBACKS.cancelled_url);
    const [rows] = await withDatabase(server.db.url, (db) => db.dataSource.query("SELECT status FROM checkout_sessions WHERE token = ?", [token]));
    t.is(rows?.status, "open");
    const [cards] = await withDatabase(server.db.url, (db) => db.dataSource.query("SELECT COUNT(*) AS n FROM payment_methods WHERE subject_id = ?", [s.subjectId]));
    t.is(Number(cards?.n), 0, "no card saved");
    t.deepEqual(succeeded(fake, grant.invoice_id), [], "no charge on a void invoice");
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "void", attempt_count: 0 });
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "failed", remaining_amount: usd("0") });
    t.deepEqual(await ledgerOf(s), []);
  });

  // MariaDB only: on SQLite a second process on the same file was seen to fail this (not investigated yet).
  (store === "mysql" ? test.serial : test.skip)(
    `${store}: killed (SIGKILL) between the purchase's charge and its commit: dunning makes the planned attempt with the same key, charged once, the credit granted`,
    async (t) => {
      t.timeout(180_000);
      const { server, fake, front: proxy } = ctx;
      const d = stripeDriver(server, fake);
      const s = await d.start(server);
      await d.replaceCard(s, "visa");
      // Stripe's webhooks held: the recovery is dunning's, not payment_intent.succeeded's.
      fake.webhookOptions({ outOfOrder: true });
      const dying = await child(server, proxy.url, { BILLING_TEST_DIE_AFTER_CHARGE: "1" });
      t.is(await buyOnDyingServer(dying, s.key, s.subjectId, "700"), "SIGKILL");
      const [pi] = fake
        .paymentIntents()
        .filter((x) => String(x.idempotency_key).endsWith(":attempt-1") && (x.metadata as Json)?.environment_id && x.status === "succeeded")
        .slice(-1);
      const invoiceId = String((pi?.metadata as Json)?.invoice_id);
      // What the crash left: Stripe charged, our commit never happened; the attempt planned a minute ahead.
      t.like(await s.call("GET", `/invoices/${invoiceId}`), { status: "open", attempt_count: 0, next_payment_attempt: "2026-01-15T00:01:00Z" });
      const [grant] = (await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants as Json[];
      t.like(grant, { status: "pending_payment", invoice_id: invoiceId });
      // The clock passes the plan: dunning charges attempt 1 again with the same key, and Stripe answers the first PaymentIntent.
      await s.advance("2026-01-15T00:02:00Z");
      t.like(await s.call("GET", `/invoices/${invoiceId}`), { status: "paid", attempt_count: 1, next_payment_attempt: null });
      t.like(await s.call("GET", `/credit-grants/${grant?.id}`), { status: "active", remaining_amount: usd("700") });
      t.is(fake.paymentIntents().filter((x) => x.idempotency_key === `${invoiceId}:attempt-1`).length, 1, "one PaymentIntent for the key");
      t.deepEqual(await ledgerOf(s), [["grant", "700"]]);
      fake.webhookOptions({});
      await fake.releaseHeld();
      await fake.settle();
      t.like(await s.call("GET", `/invoices/${invoiceId}`), { status: "paid", attempt_count: 1 });
      t.deepEqual(await ledgerOf(s), [["grant", "700"]], "granted once");
    },
  );
}
