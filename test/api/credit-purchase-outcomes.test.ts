/**
 * Where a credit purchase's checkout sends the customer, and how its charge ends whichever path
 * makes it (DESIGN §14, §16). Through the real server on a port, both stores:
 * - a purchase voided (or marked uncollectible) after its checkout page was shown: the card
 *   posted lands on the cancelled URL, the checkout not completed, nothing saved or charged;
 * - a card saved by the checkout, then declined by the purchase's charge: the customer lands on
 *   the checkout's cancelled URL (never its success URL with nothing charged), the invoice void,
 *   the grant failed — on our card form (the test provider), and on Stripe Checkout whether the
 *   customer's return or Stripe's webhook completes the checkout;
 * - MariaDB only (a second process on the database): the process killed between Stripe's decline
 *   and its commit; dunning makes the planned attempt 1 again with the same key, Stripe answers
 *   the same decline, and the purchase ends as its own charge ends it: the invoice void, the grant
 *   failed, no retry planned, the same events as a purchase declined without a crash.
 */
import { randomBytes } from "node:crypto";
import test, { type ExecutionContext } from "ava";
import { STORES, withDatabase } from "../helpers/db.js";
import { buyOnDyingServer, form, location303, stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import { Scenario } from "../helpers/scenario.js";
import { type TestServer, childServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const SECRETS_KEY = randomBytes(32).toString("base64");
const AT = "2026-01-15T00:00:00Z";
const CALLBACKS = { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" };
const usd = (value: string) => ({ currency_code: "USD", value });
/** The test provider's card that is saved, then declined on every charge. */
const SAVED_THEN_DECLINED = "4000 0000 0000 0341";

const ledgerOf = async (s: Scenario): Promise<[string, string][]> => ((await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`)).entries as Json[]).map((e) => [e.entry_type, e.amount.value]);

const checkoutStatus = async (server: TestServer, token: string) =>
  (await withDatabase(server.db.url, (db) => db.dataSource.query("SELECT status FROM checkout_sessions WHERE token = ?", [token])))[0]?.status;

/** The invoice's events, by type, oldest first. */
const eventsOf = async (s: Scenario, invoiceId: string): Promise<string[]> =>
  ((await s.call("GET", "/events?limit=100")).events as Json[]).filter((e) => String(e.type).startsWith("invoice.") && e.data.id === invoiceId).map((e) => String(e.type));

/** A paid grant of 7.00 waiting for its checkout: the grant and the checkout's token. */
async function pendingPurchase(s: Scenario): Promise<{ grant: Json; token: string; checkoutUrl: string }> {
  const r = await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("700"), category: "paid", checkout_callback_urls: CALLBACKS });
  if (r.credit_grant?.status !== "pending_payment") throw new Error(`purchase: ${JSON.stringify(r)}`);
  return { grant: r.credit_grant, token: new URL(String(r.checkout_url)).pathname.split("/").pop() as string, checkoutUrl: r.checkout_url };
}

/** The purchase ended unpaid: its invoice void after its one attempt, its grant failed, nothing on the ledger. */
async function endedUnpaid(t: ExecutionContext, s: Scenario, grant: Json): Promise<void> {
  t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "void", amount_due: usd("700"), attempt_count: 1, next_payment_attempt: null });
  t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "failed", remaining_amount: usd("0") });
  t.deepEqual(await ledgerOf(s), []);
}

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY });

  test.serial(`${store}: a card our checkout saves, then declined by the purchase's charge: the customer lands on the cancelled URL, nothing granted`, async (t) => {
    const { server } = ctx;
    const s = await Scenario.start(server, AT);
    const { grant, token, checkoutUrl } = await pendingPurchase(s);
    const paid = await s.payCheckout(checkoutUrl, SAVED_THEN_DECLINED);
    t.is(paid.status, 303);
    t.is(paid.location, CALLBACKS.cancelled_url);
    await endedUnpaid(t, s, grant);
    // The checkout did complete (its card is saved on the subject), and cannot be used again.
    t.is(await checkoutStatus(server, token), "completed");
    t.is((await s.payCheckout(checkoutUrl, "4242 4242 4242 4242")).status, 410);
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "failed" });
    t.deepEqual(await eventsOf(s, grant.invoice_id), ["invoice.created", "invoice.finalized", "invoice.payment_failed", "invoice.voided"]);
  });

  for (const action of ["void", "mark_uncollectible"] as const)
    test.serial(
      `${store}: a purchase's invoice ${action === "void" ? "voided" : "marked uncollectible"} after its checkout page was shown: the card posted lands on the cancelled URL, nothing saved or charged`,
      async (t) => {
        const { server } = ctx;
        const s = await Scenario.start(server, AT);
        const { grant, token, checkoutUrl } = await pendingPurchase(s);
        t.is((await fetch(`${server.url}/hosted/checkout/${token}`)).status, 200);
        t.like(await s.call("POST", `/invoices/${grant.invoice_id}/${action}`, {}), { status: action === "void" ? "void" : "uncollectible" });
        const paid = await s.payCheckout(checkoutUrl, "4242 4242 4242 4242");
        t.is(paid.status, 303);
        t.is(paid.location, CALLBACKS.cancelled_url);
        // Not completed (as a stale checkout): no card saved, no charge.
        t.is(await checkoutStatus(server, token), "open");
        const [cards] = await withDatabase(server.db.url, (db) => db.dataSource.query("SELECT COUNT(*) AS n FROM payment_methods WHERE subject_id = ?", [s.subjectId]));
        t.is(Number(cards?.n), 0, "no card saved");
        t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { attempt_count: 0 });
        t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "failed", remaining_amount: usd("0") });
        t.deepEqual(await ledgerOf(s), []);
      },
    );

  for (const via of ["the customer's return (webhooks held)", "Stripe's webhook, before the customer's return"] as const)
    test.serial(`${store}: a card saved on Stripe Checkout, then declined by the purchase's charge, completed by ${via}: the return lands on the cancelled URL`, async (t) => {
      const { server, fake } = ctx;
      const s = await stripeDriver(server, fake).start(server);
      const { grant, token } = await pendingPurchase(s);
      const stripeUrl = await location303(await form(`${server.url}/hosted/checkout/${token}`), "our checkout page");
      const held = via.startsWith("the customer's");
      if (held) fake.webhookOptions({ outOfOrder: true });
      let res: Response;
      try {
        const back = new URL(await location303(await form(stripeUrl, { card: "pm_card_chargeCustomerFail" }), "Stripe Checkout"));
        if (!held) await fake.settle();
        res = await fetch(`${server.url}${back.pathname}${back.search}`, { redirect: "manual" });
        await res.body?.cancel();
      } finally {
        fake.webhookOptions({});
      }
      t.is(res.status, 303);
      t.is(res.headers.get("location"), CALLBACKS.cancelled_url);
      t.is(await checkoutStatus(server, token), "completed");
      // The held webhook arrives after: a repeat, nothing changes.
      await fake.releaseHeld();
      await fake.settle();
      await endedUnpaid(t, s, grant);
      const intents = fake.paymentIntents().filter((pi) => (pi.metadata as Json)?.invoice_id === grant.invoice_id);
      t.deepEqual(
        intents.map((pi) => [pi.idempotency_key, pi.status === "succeeded"]),
        [[`${grant.invoice_id}:attempt-1`, false]],
        "one charge, declined",
      );
    });

  // MariaDB only: a second process on the same SQLite file was seen to fail (credit-purchase-races.test.ts).
  (store === "mysql" ? test.serial : test.skip)(
    `${store}: killed between Stripe's decline of the purchase's charge and its commit: dunning's attempt 1 ends it as the purchase's own charge does, void and failed, no retry`,
    async (t) => {
      t.timeout(180_000);
      const { server, fake } = ctx;
      const d = stripeDriver(server, fake);
      const s = await d.start(server);
      await d.replaceCard(s, "insufficient_funds");
      // A purchase declined without a crash, for its events.
      const plain = (await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("700"), category: "paid" })).credit_grant as Json;
      await endedUnpaid(t, s, plain);
      const dying = await childServer(server, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY, STRIPE_API_BASE: fake.url, BILLING_TEST_DIE_AFTER_CHARGE: "1" });
      t.is(await buyOnDyingServer(dying, s.key, s.subjectId, "700"), "SIGKILL");
      const grant = ((await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants as Json[]).find((g) => g.id !== plain.id) as Json;
      // What the crash left: Stripe declined, our commit never happened; the attempt planned a minute ahead.
      t.like(grant, { status: "pending_payment" });
      t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "open", attempt_count: 0, next_payment_attempt: "2026-01-15T00:01:00Z" });
      // The clock passes the plan: dunning charges attempt 1 again with the same key; Stripe answers the same decline.
      await s.advance("2026-01-15T00:02:00Z");
      await endedUnpaid(t, s, grant);
      t.is(fake.paymentIntents().filter((x) => x.idempotency_key === `${grant.invoice_id}:attempt-1`).length, 1, "one PaymentIntent for the key");
      t.deepEqual(await eventsOf(s, grant.invoice_id), await eventsOf(s, plain.invoice_id));
      // Days later nothing more is tried: no retry was planned.
      await s.advance("2026-01-25T00:00:00Z");
      t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "void", attempt_count: 1 });
      t.is(fake.paymentIntents().filter((x) => (x.metadata as Json)?.invoice_id === grant.invoice_id).length, 1);
    },
  );
}
