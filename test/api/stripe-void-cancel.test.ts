/**
 * DESIGN §16: a payment left waiting for the customer (Stripe's 3-D Secure: the PaymentIntent waits
 * for their authentication) on an invoice that ends is cancelled at Stripe, so that completing the
 * authentication later charges nothing for an invoice that is void (payments/cancels.ts). Through
 * the real server on a port against the fake Stripe, both stores:
 * - a credit purchase whose charge needs the customer's authentication: its invoice void at once,
 *   its PaymentIntent cancelled once (key `<invoice>:attempt-1:cancel`);
 * - a renewal waiting for the customer, voided or marked uncollectible through the API: its
 *   PaymentIntent cancelled once; the call repeated (its Idempotency-Key replayed, or another
 *   call, refused) cancels nothing more;
 * - the cancel losing the race (the customer authenticated first, Stripe's webhook held): Stripe
 *   refuses the cancel, the payment is refunded once and recorded on the invoice, which stays void;
 *   the webhook that arrives then (twice) refunds nothing more.
 */
import { randomBytes } from "node:crypto";
import test, { type ExecutionContext } from "ava";
import { STORES, withDatabase } from "../helpers/db.js";
import { stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import { cancelFront, cancelRequests, intentsOf, paymentState, refundsOf, waitingInvoice } from "../helpers/stripe-waiting.js";
import type { Json } from "../helpers/subjects-api.js";
import { dbTime } from "../../src/db/raw.js";
import type { FakeStripe } from "../stripe/fake-stripe.js";

const SECRETS_KEY = randomBytes(32).toString("base64");
const usd = (value: string) => ({ currency_code: "USD", value });

/** The invoice's one PaymentIntent at the fake Stripe. */
function intentOf(t: ExecutionContext, fake: FakeStripe, invoiceId: string): Json {
  const intents = intentsOf(fake, invoiceId);
  t.is(intents.length, 1, "one PaymentIntent for the invoice");
  return intents[0] as Json;
}

/** The cancel requests Stripe received for `intentId`: [idempotency key, status, replayed]. */
const cancelsOf = (fake: FakeStripe, intentId: string) => cancelRequests(fake, intentId).map((r) => [r.idempotencyKey, r.status, r.replayed]);

/** The customer comes back and authenticates: refused by Stripe (the PaymentIntent was cancelled), nothing charged. */
async function authenticationRefused(t: ExecutionContext, fake: FakeStripe, intentId: string): Promise<void> {
  await t.throwsAsync(() => fake.completeAuthentication(intentId), { message: /it awaits no authentication/ });
  t.is(fake.state.paymentIntents.get(intentId)?.status, "canceled");
  t.deepEqual(refundsOf(fake, intentId), []);
}

for (const store of STORES) {
  // The scheduler on real time every 100 ms: dunning's sweep of the cancels left pending.
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY, SCHEDULER_INTERVAL_MS: "100" }, cancelFront);

  test.serial(`${store}: a credit purchase whose charge needs the customer's authentication: void, its PaymentIntent cancelled once; authenticating later charges nothing`, async (t) => {
    const { server, fake } = ctx;
    const d = stripeDriver(server, fake);
    const s = await d.start(server);
    await d.replaceCard(s, "authentication");
    const grant = (await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("700"), category: "paid" })).credit_grant as Json;
    t.like(grant, { status: "failed" });
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "void", attempt_count: 1, next_payment_attempt: null, payment_url: null });
    const pi = intentOf(t, fake, grant.invoice_id);
    t.deepEqual(cancelsOf(fake, pi.id), [[`${grant.invoice_id}:attempt-1:cancel`, 200, false]]);
    await authenticationRefused(t, fake, pi.id);
    await fake.settle();
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "failed", remaining_amount: usd("0") });
  });

  for (const action of ["void", "mark_uncollectible"] as const)
    test.serial(`${store}: a renewal waiting for the customer, ${action === "void" ? "voided" : "marked uncollectible"}: its PaymentIntent cancelled once, repeats cancel nothing more`, async (t) => {
      const { server, fake } = ctx;
      const { s, inv } = await waitingInvoice(ctx);
      const pi = intentOf(t, fake, inv.id);
      const send = () =>
        fetch(`${server.url}/invoices/${inv.id}/${action}`, { method: "POST", headers: { "x-api-key": s.key, "content-type": "application/json", "idempotency-key": `end-${inv.id}` }, body: "{}" });
      const first = await send();
      t.is(first.status, 200);
      t.like(await first.json(), { status: action === "void" ? "void" : "uncollectible", payment_url: null, next_payment_attempt: null });
      const again = await send();
      t.is(again.headers.get("idempotent-replayed"), "true");
      await again.body?.cancel();
      t.is((await s.raw("POST", `/invoices/${inv.id}/${action}`, {})).status, 400, "no longer open");
      t.deepEqual(cancelsOf(fake, pi.id), [[`${inv.id}:attempt-1:cancel`, 200, false]]);
      await authenticationRefused(t, fake, pi.id);
      await fake.settle();
      t.like(await s.call("GET", `/invoices/${inv.id}`), { status: action === "void" ? "void" : "uncollectible", attempt_count: 1 });
    });

  test.serial(`${store}: the cancel loses the race (the customer authenticated first): the payment refunded once, the invoice stays void`, async (t) => {
    const { fake } = ctx;
    const { s, inv } = await waitingInvoice(ctx);
    const pi = intentOf(t, fake, inv.id);
    fake.webhookOptions({ outOfOrder: true });
    try {
      // The customer authenticates; Stripe's payment_intent.succeeded is held back.
      await fake.completeAuthentication(pi.id);
      t.like(await s.call("POST", `/invoices/${inv.id}/void`, {}), { status: "void" });
    } finally {
      fake.webhookOptions({});
    }
    t.deepEqual(
      cancelsOf(fake, pi.id).map(([key, status]) => [key, status]),
      [[`${inv.id}:attempt-1:cancel`, 400]],
      "Stripe refused the cancel: the PaymentIntent had succeeded",
    );
    const refunds = refundsOf(fake, pi.id);
    t.deepEqual(
      refunds.map(([, amount]) => amount),
      [pi.amount],
      "refunded in full, once",
    );
    // The held webhook arrives now, then again: nothing more is refunded, the invoice stays void.
    await fake.releaseHeld();
    await fake.settle();
    const succeeded = fake.events().find((e) => e.type === "payment_intent.succeeded" && (e.data as Json).object.id === pi.id) as Json;
    await fake.redeliver(succeeded.id);
    await fake.settle();
    t.deepEqual(refundsOf(fake, pi.id), refunds);
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "void", attempt_count: 1, next_payment_attempt: null });
    // Recorded on the invoice: no cancel pending, the refund of that payment.
    t.like(await paymentState(ctx.server.db.url, inv.id), { cancel: null, refundedAfterEnd: [{ reference: pi.id, refundId: refunds[0]?.[0], amount: String(pi.amount) }], next: null });
    t.is(((await s.call("GET", `/events?types=invoice.paid&limit=100`)).events as Json[]).filter((e) => e.data.id === inv.id).length, 0, "never paid");
  });

  test.serial(`${store}: Stripe unreachable when the renewal is voided: the void stands, the cancel stays pending, and dunning's sweep makes it once, with the same key`, async (t) => {
    const { server, fake, front: proxy } = ctx;
    const { s, inv } = await waitingInvoice(ctx);
    const pi = intentOf(t, fake, inv.id);
    proxy.down = true;
    try {
      t.like(await s.call("POST", `/invoices/${inv.id}/void`, {}), { status: "void", next_payment_attempt: null });
    } finally {
      proxy.down = false;
    }
    t.true(proxy.dropped > 0);
    t.is(fake.state.paymentIntents.get(pi.id)?.status, "requires_payment_method", "not cancelled yet");
    const pending = await paymentState(server.db.url, inv.id);
    t.like(pending, { cancel: { reference: pi.id, key: `${inv.id}:attempt-1:cancel` }, actionRequired: false });
    t.truthy(pending.next, "due for the sweep");
    // Its retry comes due (as five minutes passing would make it): the scheduler's next run cancels it.
    await withDatabase(server.db.url, (db) => db.dataSource.query("UPDATE invoices SET next_payment_attempt = ? WHERE id = ?", [dbTime(new Date(Date.now() - 1000)), inv.id]));
    for (let i = 0; i < 100 && fake.state.paymentIntents.get(pi.id)?.status !== "canceled"; i++) await new Promise((r) => setTimeout(r, 100));
    t.is(fake.state.paymentIntents.get(pi.id)?.status, "canceled");
    for (let i = 0; i < 50 && (await paymentState(server.db.url, inv.id)).cancel; i++) await new Promise((r) => setTimeout(r, 100));
    t.like(await paymentState(server.db.url, inv.id), { cancel: null, cancelled: pi.id, next: null });
    t.deepEqual(cancelsOf(fake, pi.id), [[`${inv.id}:attempt-1:cancel`, 200, false]], "one cancel reached Stripe, with the attempt's key");
    await authenticationRefused(t, fake, pi.id);
  });
}
