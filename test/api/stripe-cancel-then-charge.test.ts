/**
 * DESIGN §16: a new attempt on an invoice whose PaymentIntent A waits for the customer cancels A
 * first (payments/waiting.ts); a cancel Stripe confirmed is never forgotten, whatever happens to
 * the charge after it. Through the real server on a port against the fake Stripe, behind a proxy
 * that fails only chosen requests, both stores: a renewal waits on A; a new card is saved in the
 * customer portal;
 * - Stripe's charge fails after the cancel succeeded (503, or unreachable): the invoice no longer
 *   waits on A (recorded as cancelled, no pay link), its next attempt planned; Stripe restored and
 *   the clock advanced, dunning charges it once, to the new card, with attempt 2's key: paid;
 * - the cancel made at Stripe but its answer lost (as if the process died before recording it):
 *   the invoice still waits on A with its next attempt planned; the clock advanced, dunning cancels
 *   A again with the same key and charges once: paid.
 * Completing A afterwards is refused by Stripe: nothing more is charged, nothing refunded.
 * A cancel Stripe refuses (401: the key revoked) leaves the invoice waiting with its next attempt
 * moved 5 minutes ahead: the next dunning runs before then ask nothing (no retry on every run);
 * the key back, dunning cancels and charges once. A cancel of a PaymentIntent Stripe does not
 * know (404 resource_missing) is taken as cancelled: the new card is charged at once, once.
 */
import { randomBytes } from "node:crypto";
import test, { type ExecutionContext } from "ava";
import { STORES } from "../helpers/db.js";
import { stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import type { Scenario } from "../helpers/scenario.js";
import { cancelFront, cancelsOf, intentsOf, paymentState, waitingRenewal } from "../helpers/stripe-waiting.js";
import type { Json } from "../helpers/subjects-api.js";

const SECRETS_KEY = randomBytes(32).toString("base64");

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY, SCHEDULER_INTERVAL_MS: "100" }, cancelFront);

  /**
   * After the clock is advanced past the planned attempt: the invoice paid once, by a PaymentIntent
   * B made with attempt 2's key to the new card; A cancelled, completing it refused, nothing refunded.
   */
  async function paidOnceByNewCard(t: ExecutionContext, s: Scenario, inv: Json, a: Json): Promise<void> {
    const { server, fake } = ctx;
    await s.advance("2026-02-15T00:10:00Z");
    await fake.settle();
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid", attempt_count: 2 });
    const succeeded = intentsOf(fake, inv.id).filter((pi) => pi.status === "succeeded");
    t.is(succeeded.length, 1, "charged exactly once");
    const b = succeeded[0] as Json;
    t.not(b.id, a.id);
    t.not(b.payment_method, a.payment_method, "to the card saved in the portal");
    t.is(b.idempotency_key, `${inv.id}:attempt-2`);
    t.deepEqual(
      intentsOf(fake, inv.id).map((pi) => pi.id),
      [a.id, b.id],
      "no other PaymentIntent",
    );
    t.like(await paymentState(server.db.url, inv.id), { reference: b.id, cancelled: a.id, actionRequired: false, next: null });
    await t.throwsAsync(() => fake.completeAuthentication(a.id), { message: /it awaits no authentication/ });
    await fake.settle();
    t.is(intentsOf(fake, inv.id).filter((pi) => pi.status === "succeeded").length, 1);
    t.deepEqual(
      [...fake.state.refunds.values()].filter((r) => r.payment_intent === a.id || r.payment_intent === b.id),
      [],
    );
  }

  for (const outage of ["503", "unreachable"] as const) {
    test.serial(`${store}: Stripe's charge fails (${outage}) after the cancel of A succeeded: the invoice no longer waits on A, its next attempt planned; charged once later`, async (t) => {
      const { server, fake, front: proxy } = ctx;
      const { s, inv, a } = await waitingRenewal(t, ctx);
      proxy.charges = outage;
      proxy.failed = 0;
      try {
        await stripeDriver(server, fake).replaceCard(s, "visa");
        await fake.settle();
      } finally {
        proxy.charges = undefined;
      }
      t.true(proxy.failed > 0, "the new charge was tried and failed");
      t.deepEqual(cancelsOf(fake, a.id), [[`${inv.id}:attempt-1:cancel`, 200]]);
      t.is(intentsOf(fake, inv.id).find((pi) => pi.id === a.id)?.status, "canceled");
      const open = await s.call("GET", `/invoices/${inv.id}`);
      t.like(open, { status: "open", attempt_count: 1 });
      t.falsy(open.payment_url, "the hosted page no longer points at A");
      t.truthy(open.next_payment_attempt, "its next attempt planned");
      const state = await paymentState(server.db.url, inv.id);
      t.like(state, { reference: a.id, cancelled: a.id, actionRequired: false });
      t.truthy(state.next);
      await paidOnceByNewCard(t, s, inv, a);
      t.deepEqual(cancelsOf(fake, a.id), [[`${inv.id}:attempt-1:cancel`, 200]], "cancelled once");
    });
  }

  test.serial(`${store}: the cancel of A made at Stripe but its answer lost: the invoice waits with its next attempt planned; dunning cancels again with the same key and charges once`, async (t) => {
    const { server, fake, front: proxy } = ctx;
    const { s, inv, a } = await waitingRenewal(t, ctx);
    proxy.cancelAnswerLost = true;
    proxy.failed = 0;
    try {
      await stripeDriver(server, fake).replaceCard(s, "visa");
      await fake.settle();
    } finally {
      proxy.cancelAnswerLost = false;
    }
    t.true(proxy.failed > 0, "a cancel's answer was lost");
    t.is(intentsOf(fake, inv.id).find((pi) => pi.id === a.id)?.status, "canceled", "A cancelled at Stripe");
    t.is(intentsOf(fake, inv.id).length, 1, "nothing charged");
    const waiting = await s.call("GET", `/invoices/${inv.id}`);
    t.like(waiting, { status: "open", attempt_count: 1 });
    t.truthy(waiting.next_payment_attempt, "its next attempt planned");
    await paidOnceByNewCard(t, s, inv, a);
    const keys = cancelsOf(fake, a.id);
    t.true(keys.length >= 2);
    t.true(
      keys.every(([key]) => key === `${inv.id}:attempt-1:cancel`),
      "every cancel with the same key",
    );
  });

  test.serial(
    `${store}: a cancel of A Stripe refuses (401, the key revoked) moves the invoice's next attempt 5 minutes ahead: dunning does not ask again on every run; the key back, cancelled and charged once`,
    async (t) => {
      const { server, fake, front: proxy } = ctx;
      const { s, inv, a } = await waitingRenewal(t, ctx);
      proxy.cancelRefused = true;
      proxy.refused = 0;
      try {
        await stripeDriver(server, fake).replaceCard(s, "visa");
        await fake.settle();
        t.is(proxy.refused, 1, "the cancel was asked and refused");
        const waiting = await s.call("GET", `/invoices/${inv.id}`);
        t.like(waiting, { status: "open", attempt_count: 1, next_payment_attempt: "2026-02-15T00:05:00Z" });
        t.truthy(waiting.payment_url, "still waiting on A");
        t.like(await paymentState(server.db.url, inv.id), { reference: a.id, actionRequired: true });
        // Two dunning runs before the plan: nothing asked.
        await s.advance("2026-02-15T00:02:00Z");
        await s.advance("2026-02-15T00:04:00Z");
        t.is(proxy.refused, 1, "one cancel across two runs, not one per run");
        t.deepEqual(
          intentsOf(fake, inv.id).map((pi) => pi.id),
          [a.id],
          "nothing charged",
        );
      } finally {
        proxy.cancelRefused = false;
      }
      await paidOnceByNewCard(t, s, inv, a);
      t.deepEqual(cancelsOf(fake, a.id), [[`${inv.id}:attempt-1:cancel`, 200]]);
    },
  );

  test.serial(
    `${store}: a cancel of A that Stripe answers 404 resource_missing (no such PaymentIntent) is taken as cancelled: the new card is charged at once, once, the cancel asked once`,
    async (t) => {
      const { server, fake } = ctx;
      const { s, inv, a } = await waitingRenewal(t, ctx);
      // Stripe no longer knows A.
      fake.state.paymentIntents.delete(a.id);
      await stripeDriver(server, fake).replaceCard(s, "visa");
      await fake.settle();
      t.deepEqual(cancelsOf(fake, a.id), [[`${inv.id}:attempt-1:cancel`, 404]]);
      t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid", attempt_count: 2, next_payment_attempt: null });
      const charged = intentsOf(fake, inv.id);
      t.deepEqual(
        charged.map((pi) => [pi.idempotency_key, pi.status]),
        [[`${inv.id}:attempt-2`, "succeeded"]],
        "charged once, to the new card",
      );
      t.like(await paymentState(server.db.url, inv.id), { reference: (charged[0] as Json).id, cancelled: a.id, actionRequired: false, next: null });
      await s.advance("2026-02-15T00:02:00Z");
      await s.advance("2026-02-15T00:04:00Z");
      await fake.settle();
      t.is(cancelsOf(fake, a.id).length, 1, "the cancel asked once");
      t.is(intentsOf(fake, inv.id).length, 1, "no other charge");
    },
  );
}
