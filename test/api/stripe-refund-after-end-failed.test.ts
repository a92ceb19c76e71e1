/**
 * DESIGN §16: a refund of a payment that succeeded on an ended invoice, which Stripe makes
 * `pending` and fails days later, is not kept as money given back (payments/refund-failures.ts).
 * Through the real server on a port against the fake Stripe, both stores: a 49.00 USD renewal
 * whose PaymentIntent A waits for the customer (3-D Secure); the customer completes A (its webhook
 * held) while a credit note credits the invoice to zero: the invoice is paid by the note, A's
 * cancel loses the race, A (4900 cents) is refunded in full, `pending`. The refund names its
 * invoice (metadata environment_id, invoice_id, refund_kind after_end). Stripe then fails it
 * (expired_or_canceled_card): the invoice records it failed, `invoice.refund_failed` is sent once
 * (the invoice, A, the refund, 4900 cents = 49.00, the reason), however often Stripe delivers it;
 * nothing is refunded again on its own (the operator pays the customer back by other means, as
 * for a credit note's failed refund). And a pending refund that succeeds is recorded so, nothing sent.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { STORES } from "../helpers/db.js";
import { useStripeServer } from "../helpers/payment-flows.js";
import type { Scenario } from "../helpers/scenario.js";
import { cancelFront, paymentState, refundsOf, waitingRenewal } from "../helpers/stripe-waiting.js";
import type { Json } from "../helpers/subjects-api.js";
import type { FakeStripe } from "../stripe/fake-stripe.js";

const SECRETS_KEY = randomBytes(32).toString("base64");

/** The customer completes A's authentication; Stripe's payment_intent.succeeded is held back (fake.releaseHeld sends it). */
async function completedHeld(fake: FakeStripe, intentId: string): Promise<void> {
  fake.webhookOptions({ outOfOrder: true });
  try {
    await fake.completeAuthentication(intentId);
  } finally {
    fake.webhookOptions({});
  }
}

/** The invoice.refund_failed events of the scenario's environment about invoice `id`. */
async function refundFailedEvents(s: Scenario, id: string): Promise<Json[]> {
  const events = (await s.call("GET", "/events?types=invoice.refund_failed&limit=100")).events as Json[];
  return events.filter((e) => e.data.invoice_id === id);
}

/** The statuses our webhook answered for Stripe's events of refund `refundId`. */
const answers = (fake: FakeStripe, refundId: string) =>
  fake
    .deliveries()
    .filter((d) => String(d.type).startsWith("refund.") && fake.events().some((e) => e.id === d.eventId && (e.data as Json).object.id === refundId))
    .map((d) => [d.type, d.status]);

/** A renewal of 49.00 paid by a credit note while its PaymentIntent A was completed: A refunded after the invoice ended, pending at Stripe. */
async function refundedPending(t: Parameters<typeof waitingRenewal>[0], ctx: Parameters<typeof waitingRenewal>[1] & { fake: FakeStripe }) {
  const { fake } = ctx;
  const { s, inv, a } = await waitingRenewal(t, ctx);
  await completedHeld(fake, a.id);
  fake.state.refundStatus = "pending";
  await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due" });
  await fake.releaseHeld();
  await fake.settle();
  const refunds = refundsOf(fake, a.id);
  // A refunded in full, once: 4900 cents (49.00).
  t.deepEqual(
    refunds.map(([, amount]) => amount),
    [4900],
  );
  const refundId = String(refunds[0]?.[0]);
  const refund = fake.state.refunds.get(refundId) as Json;
  t.is(refund.status, "pending");
  t.like(refund.metadata, { invoice_id: inv.id, refund_kind: "after_end" });
  t.regex(String(refund.metadata.environment_id), /^env_/);
  t.like(await paymentState(ctx.server.db.url, inv.id), { refundedAfterEnd: [{ reference: a.id, refundId, amount: "4900", pending: true }] });
  return { s, inv, a, refundId };
}

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY, SCHEDULER_INTERVAL_MS: "100" }, cancelFront);

  test.serial(`${store}: a refund after the invoice ended that Stripe fails later is recorded failed and announced once (invoice.refund_failed, 49.00)`, async (t) => {
    const { server, fake } = ctx;
    const { s, inv, a, refundId } = await refundedPending(t, ctx);
    await fake.settleRefund(refundId, "failed", "expired_or_canceled_card");
    await fake.settle();
    t.true(
      answers(fake, refundId).every(([, status]) => status === 200),
      JSON.stringify(answers(fake, refundId)),
    );
    const state = await paymentState(server.db.url, inv.id);
    t.deepEqual(state.refundedAfterEnd, [{ reference: a.id, refundId, amount: "4900", failed: "expired_or_canceled_card" }]);
    const events = await refundFailedEvents(s, inv.id);
    t.is(events.length, 1);
    t.like(events[0]?.data, {
      invoice_id: inv.id,
      subject_id: inv.subject_id,
      kind: "after_end",
      payment_reference: a.id,
      refund_id: refundId,
      amount: { currency_code: "USD", value: "4900" },
      failure_reason: "expired_or_canceled_card",
      invoice: { id: inv.id, status: "paid" },
    });
    // Stripe delivers its events again: nothing more is announced, nothing refunded again.
    for (const e of fake.events().filter((e) => String(e.type).startsWith("refund.") && (e.data as Json).object.id === refundId)) await fake.redeliver(String(e.id));
    await fake.settle();
    t.is((await refundFailedEvents(s, inv.id)).length, 1);
    t.is(refundsOf(fake, a.id).length, 1);
    t.is((await s.call("GET", `/invoices/${inv.id}`)).status, "paid");
  });

  test.serial(`${store}: a refund after the invoice ended that Stripe settles later is recorded no longer pending, nothing announced`, async (t) => {
    const { server, fake } = ctx;
    const { s, inv, a, refundId } = await refundedPending(t, ctx);
    await fake.settleRefund(refundId, "succeeded");
    await fake.settle();
    t.deepEqual((await paymentState(server.db.url, inv.id)).refundedAfterEnd, [{ reference: a.id, refundId, amount: "4900" }]);
    t.is((await refundFailedEvents(s, inv.id)).length, 0);
  });

  test.serial(
    `${store}: a refund after the invoice ended that Stripe fails at once is recorded by its ID: its refund.failed is answered 200 and announced once, not 409 on every delivery`,
    async (t) => {
      const { server, fake } = ctx;
      const { s, inv, a } = await waitingRenewal(t, ctx);
      await completedHeld(fake, a.id);
      (fake.state as { refundStatus: string }).refundStatus = "failed";
      await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due" });
      await fake.releaseHeld();
      await fake.settle();
      const refunds = refundsOf(fake, a.id);
      t.is(refunds.length, 1);
      const refundId = String(refunds[0]?.[0]);
      await fake.settleRefund(refundId, "failed", "expired_or_canceled_card");
      await fake.settle();
      for (let k = 0; k < 2; k++) {
        for (const e of fake.events().filter((e) => String(e.type).startsWith("refund.") && (e.data as Json).object.id === refundId)) await fake.redeliver(String(e.id));
        await fake.settle();
      }
      const [recorded] = (await paymentState(server.db.url, inv.id)).refundedAfterEnd as Json[];
      // Refused at once and named by its ID (it used to be recorded with none, so its events never found it: 409, redelivered for days).
      t.deepEqual([recorded?.refundId, answers(fake, refundId).filter(([, st]) => st !== 200)], [refundId, []]);
      t.is((await refundFailedEvents(s, inv.id)).length, 1);
      t.is(refundsOf(fake, a.id).length, 1);
    },
  );
}
