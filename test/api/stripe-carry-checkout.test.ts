/**
 * DESIGN §16, through the real server on a port against the fake Stripe, both stores: a checkout
 * quotes what completing it charges, with the subject's amount carried below Stripe's minimum
 * charge (payments/carries.ts) that the completion's invoice takes. A 4,900 renewal with 4,870 of
 * credit applied leaves 30 due on Feb 15, carried; the subscription is cancelled and the subject
 * subscribes to a 1,000 card through a hosted checkout: the page says "Due today: USD 10.30"
 * (1,000 + the 30 carried in) and the session's amount is 1,030, as Stripe then charges 1,030.
 * The old code quoted USD 10.00 (amount 1,000) and charged 10.30.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { STORES, withDatabase } from "../helpers/db.js";
import { stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import type { Json } from "../helpers/subjects-api.js";

const SECRETS_KEY = randomBytes(32).toString("base64");
const usd = (value: string) => ({ currency_code: "USD", value });
const CALLBACKS = { success_url: "https://app.example/ok", cancelled_url: "https://app.example/no" };

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY, SCHEDULER_INTERVAL_MS: "100" });

  test.serial(`${store}: a checkout quotes the 30 carried pending: due today 1,000 + 30 = USD 10.30, as completing it charges`, async (t) => {
    t.timeout(180_000);
    const { server, fake } = ctx;
    const d = stripeDriver(server, fake);
    const s = await d.start(server);
    const platform = await s.card({ fixed_rates: [{ code: "platform", name: "Platform", price: { price_type: "flat", amount: usd("4900") } }] });
    await d.subscribe(s, { rate_card_id: platform, fixed_rate_quantities: { platform: 1 } }, "visa");
    await fake.settle();
    const subs = (await s.call("GET", `/subscriptions?subject_id=${s.subjectId}`)) as Json;
    const sub = (subs.subscriptions ?? subs.items ?? subs.data)[0].id;
    await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("4870"), category: "promotional" });
    // Feb 15: 4,900 − 4,870 of credit = 30 due, below Stripe's 0.50: carried.
    await s.advance("2026-02-15T00:00:00Z");
    await fake.settle();
    const feb = (await s.invoices()).at(-1) as Json;
    t.like(await s.call("GET", `/invoices/${feb.id}`), { status: "paid", amount_carried: usd("30") });
    await s.call("POST", `/subscriptions/${sub}/cancel`, {});
    t.like((await s.call("GET", `/customer-access/${s.subjectId}/billing-state`)) as Json, { carried_balance: [usd("30")] });

    const basic = await s.card({ fixed_rates: [{ code: "basic", name: "Basic", price: { price_type: "flat", amount: usd("1000") } }] });
    const r = await s.call("POST", "/subscriptions", {
      subject_id: s.subjectId,
      rate_card_id: basic,
      fixed_rate_quantities: { basic: 1 },
      create_checkout_session: "always",
      checkout_callback_urls: CALLBACKS,
    });
    const url = new URL(r.result.action.checkout_url as string);
    const page = await (await fetch(`${server.url}${url.pathname}${url.search}`)).text();
    // 1,000 + the 30 carried in = 1,030: USD 10.30 (the old code: USD 10.00).
    t.regex(page, /Due today: <strong>USD 10\.30<\/strong>/);
    t.regex(page, new RegExp(`Balance carried from ${feb.number} \\(below the minimum charge\\)`));
    const kept = await withDatabase(server.db.url, (db) =>
      db.dataSource.query("SELECT amount_due FROM checkout_sessions WHERE subject_id = ? AND kind = 'subscribe' ORDER BY seq DESC LIMIT 1", [s.subjectId]),
    );
    t.deepEqual(
      kept.map((k: Json) => String(Number(k.amount_due))),
      ["1030"],
      "the session's amount as it opened",
    );

    // Completing it: the first invoice takes the 30, Stripe charges 1,030, as quoted.
    await d.subscribe(s, { rate_card_id: basic, fixed_rate_quantities: { basic: 1 } }, "visa");
    await fake.settle();
    const next = (await s.invoices()).at(-1) as Json;
    t.like(next, { status: "paid", total_amount: usd("1000"), amount_carried_in: usd("30"), amount_due: usd("1030") });
    t.deepEqual(
      fake
        .paymentIntents()
        .filter((pi) => (pi.metadata as Json)?.invoice_id === next.id)
        .map((pi) => [pi.status, pi.amount]),
      [["succeeded", 1030]],
    );
  });
}
