/**
 * DESIGN §16: a payment that succeeds on an invoice that ended is refunded in full, once, and only
 * then (payments/cancels.ts, provider-events.ts). Through the real server on a port against the
 * fake Stripe, both stores, a renewal whose PaymentIntent A waits for the customer (3-D Secure):
 * - a credit note crediting it to zero pays it and cancels A (key `<invoice>:attempt-1:cancel`), as
 *   a void does; A completed first (its webhook held), A is refunded; Stripe unreachable for that
 *   cancel, A's webhook refunds it (A is not the payment that paid the invoice);
 * - A completed after its amount due was lowered (arranged in the database: a partial credit note
 *   is refused while A waits), the invoice then voided: A is refunded in full (what Stripe took),
 *   not the amount due, keyed `<invoice>:refund-after-end:<A>:full`;
 * - the invoice voided while A's webhook waits for its row lock: A is refunded, not kept;
 * - A refunded by hand at Stripe before the void: Stripe's refusal (charge_already_refunded) is
 *   recorded, the cancel no longer pending, A's webhook answered 200;
 * and a renewal paid off-session whose invoice stores no payment (paid before payments were
 * recorded): its payment_intent.succeeded, redelivered or new, refunds nothing.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { STORES, withDatabase } from "../helpers/db.js";
import { STRIPE_SECRET_KEY, useStripeServer } from "../helpers/payment-flows.js";
import { cancelFront, cancelsOf, intentsOf, paymentState, refundsOf, renewal, succeededEvent, waitingRenewal } from "../helpers/stripe-waiting.js";
import type { FakeStripe } from "../stripe/fake-stripe.js";

const SECRETS_KEY = randomBytes(32).toString("base64");
const usd = (value: string) => ({ currency_code: "USD", value });

/** The customer completes A's authentication; Stripe's payment_intent.succeeded is held back (fake.releaseHeld sends it). */
async function completedHeld(fake: FakeStripe, intentId: string): Promise<void> {
  fake.webhookOptions({ outOfOrder: true });
  try {
    await fake.completeAuthentication(intentId);
  } finally {
    fake.webhookOptions({});
  }
}

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY, SCHEDULER_INTERVAL_MS: "100" }, cancelFront);

  test.serial(`${store}: a credit note crediting a renewal waiting for the customer to zero pays it and cancels A once; authenticating later charges nothing`, async (t) => {
    const { server, fake } = ctx;
    const { s, inv, a } = await waitingRenewal(t, ctx);
    await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due" });
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid", amount_due: usd("0"), payment_url: null });
    t.deepEqual(cancelsOf(fake, a.id), [[`${inv.id}:attempt-1:cancel`, 200]], "A cancelled once, with its attempt's cancel key");
    t.like(await paymentState(server.db.url, inv.id), { cancel: null, cancelled: a.id, actionRequired: false, next: null });
    await t.throwsAsync(() => fake.completeAuthentication(a.id), { message: /it awaits no authentication/ });
    await fake.settle();
    t.is(fake.state.paymentIntents.get(a.id)?.status, "canceled");
    t.deepEqual(refundsOf(fake, a.id), []);
  });

  test.serial(`${store}: A completed before the credit note that credits it to zero: the cancel finds A succeeded, A refunded in full once; its webhook, twice, refunds nothing more`, async (t) => {
    const { server, fake } = ctx;
    const { s, inv, a } = await waitingRenewal(t, ctx);
    await completedHeld(fake, a.id);
    await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due" });
    t.deepEqual(cancelsOf(fake, a.id), [[`${inv.id}:attempt-1:cancel`, 400]], "Stripe refused the cancel: A had succeeded");
    const refunds = refundsOf(fake, a.id);
    t.deepEqual(
      refunds.map(([, amount]) => amount),
      [a.amount],
    );
    await fake.releaseHeld();
    await fake.settle();
    await fake.redeliver(succeededEvent(fake, a.id).id);
    await fake.settle();
    t.deepEqual(refundsOf(fake, a.id), refunds);
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid", amount_due: usd("0") });
    t.like(await paymentState(server.db.url, inv.id), { cancel: null, refundedAfterEnd: [{ reference: a.id, refundId: refunds[0]?.[0], amount: String(a.amount) }], next: null });
  });

  test.serial(`${store}: Stripe unreachable for the credit note's cancel: A's webhook refunds A (it paid nothing), once, and ends the pending cancel`, async (t) => {
    const { server, fake, front: proxy } = ctx;
    const { s, inv, a } = await waitingRenewal(t, ctx);
    await completedHeld(fake, a.id);
    proxy.down = true;
    try {
      await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due" });
    } finally {
      proxy.down = false;
    }
    t.like(await paymentState(server.db.url, inv.id), { reference: a.id, actionRequired: false, cancel: { reference: a.id, key: `${inv.id}:attempt-1:cancel` } }, "the cancel left pending");
    await fake.releaseHeld();
    await fake.settle();
    await fake.redeliver(succeededEvent(fake, a.id).id);
    await fake.settle();
    const refunds = refundsOf(fake, a.id);
    t.deepEqual(
      refunds.map(([, amount]) => amount),
      [a.amount],
      "A refunded in full, once",
    );
    t.like(await paymentState(server.db.url, inv.id), { cancel: null, refundedAfterEnd: [{ reference: a.id, refundId: refunds[0]?.[0] }], next: null });
  });

  test.serial(`${store}: A completed after its amount due was lowered, the invoice then voided: A refunded in full (what Stripe took), not the amount due`, async (t) => {
    const { server, fake } = ctx;
    const { s, inv, a } = await waitingRenewal(t, ctx);
    // Lowered in the database: a partial credit note is refused while A waits (stripe-credit-note-payments.test.ts).
    await withDatabase(server.db.url, (db) => db.dataSource.query("UPDATE invoices SET amount_due = '3900' WHERE id = ?", [inv.id]));
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "open", amount_due: usd("3900") });
    await completedHeld(fake, a.id);
    t.like(await s.call("POST", `/invoices/${inv.id}/void`, {}), { status: "void" });
    const refunds = refundsOf(fake, a.id);
    t.deepEqual(
      refunds.map(([, amount]) => amount),
      [4900],
      "all of A, 4900",
    );
    t.deepEqual(
      fake
        .requests()
        .filter((r) => r.operation === "POST /v1/refunds")
        .map((r) => r.idempotencyKey)
        .filter((k) => String(k).startsWith(`${inv.id}:`)),
      [`${inv.id}:refund-after-end:${a.id}:full`],
    );
    await fake.releaseHeld();
    await fake.settle();
    t.deepEqual(refundsOf(fake, a.id), refunds);
    t.like(await paymentState(server.db.url, inv.id), { cancel: null, refundedAfterEnd: [{ reference: a.id, refundId: refunds[0]?.[0], amount: "4900" }], next: null });
  });

  test.serial(`${store}: the invoice voided while A's webhook waits for its row lock: A refunded, not kept`, async (t) => {
    const { server, fake } = ctx;
    const { s, inv, a } = await waitingRenewal(t, ctx);
    await completedHeld(fake, a.id);
    // The invoice's row held by another transaction, which voids it once A's webhook waits for that row.
    const { delivering } = await withDatabase(server.db.url, (db) =>
      db.sql.transaction(async (em) => {
        await em.query("UPDATE invoices SET updated_at = updated_at WHERE id = ?", [inv.id]);
        const delivering = fake.releaseHeld();
        if (store === "mysql") {
          for (let i = 0; i < 200; i++) {
            const [w] = await withDatabase(server.db.url, (other) => other.dataSource.query("SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'"));
            if (Number(w.n) > 0) break;
            await new Promise((r) => setTimeout(r, 25));
          }
        } else await new Promise((r) => setTimeout(r, 400));
        await em.query("UPDATE invoices SET status = 'void' WHERE id = ?", [inv.id]);
        return { delivering };
      }),
    );
    await delivering;
    await fake.settle();
    const refunds = refundsOf(fake, a.id);
    t.deepEqual(
      refunds.map(([, amount]) => amount),
      [a.amount],
      "A refunded once",
    );
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "void" });
    t.like(await paymentState(server.db.url, inv.id), { refundedAfterEnd: [{ reference: a.id, refundId: refunds[0]?.[0] }] });
  });

  test.serial(`${store}: A refunded by hand at Stripe before the void: Stripe's refusal recorded, the cancel no longer pending, A's webhook answered 200`, async (t) => {
    const { server, fake } = ctx;
    const { s, inv, a } = await waitingRenewal(t, ctx);
    await completedHeld(fake, a.id);
    const byHand = await fetch(`${fake.url}/v1/refunds`, {
      method: "POST",
      headers: { authorization: `Bearer ${STRIPE_SECRET_KEY}`, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ payment_intent: String(a.id) }).toString(),
    });
    t.is(byHand.status, 200);
    const refunds = refundsOf(fake, a.id);
    t.like(await s.call("POST", `/invoices/${inv.id}/void`, {}), { status: "void" });
    t.deepEqual(refundsOf(fake, a.id), refunds, "no second refund");
    const state = await paymentState(server.db.url, inv.id);
    t.like(state, { cancel: null, refundedAfterEnd: [{ reference: a.id, refundId: null, amount: null }], next: null }, "refused for good: not asked again");
    t.regex(String(state.refundedAfterEnd?.[0]?.refused), /already been refunded/);
    await fake.releaseHeld();
    await fake.settle();
    const event = succeededEvent(fake, a.id);
    t.deepEqual(
      fake
        .deliveries()
        .filter((d) => d.eventId === event.id)
        .map((d) => d.status),
      [200],
    );
    t.deepEqual(refundsOf(fake, a.id), refunds);
  });

  test.serial(`${store}: a paid invoice storing no payment (paid before payments were recorded): its payment's webhook, redelivered or new, refunds nothing`, async (t) => {
    const { server, fake } = ctx;
    const { inv } = await renewal(ctx, "visa");
    t.is(inv.status, "paid");
    const [pi] = intentsOf(fake, inv.id).filter((x) => x.status === "succeeded");
    t.truthy(pi);
    const event = succeededEvent(fake, String(pi?.id));
    t.truthy(event);
    await withDatabase(server.db.url, (db) => db.dataSource.query("UPDATE invoices SET payment_state = ? WHERE id = ?", [JSON.stringify({ provider: "stripe" }), inv.id]));
    await fake.redeliver(event.id);
    await fake.settle();
    t.deepEqual(refundsOf(fake, String(pi?.id)), [], "a repeat: nothing done");
    // As a new event (never recorded): no payment stored to tell it from a duplicate, so not refunded.
    await withDatabase(server.db.url, (db) => db.dataSource.query("DELETE FROM provider_events WHERE event_id = ?", [event.id]));
    await fake.redeliver(event.id);
    await fake.settle();
    t.deepEqual(refundsOf(fake, String(pi?.id)), []);
    t.true(
      fake
        .deliveries()
        .filter((d) => d.eventId === event.id)
        .every((d) => d.status === 200),
    );
  });
}
