/**
 * DESIGN §16: an invoice is paid once. A renewal whose charge waits for the customer (Stripe's
 * 3-D Secure: PaymentIntent A waits for their authentication) and is then charged another way must
 * not be payable through A any more, and a payment that succeeds on an invoice paid already is
 * refunded (payments/cancels.ts). Through the real server on a port against the fake Stripe, both
 * stores:
 * - a new card saved in the customer portal charges the invoice (PaymentIntent B): A is cancelled
 *   first, once (key `<invoice>:attempt-1:cancel`); completing A afterwards charges nothing; A
 *   completed before that charge: the cancel's answer (succeeded) pays the invoice, B is never made;
 * - the lost race: the customer completes A (its webhook held back) while B, paid on the hosted
 *   invoice page's pay link, succeeds: A's cancel is refused (it succeeded), A is refunded once, the
 *   invoice paid once by B (one invoice.paid); A's webhook, delivered then and again, refunds nothing more;
 * - Stripe unreachable for that cancel: A's webhook finds the duplicate itself and refunds it once,
 *   which ends the cancel left pending.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { STORES } from "../helpers/db.js";
import { stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import type { Scenario } from "../helpers/scenario.js";
import { cancelFront, cancelsOf, intentsOf, paymentState, refundsOf, waitingRenewal } from "../helpers/stripe-waiting.js";
import type { Json } from "../helpers/subjects-api.js";

const SECRETS_KEY = randomBytes(32).toString("base64");

/** The invoice.paid events of the invoice. */
async function paidEvents(s: Scenario, invoiceId: string): Promise<number> {
  return ((await s.call("GET", "/events?types=invoice.paid&limit=100")).events as Json[]).filter((e) => e.data.id === invoiceId).length;
}

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY, SCHEDULER_INTERVAL_MS: "100" }, cancelFront);

  /** The invoice's PaymentIntents that succeeded. */
  const succeeded = (invoiceId: string) =>
    intentsOf(ctx.fake, invoiceId)
      .filter((pi) => pi.status === "succeeded")
      .map((pi) => String(pi.id));

  test.serial(`${store}: a new card saved in the portal charges the invoice: the PaymentIntent waiting for the customer is cancelled first, once; completing it later charges nothing`, async (t) => {
    const { server, fake } = ctx;
    const { s, inv, a } = await waitingRenewal(t, ctx);
    await stripeDriver(server, fake).replaceCard(s, "visa");
    await fake.settle();
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid", attempt_count: 2, payment_url: null });
    t.deepEqual(cancelsOf(fake, a.id), [[`${inv.id}:attempt-1:cancel`, 200]], "A cancelled once, with its attempt's cancel key");
    const [b] = succeeded(inv.id);
    t.truthy(b);
    t.not(b, a.id);
    t.like(await paymentState(server.db.url, inv.id), { reference: b, cancelled: a.id, actionRequired: false, next: null });
    // The customer comes back to A's authentication: Stripe refuses it, nothing more is charged.
    await t.throwsAsync(() => fake.completeAuthentication(a.id), { message: /it awaits no authentication/ });
    await fake.settle();
    t.deepEqual(succeeded(inv.id), [b]);
    t.deepEqual(
      [...fake.state.refunds.values()].filter((r) => intentsOf(fake, inv.id).some((pi) => pi.id === r.payment_intent)),
      [],
    );
    t.is(await paidEvents(s, inv.id), 1);
  });

  test.serial(
    `${store}: the customer completed A before the portal's new card charges the invoice: the cancel answers that A succeeded, which pays it; nothing else is charged nor refunded`,
    async (t) => {
      const { server, fake } = ctx;
      const { s, inv, a } = await waitingRenewal(t, ctx);
      fake.webhookOptions({ outOfOrder: true });
      try {
        await fake.completeAuthentication(a.id);
      } finally {
        fake.webhookOptions({});
      }
      await stripeDriver(server, fake).replaceCard(s, "visa");
      t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid", attempt_count: 1, payment_url: null });
      t.deepEqual(cancelsOf(fake, a.id), [[`${inv.id}:attempt-1:cancel`, 400]]);
      t.deepEqual(succeeded(inv.id), [a.id], "no second charge");
      await fake.releaseHeld();
      await fake.settle();
      t.deepEqual(refundsOf(fake, a.id), []);
      t.like(await paymentState(server.db.url, inv.id), { reference: a.id, next: null });
      t.is(await paidEvents(s, inv.id), 1);
    },
  );

  test.serial(
    `${store}: the lost race: A completed with its webhook held back while B pays the invoice: A refunded once, the invoice paid once; A's webhook, again, refunds nothing more`,
    async (t) => {
      const { server, fake } = ctx;
      const { s, inv, a } = await waitingRenewal(t, ctx);
      fake.webhookOptions({ outOfOrder: true });
      try {
        // The customer authenticates A; Stripe's payment_intent.succeeded is held back.
        await fake.completeAuthentication(a.id);
      } finally {
        fake.webhookOptions({});
      }
      // Meanwhile the invoice is paid on its hosted page's pay link (PaymentIntent B), its webhooks delivered.
      await stripeDriver(server, fake).completePayment(s, inv.hosted_url, "mastercard");
      t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid", attempt_count: 1, payment_url: null });
      const b = succeeded(inv.id).find((id) => id !== a.id);
      t.truthy(b);
      t.deepEqual(cancelsOf(fake, a.id), [[`${inv.id}:attempt-1:cancel`, 400]], "Stripe refused the cancel: A had succeeded");
      const refunds = refundsOf(fake, a.id);
      t.deepEqual(
        refunds.map(([, amount]) => amount),
        [a.amount],
        "A refunded in full, once",
      );
      t.deepEqual(refundsOf(fake, String(b)), [], "B, which paid the invoice, kept");
      // A's held webhook arrives now, then again: nothing more is refunded, the invoice paid once.
      await fake.releaseHeld();
      await fake.settle();
      const event = fake.events().find((e) => e.type === "payment_intent.succeeded" && (e.data as Json).object.id === a.id) as Json;
      await fake.redeliver(event.id);
      await fake.settle();
      t.deepEqual(refundsOf(fake, a.id), refunds);
      t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid", attempt_count: 1 });
      t.like(await paymentState(server.db.url, inv.id), {
        reference: b,
        cancel: null,
        refundedAfterEnd: [{ reference: a.id, refundId: refunds[0]?.[0], amount: String(a.amount) }],
        next: null,
      });
      t.is(await paidEvents(s, inv.id), 1, "invoice.paid once");
    },
  );

  test.serial(`${store}: Stripe unreachable for the cancel after the pay link paid: A's webhook refunds the duplicate once, and the pending cancel ends with it`, async (t) => {
    const { server, fake, front: proxy } = ctx;
    const { s, inv, a } = await waitingRenewal(t, ctx);
    fake.webhookOptions({ outOfOrder: true });
    try {
      await fake.completeAuthentication(a.id);
    } finally {
      fake.webhookOptions({});
    }
    proxy.down = true;
    try {
      await stripeDriver(server, fake).completePayment(s, inv.hosted_url, "mastercard");
    } finally {
      proxy.down = false;
    }
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid" });
    t.like(await paymentState(server.db.url, inv.id), { cancel: { reference: a.id, key: `${inv.id}:attempt-1:cancel` } }, "the cancel left pending");
    t.deepEqual(refundsOf(fake, a.id), []);
    // A's webhook arrives (twice): A is refunded once, by it.
    await fake.releaseHeld();
    await fake.settle();
    const event = fake.events().find((e) => e.type === "payment_intent.succeeded" && (e.data as Json).object.id === a.id) as Json;
    await fake.redeliver(event.id);
    await fake.settle();
    const refunds = refundsOf(fake, a.id);
    t.deepEqual(
      refunds.map(([, amount]) => amount),
      [a.amount],
    );
    t.like(await paymentState(server.db.url, inv.id), { cancel: null, refundedAfterEnd: [{ reference: a.id, refundId: refunds[0]?.[0] }], next: null });
    t.deepEqual(cancelsOf(fake, a.id), [], "no cancel reached Stripe; none is left to make");
    t.is(await paidEvents(s, inv.id), 1);
  });
}
