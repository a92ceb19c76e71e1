/**
 * Amounts Stripe is asked for, in currencies whose Stripe unit is not ISO 4217's (DESIGN §13,
 * §16; src/providers/stripe/amounts.ts), both stores, the real server on a port, the official
 * `stripe` library against the local Stripe-compatible server (test/stripe/fake-stripe.ts). The
 * service holds ISO minor units: 5,000 ISK is 5000 (ISO has no øre), ¥500 is 500, 5.120 KWD is
 * 5120. Stripe takes ISK as two-decimal (5,000 ISK: 5000 × 100 = 500000), JPY as zero-decimal
 * (500 × 1), KWD as three-decimal with its last digit 0 (5120 × 1). A renewal charges that
 * amount, the invoice is paid, and a credit note's refund is asked in Stripe's unit too (1,000 ISK:
 * 1000 × 100 = 100000). MGA is two-decimal in ISO and zero-decimal at Stripe (1,500.00 MGA:
 * 150000 ÷ 100 = 1500). A KWD amount Stripe cannot take (5.125 KWD: last digit 5) is not sent,
 * rounded or not: the attempt fails with Stripe's rule as its message, no PaymentIntent made.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { STORES } from "../helpers/db.js";
import { stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import { intentsOf, paymentState } from "../helpers/stripe-waiting.js";
import type { Json } from "../helpers/subjects-api.js";

// [currency, the monthly price in ISO minor units, what Stripe is asked for, the arithmetic]
const CASES: [string, string, number, string][] = [
  ["ISK", "5000", 500000, "5,000 ISK: ISO 0 digits, Stripe two-decimal → 5000 × 100"],
  ["JPY", "500", 500, "¥500: ISO 0, Stripe zero-decimal → 500 × 1"],
  ["KWD", "5120", 5120, "5.120 KWD: ISO 3, Stripe 3 ending in 0 → 5120 × 1"],
  ["MGA", "150000", 1500, "1,500.00 MGA: ISO 2, Stripe zero-decimal → 150000 ÷ 100"],
];

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: randomBytes(32).toString("base64") });

  /** A subject on Stripe subscribed monthly at `amount` of `currency` (visa), its renewal charged: the scenario and that invoice. */
  async function renewal(currency: string, amount: string) {
    const { server, fake } = ctx;
    const d = stripeDriver(server, fake);
    const s = await d.start(server);
    const rateCard = await s.card({ fixed_rates: [{ code: "platform", name: "Platform", price: { price_type: "flat", amount: { currency_code: currency, value: amount } } }] });
    await d.subscribe(s, { rate_card_id: rateCard, fixed_rate_quantities: { platform: 1 } }, "visa");
    await s.advance("2026-02-15T00:00:00Z");
    await fake.settle();
    const invoices = await s.invoices();
    return { s, d, invoices, inv: (await s.call("GET", `/invoices/${(invoices.at(-1) as Json).id}`)) as Json };
  }

  test.serial(`${store}: ISK, JPY, KWD and MGA invoices are charged Stripe's amount (${CASES.map((c) => c[3]).join("; ")}) and paid`, async (t) => {
    for (const [currency, amount, stripeAmount] of CASES) {
      const { s, invoices, inv } = await renewal(currency, amount);
      for (const i of invoices) {
        t.like(i, { status: "paid", total_amount: { currency_code: currency, value: amount }, amount_due: { value: amount } }, JSON.stringify(i));
        const intents = intentsOf(ctx.fake, i.id);
        t.is(intents.length, 1, `${currency}: one PaymentIntent`);
        t.like(intents[0], { status: "succeeded", currency: currency.toLowerCase(), amount: stripeAmount, amount_received: stripeAmount }, currency);
      }
      if (currency !== "ISK") continue;
      // A credit note's refund of 1,000 ISK: 1000 × 100 = 100000 at Stripe.
      const note = await s.raw("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "refund", amount: "1000" });
      t.is(note.status, 200, JSON.stringify(note.body));
      const pi = intentsOf(ctx.fake, inv.id)[0] as Json;
      const refunds = [...ctx.fake.state.refunds.values()].filter((r) => r.payment_intent === pi.id).map((r) => r.amount);
      t.deepEqual(refunds, [100000]);
    }
  });

  test.serial(`${store}: a KWD amount Stripe cannot take (5.125 KWD: last digit 5) is not sent, rounded or not; the attempt fails saying why`, async (t) => {
    const { server } = ctx;
    const { inv } = await renewal("KWD", "5125");
    t.like(inv, { status: "open", total_amount: { currency_code: "KWD", value: "5125" } }, JSON.stringify(inv));
    t.is(intentsOf(ctx.fake, inv.id).length, 0, "no PaymentIntent: nothing asked of Stripe");
    const state = await paymentState(server.db.url, inv.id);
    t.is(state.lastError, "Stripe cannot take 5.125 KWD: its KWD amounts are whole multiples of 0.010 KWD.");
    t.true(state.refusedByProvider);
  });
}
