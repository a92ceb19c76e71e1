/**
 * DESIGN §16: Stripe's 400 idempotency_error to a charge (its key used before with other
 * parameters) is no refusal: it says an earlier request under that key reached Stripe, whose
 * charge may well have succeeded. Through the real server on a port against the fake Stripe,
 * behind a proxy that loses the answers of chosen charges, both stores: a renewal is charged at
 * Stripe but the answer is lost (the connection dropped after Stripe answered, the library's
 * retries too), so the charge stays planned; its payment_intent.succeeded is late (held). A new
 * card is saved in the portal before it arrives: the invoice is charged at once, under the same
 * key (attempt 1's) with the other card, and Stripe refuses the key reused. The invoice is paid by
 * the PaymentIntent made first (found by its metadata.charge_key): no failed attempt counted, no
 * second charge, and the late webhook then changes nothing (no refund).
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { STORES, withDatabase } from "../helpers/db.js";
import { stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import { outageProxy } from "../helpers/stripe-outage.js";
import type { Json } from "../helpers/subjects-api.js";
import type { FakeStripe } from "../stripe/fake-stripe.js";

const SECRETS_KEY = randomBytes(32).toString("base64");
const usd = (value: string) => ({ currency_code: "USD", value });

const intentsOf = (fake: FakeStripe, invoiceId: string) => fake.paymentIntents().filter((pi) => (pi.metadata as Json)?.invoice_id === invoiceId);

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY, SCHEDULER_INTERVAL_MS: "100" }, outageProxy);

  test.serial(
    `${store}: a charge Stripe refuses as its key reused with other parameters (a new card after an answer lost) is paid by the PaymentIntent made first under that key: no failed attempt, no second charge`,
    async (t) => {
      t.timeout(120_000);
      const { server, fake, front: proxy } = ctx;
      const d = stripeDriver(server, fake);
      const s = await d.start(server);
      const rateCard = await s.card({ fixed_rates: [{ code: "platform", name: "Platform", price: { price_type: "flat", amount: usd("4900") } }] });
      await d.subscribe(s, { rate_card_id: rateCard, fixed_rate_quantities: { platform: 1 } }, "visa");
      await fake.settle();
      // The renewal's charge made at Stripe, every answer lost; its webhook held (late).
      fake.webhookOptions({ outOfOrder: true });
      proxy.outage = "answer-lost";
      proxy.failed = 0;
      let inv: Json;
      try {
        await s.advance("2026-02-15T00:00:00Z");
        inv = (await s.invoices()).at(-1) as Json;
      } finally {
        proxy.outage = undefined;
      }
      t.true(proxy.failed > 0, "the charge's answer was lost");
      const made = intentsOf(fake, inv.id);
      t.deepEqual(
        made.map((pi) => [pi.idempotency_key, pi.status]),
        [[`${inv.id}:attempt-1`, "succeeded"]],
        "charged at Stripe",
      );
      const pi1 = made[0] as Json;
      const planned = await s.call("GET", `/invoices/${inv.id}`);
      t.like(planned, { status: "open", attempt_count: 0 });
      t.truthy(planned.next_payment_attempt, "the charge stays planned");

      // A new card saved before the webhook comes: charged at once under attempt 1's key, with other parameters.
      await d.replaceCard(s, "mastercard");
      const refused = fake.requests().filter((r) => r.operation === "POST /v1/payment_intents" && r.status === 400);
      t.deepEqual(
        refused.map((r) => r.idempotencyKey),
        [`${inv.id}:attempt-1`],
        "Stripe refused the key reused",
      );
      t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid", attempt_count: 1, next_payment_attempt: null });
      const [row] = await withDatabase(server.db.url, (db) => db.dataSource.query("SELECT payment_state AS p FROM invoices WHERE id = ?", [inv.id]));
      const state = JSON.parse(String(row?.p ?? "{}"));
      t.is(state.reference, pi1.id, "paid by the PaymentIntent made first");
      t.falsy(state.refusedByProvider, "no refusal recorded");

      // The late webhook changes nothing.
      fake.webhookOptions({});
      await fake.releaseHeld();
      await fake.settle();
      await s.advance("2026-02-20T00:00:00Z");
      await fake.settle();
      t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid", attempt_count: 1 });
      t.deepEqual(
        intentsOf(fake, inv.id).map((pi) => pi.id),
        [pi1.id],
        "no second charge",
      );
      t.deepEqual(
        [...fake.state.refunds.values()].filter((r) => r.payment_intent === pi1.id),
        [],
        "nothing refunded",
      );
    },
  );
}
