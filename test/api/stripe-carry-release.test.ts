/**
 * DESIGN §16, through the real server on a port against the fake Stripe, both stores: what becomes
 * of an amount carried below Stripe's minimum charge (payments/carries.ts) when the invoice that
 * took it ends without collecting it, and what a checkout quotes while one is pending.
 * A 4,900 renewal with 4,870 of credit applied leaves 30 due on Feb 15, carried (Stripe refuses
 * it: amount_too_small). Mar 15's renewal takes it: 4,900 + 30 = 4,930 due; its card declines.
 * - Voided, Mar's invoice collects nothing: the 30 is owed again (billing state), and Apr 15's
 *   renewal takes it: 4,900 + 30 = 4,930 due, charged 4,930. The old code kept the debit taken by
 *   the void invoice: the 30 was lost, April charged 4,900.
 * - Written off (uncollectible), Mar's invoice keeps it: April charges 4,900.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { STORES, withDatabase } from "../helpers/db.js";
import { stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import type { Scenario } from "../helpers/scenario.js";
import type { Json } from "../helpers/subjects-api.js";
import type { FakeStripe } from "../stripe/fake-stripe.js";

const SECRETS_KEY = randomBytes(32).toString("base64");
const usd = (value: string) => ({ currency_code: "USD", value });
const amountsOf = (fake: FakeStripe, id: string) =>
  fake
    .paymentIntents()
    .filter((pi) => (pi.metadata as Json)?.invoice_id === id)
    .map((pi) => [pi.status, pi.amount]);
/** The carried debits of invoice `id` as stored: [amount, the invoice that took it]. */
async function carriedOf(url: string, id: string): Promise<[string, string | null][]> {
  const rows = await withDatabase(url, (db) => db.dataSource.query("SELECT amount, applied_invoice_id AS a FROM carried_debits WHERE source_invoice_id = ?", [id]));
  return rows.map((r: Json) => [String(Number(r.amount)), r.a ?? null]);
}
const pendingOf = async (s: Scenario) => ((await s.call("GET", `/customer-access/${s.subjectId}/billing-state`)) as Json).carried_balance;

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY, SCHEDULER_INTERVAL_MS: "100" });

  /** A subject subscribed on Jan 15 at 4,900 a month with a Visa (one retry after 3 days), 4,870 of credit granted, advanced to Feb 15: 30 carried. */
  async function carried(): Promise<{ s: Scenario; sub: string; feb: Json }> {
    const { server, fake } = ctx;
    const d = stripeDriver(server, fake);
    const s = await d.start(server);
    await s.call("PATCH", "/payment-settings", { retry_schedule_days: [3], set_retry_schedule: true, after_last_attempt: "cancel", mark_uncollectible: true });
    const rateCard = await s.card({ fixed_rates: [{ code: "platform", name: "Platform", price: { price_type: "flat", amount: usd("4900") } }] });
    await d.subscribe(s, { rate_card_id: rateCard, fixed_rate_quantities: { platform: 1 } }, "visa");
    await fake.settle();
    const subs = (await s.call("GET", `/subscriptions?subject_id=${s.subjectId}`)) as Json;
    const sub = (subs.subscriptions ?? subs.items ?? subs.data)[0].id;
    await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("4870"), category: "promotional" });
    await s.advance("2026-02-15T00:00:00Z");
    await fake.settle();
    return { s, sub, feb: (await s.invoices()).at(-1) as Json };
  }

  /** `carried`, then Mar 15's renewal takes the 30 (4,930 due) and its card declines: the invoice stays open. */
  async function takenByMarch(): Promise<{ s: Scenario; feb: Json; mar: Json }> {
    const { server, fake } = ctx;
    const d = stripeDriver(server, fake);
    const { s, feb } = await carried();
    await d.replaceCard(s, "insufficient_funds");
    await fake.settle();
    await s.advance("2026-03-15T00:00:00Z");
    await fake.settle();
    const mar = (await s.invoices()).at(-1) as Json;
    return { s, feb, mar };
  }

  test.serial(`${store}: voiding the invoice that took the 30 carried gives it back: April's renewal is due 4,900 + 30 = 4,930, charged 4,930`, async (t) => {
    t.timeout(180_000);
    const { server, fake } = ctx;
    const d = stripeDriver(server, fake);
    const { s, feb, mar } = await takenByMarch();
    t.like(await s.call("GET", `/invoices/${feb.id}`), { status: "paid", amount_carried: usd("30") });
    // 4,900 + the 30 carried = 4,930 due, declined: open.
    t.like(await s.call("GET", `/invoices/${mar.id}`), { status: "open", amount_due: usd("4930") });
    t.deepEqual(await carriedOf(server.db.url, feb.id), [["30", mar.id]]);
    t.like(await s.call("POST", `/invoices/${mar.id}/void`, {}), { status: "void" });
    // Void, it collects nothing: the 30 is owed again.
    t.deepEqual(await carriedOf(server.db.url, feb.id), [["30", null]]);
    t.deepEqual(await pendingOf(s), [usd("30")]);
    await d.replaceCard(s, "visa");
    await fake.settle();
    await s.advance("2026-04-15T00:00:00Z");
    await fake.settle();
    const apr = (await s.invoices()).at(-1) as Json;
    t.not(apr.id, mar.id);
    // 4,900 + the 30 given back = 4,930 due, charged 4,930 (the old code: 4,900).
    t.like(await s.call("GET", `/invoices/${apr.id}`), { status: "paid", amount_due: usd("4930") });
    t.deepEqual(amountsOf(fake, apr.id), [["succeeded", 4930]]);
    t.deepEqual(await carriedOf(server.db.url, feb.id), [["30", apr.id]]);
    t.deepEqual(await pendingOf(s), []);
  });

  test.serial(`${store}: an invoice that took the 30 carried and is written off keeps it: April's renewal is due 4,900`, async (t) => {
    t.timeout(180_000);
    const { server, fake } = ctx;
    const d = stripeDriver(server, fake);
    const { s, feb, mar } = await takenByMarch();
    t.like(await s.call("POST", `/invoices/${mar.id}/mark_uncollectible`, {}), { status: "uncollectible" });
    t.deepEqual(await carriedOf(server.db.url, feb.id), [["30", mar.id]], "written off with it");
    t.deepEqual(await pendingOf(s), []);
    await d.replaceCard(s, "visa");
    await fake.settle();
    await s.advance("2026-04-15T00:00:00Z");
    await fake.settle();
    const apr = (await s.invoices()).at(-1) as Json;
    t.like(await s.call("GET", `/invoices/${apr.id}`), { status: "paid", amount_due: usd("4900") });
    t.deepEqual(amountsOf(fake, apr.id), [["succeeded", 4900]]);
  });
}
