/**
 * DESIGN §16: a credit note and the payments of its invoice (credit-notes.ts, payments/cancels.ts,
 * provider-events.ts). Through the real server on a port against the fake Stripe, both stores:
 * - a renewal waiting for the customer (3-D Secure, PaymentIntent A for the full amount) takes no
 *   reduce_amount_due for less than its amount due (400 INVOICE_PAYMENT_WAITS_FOR_CUSTOMER naming
 *   `outcome`), so the customer never pays the old amount; nothing is written;
 * - an invoice credited to zero while the answer of its charge was lost (no payment stored): the
 *   note is recorded as what paid it (paidBy: credit_note), and that charge's payment_intent.succeeded
 *   refunds it in full, keyed `<invoice>:refund-after-end:<payment>:full`;
 * - A's payment_intent.succeeded read the invoice waiting on A, and by the time it holds the row
 *   lock the invoice no longer waits on it (A cancelled for a new charge, arranged here in the
 *   database under the lock): the webhook answers 500, the event not recorded, and its redelivery
 *   pays the open invoice with A instead of keeping A recorded nowhere.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { reasonOf, violatedFields } from "../helpers/clients.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { useStripeServer } from "../helpers/payment-flows.js";
import { intentsOf, paymentState, refundsOf, renewal, succeededEvent, waitingRenewal } from "../helpers/stripe-waiting.js";
import type { FakeStripe } from "../stripe/fake-stripe.js";

const SECRETS_KEY = randomBytes(32).toString("base64");
const usd = (value: string) => ({ currency_code: "USD", value });

/** The refunded amounts of `intentId` at the fake Stripe. */
const refundedOf = (fake: FakeStripe, intentId: string) => refundsOf(fake, intentId).map(([, amount]) => amount);
const statusesOf = (fake: FakeStripe, eventId: string) =>
  fake
    .deliveries()
    .filter((d) => d.eventId === eventId)
    .map((d) => d.status);

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY, SCHEDULER_INTERVAL_MS: "100" });

  test.serial(`${store}: a partial reduce_amount_due on a renewal waiting for the customer is refused (400 naming outcome), nothing written; the full amount is taken`, async (t) => {
    const { s, inv } = await waitingRenewal(t, ctx);
    const r = await s.raw("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due", amount: "1000" });
    t.is(r.status, 400);
    t.is(r.body.code, "failed_precondition");
    t.is(reasonOf(r.body), "INVOICE_PAYMENT_WAITS_FOR_CUSTOMER");
    t.deepEqual(violatedFields(r.body), ["outcome"]);
    t.regex(String(r.body.message), /void the invoice or let that payment finish first, or credit the full amount due/);
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "open", amount_due: usd("4900") });
    t.deepEqual(await s.call("GET", `/credit-notes?invoice_id=${inv.id}`).then((r) => r.credit_notes), []);
    await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due", amount: "4900" });
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid", amount_due: usd("0") });
  });

  test.serial(`${store}: an invoice credited to zero while its charge's answer was lost: that charge's webhook refunds it in full, keyed :full`, async (t) => {
    const { server, fake } = ctx;
    const { s, inv } = await renewal(ctx, "visa");
    const [pi] = intentsOf(fake, inv.id).filter((x) => x.status === "succeeded");
    const event = succeededEvent(fake, String(pi?.id));
    t.truthy(event);
    // The charge's answer lost: the invoice still open with no payment stored, the event not handled yet.
    await withDatabase(server.db.url, async (db) => {
      await db.dataSource.query("UPDATE invoices SET status = 'open', payment_state = ? WHERE id = ?", [JSON.stringify({ provider: "stripe" }), inv.id]);
      await db.dataSource.query("DELETE FROM provider_events WHERE event_id = ?", [event.id]);
    });
    await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due" });
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid", amount_due: usd("0") });
    t.like(await paymentState(server.db.url, inv.id), { paidBy: "credit_note" });
    await fake.redeliver(event.id);
    await fake.settle();
    t.deepEqual(refundedOf(fake, String(pi?.id)), [pi?.amount], "refunded in full, once");
    const keys = fake
      .requests()
      .filter((r) => r.operation === "POST /v1/refunds")
      .map((r) => r.idempotencyKey);
    t.deepEqual(keys, [`${inv.id}:refund-after-end:${pi?.id}:full`]);
    await fake.redeliver(event.id);
    await fake.settle();
    t.deepEqual(refundedOf(fake, String(pi?.id)), [pi?.amount], "a repeat refunds nothing more");
    t.like(await paymentState(server.db.url, inv.id), { paidBy: "credit_note", refundedAfterEnd: [{ reference: pi?.id }] });
  });

  test.serial(`${store}: A's webhook finds the invoice no longer waiting on A under its row lock: 500, not recorded, and its redelivery pays the invoice with A`, async (t) => {
    const { server, fake } = ctx;
    const { s, inv, a } = await waitingRenewal(t, ctx);
    fake.webhookOptions({ outOfOrder: true });
    try {
      await fake.completeAuthentication(a.id);
    } finally {
      fake.webhookOptions({});
    }
    const event = succeededEvent(fake, a.id);
    // Under the invoice's row lock, once A's webhook waits for it: A cancelled for a new charge (waiting.ts step 2), the plan kept.
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
        const [row] = await em.query("SELECT payment_state AS p FROM invoices WHERE id = ?", [inv.id]);
        const p = { ...JSON.parse(String(row.p)), actionRequired: false, actionUrl: null, cancelled: a.id };
        await em.query("UPDATE invoices SET payment_state = ? WHERE id = ?", [JSON.stringify(p), inv.id]);
        return { delivering };
      }),
    );
    await delivering;
    await fake.settle();
    t.deepEqual(statusesOf(fake, event.id), [500], "not acknowledged: Stripe delivers it again");
    const [rec] = await withDatabase(server.db.url, (db) => db.dataSource.query("SELECT COUNT(*) AS n FROM provider_events WHERE event_id = ?", [event.id]));
    t.is(Number(rec.n), 0, "the event not recorded");
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "open" });
    await fake.redeliver(event.id);
    await fake.settle();
    t.deepEqual(statusesOf(fake, event.id), [500, 200]);
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid" });
    t.like(await paymentState(server.db.url, inv.id), { reference: a.id });
    t.deepEqual(refundedOf(fake, a.id), []);
  });
}
