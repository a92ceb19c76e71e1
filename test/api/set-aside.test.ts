/**
 * One subscription whose cycle close fails must not delay anyone else's invoices (DESIGN §8):
 * it is set aside with its error visible on the subscription (`billing_failure`), retried with
 * backoff, and every other subscription, on the same clock, in the same environment or in
 * another one, is billed meanwhile. On MariaDB and SQLite, through the public API and the real
 * scheduler.
 */
import test from "ava";
import { dbTime } from "../../src/db/raw.js";
import { ok, reasonOf, violatedFields } from "../helpers/clients.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { type TestServer, startTestServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

// The largest whole number an input may have (20 integer digits).
const BIG = "99999999999999999999";
// A usage total no accepted input can make, written behind the API's back as an older version's
// data could be: priced at 2 cents it is more than an invoice line can hold (53 digits).
const HUGE_TOTAL = `9${"0".repeat(52)}`;

/** Runs one statement on the server's database, as an operator (or an older version) could. */
async function sql(server: TestServer, statement: string, params: unknown[]): Promise<void> {
  await withDatabase(server.db.url, (db) => db.dataSource.query(statement, params), 1);
}
const usd = (value: string | number) => ({ amount: { currency_code: "USD", value } });
const usageRate = (metric: string, price: string) => ({ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: metric, included_units: 0, price: usd(price) });

async function withServer(store: (typeof STORES)[number], env: Record<string, string>, fn: (server: TestServer) => Promise<void>) {
  const server = await startTestServer(store, env);
  try {
    await fn(server);
  } finally {
    await server.stop();
  }
}

for (const store of STORES) {
  test(`${store}: fixed charges too large for an invoice are a 400 at subscribe, and nothing is written`, async (t) => {
    await withServer(store, {}, async (server) => {
      const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
      const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: usd(BIG) }] });
      for (const callbacks of [{}, { create_checkout_session: "always" }]) {
        const r = await s.raw("POST", "/subscriptions", {
          subject_id: s.subjectId,
          rate_card_id: card,
          fixed_rate_quantities: { seats: BIG },
          rate_price_multipliers: { seats: BIG },
          checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/no" },
          ...callbacks,
        });
        t.is(r.status, 400);
        t.deepEqual(violatedFields(r.body), ["fixed_rate_quantities.seats"]);
      }
      const over = await s.raw("POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: card, fixed_rate_quantities: { seats: `1${BIG}` } });
      t.is(over.status, 400);
      t.deepEqual(violatedFields(over.body), ["fixed_rate_quantities.seats"], "21 integer digits");
      t.deepEqual(await s.subscriptions(), []);
      // A usage rate whose price × multiplier reaches 10^20 per unit could price ordinary usage
      // past what an invoice holds: refused at subscribe, naming the multiplier.
      const metric = await s.metric();
      const usageCard = await s.card({ name: "Metered", usage_based_rates: [usageRate(metric, BIG)] });
      const metered = await s.raw("POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: usageCard, rate_price_multipliers: { api: "1.5" } });
      t.is(metered.status, 400);
      t.deepEqual(violatedFields(metered.body), ["rate_price_multipliers.api"]);
      t.deepEqual(await s.subscriptions(), []);

      // At the limits, but within what an invoice holds: accepted.
      const fits = await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: BIG } });
      t.is(fits.result_type, "success_after_checkout");
      t.deepEqual(
        (await s.bills()).map(([, totalValue]) => totalValue),
        ["9999999999999999999800000000000000000001"],
      );

      // A change of rate card carries the quantities over: one whose fixed charge could not be
      // invoiced at them is refused, and nothing changes.
      const free = await s.card({ name: "Free seats", fixed_rates: [{ code: "seats", name: "Seats", price: usd(0) }] });
      const big = (await s.subscribe({ rate_card_id: free, fixed_rate_quantities: { seats: BIG }, rate_price_multipliers: { seats: BIG } })).subscription;
      const changed = await s.raw("POST", `/subscriptions/${big.id}/change-rate-card`, { rate_card_id: card });
      t.is(changed.status, 400);
      t.deepEqual(violatedFields(changed.body), ["rate_card_id"]);
      t.regex(changed.body.message, /seats: its charge \(quantity × price × multiplier\) has more than 53 digits/);
      t.is((await s.call("GET", `/subscriptions/${big.id}`)).rate_card_id, free);
    });
  });

  test(`${store}: on a test clock, a subscription whose close fails is set aside and the others on the clock are invoiced`, async (t) => {
    await withServer(store, {}, async (server) => {
      const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
      const metric = await s.metric();
      const card = await s.card({ usage_based_rates: [usageRate(metric, "2")] });
      const poison = (await s.subscribe({ rate_card_id: card })).subscription;
      const healthySubject = (await s.call("POST", "/subjects", { name: "Healthy", test_clock_id: s.clockId })).id;
      const healthy = (await s.call("POST", "/subscriptions", { subject_id: healthySubject, rate_card_id: card })).result.subscription;
      await s.events([["2026-01-20T00:00:00Z", "5"]]);
      await s.call("POST", "/usage-events", { idempotency_key: "h1", subject_id: healthySubject, event_name: "usage", timestamp: "2026-01-20T00:00:00Z", data: { n: 5 } });
      for (const table of ["usage_rollups", "usage_rollups_minute"]) await sql(server, `UPDATE ${table} SET sum_value = ? WHERE subject_id = ?`, [HUGE_TOTAL, s.subjectId]);

      await s.advance("2026-02-16T00:00:00Z"); // 200: the advance itself does not fail
      const healthyInvoices = (await s.call("GET", `/invoices?subject_id=${healthySubject}`)).invoices;
      t.deepEqual(
        healthyInvoices.map((i: Json) => i.total_amount.value),
        ["10"],
        "the healthy subscription on the same clock is invoiced",
      );
      const set = await s.call("GET", `/subscriptions/${poison.id}`);
      t.is(set.status, "active");
      t.is(set.current_period.start, "2026-01-15T00:00:00Z", "its cycle is not closed");
      t.regex(set.billing_failure.message, /more than 53 digits/);
      t.is(set.billing_failure.attempts, 1);
      t.true(Date.parse(set.billing_failure.retry_at) > Date.parse(set.billing_failure.failed_at), "retried later, with backoff");
      t.deepEqual(await s.invoices(), [], "nothing is written for the failing subscription");
      t.is((await s.call("GET", `/subscriptions/${healthy.id}`)).billing_failure ?? null, null, "a healthy subscription shows no failure");

      // A cancel or change needs the ended cycle closed first: it says why it cannot be.
      for (const [path, body] of [
        ["cancel", {}],
        ["change-rate-card", { rate_card_id: card }],
      ] as const) {
        const r = await s.raw("POST", `/subscriptions/${poison.id}/${path}`, body);
        t.is(r.status, 400, path);
        t.is(r.body.code, "failed_precondition", path);
        t.is(reasonOf(r.body), "SUBSCRIPTION_BILLING_FAILED", path);
        t.regex(r.body.message, /cannot be closed \(the amount of invoice line "API calls" has more than 53 digits/, path);
      }
      t.is((await s.call("GET", `/subscriptions/${poison.id}`)).billing_failure.attempts, 3, "each try is counted");

      // The next cycle: the healthy one goes on; the failing one is not retried before its time.
      await s.call("POST", "/usage-events", { idempotency_key: "h2", subject_id: healthySubject, event_name: "usage", timestamp: "2026-02-20T00:00:00Z", data: { n: 1 } });
      await s.advance("2026-03-16T00:00:00Z");
      t.is((await s.call("GET", `/invoices?subject_id=${healthySubject}`)).invoices.length, 2);
      t.is((await s.call("GET", `/subscriptions/${poison.id}`)).billing_failure.attempts, 3);
    });
  });

  test(`${store}: a timeline waits for a set-aside subscription's cycle to close before moving on, and bills its usage once`, async (t) => {
    await withServer(store, {}, async (server) => {
      const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
      const metric = await s.metric();
      const rate = (name: string) => ({ usage_based_rates: [{ ...usageRate(metric, "1"), name }] });
      const a = await s.card({ name: "A", ...rate("API A") });
      const b = await s.card({ name: "B", ...rate("API B") });
      const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: a });
      await s.call("POST", `/subscription-timelines/${tl.id}/items`, {
        items: [
          { period: { start: "2026-01-15T00:00:00Z", end: "2026-02-20T00:00:00Z" }, subscription_input: { rate_card_id: a } },
          { period: { start: "2026-02-20T00:00:00Z", end: null }, subscription_input: { rate_card_id: b } },
        ],
      });
      await s.call("POST", `/subscription-timelines/${tl.id}/start`, { checkout_callback_urls: { success_url: "https://x.example/ok", cancelled_url: "https://x.example/no" } });
      const subId = (await s.call("GET", `/subscription-timelines/${tl.id}`)).subscription_id;
      await s.events([["2026-02-17T00:00:00Z", "5"]]);
      // As if its close had just failed: set aside for an hour of real time.
      const now = Date.now();
      const setAside = "UPDATE subscriptions SET billing_error = 'internal error: connection lost', billing_attempts = 1, billing_failed_at = ?, billing_retry_at = ? WHERE id = ?";
      await sql(server, setAside, [dbTime(new Date(now)), dbTime(new Date(now + 3_600_000)), subId]);
      // Past the cycle end (02-15) and the timeline's switch (02-20): the cycle stays unclosed,
      // and the switch waits for it rather than invoicing across the cycle boundary.
      await s.advance("2026-02-21T00:00:00Z");
      t.is((await s.call("GET", `/subscriptions/${subId}`)).rate_card_id, a);
      t.deepEqual(await s.invoices(), []);
      // The backoff has passed: the next advance closes the cycle, then switches to B.
      await sql(server, "UPDATE subscriptions SET billing_retry_at = ? WHERE id = ?", [dbTime(new Date(now - 1000)), subId]);
      await s.advance("2026-03-16T00:00:00Z");
      t.is((await s.call("GET", `/subscriptions/${subId}`)).rate_card_id, b);
      const lines = (await s.invoices()).flatMap((i: Json) => i.line_items.map((l: Json) => [l.description, l.quantity]));
      t.deepEqual(lines, [["API A", "5"]], "the 5 units of 02-17, used on A, are billed once");
    });
  });

  test(`${store}: the scheduler bills every other subscription and environment while one keeps failing`, async (t) => {
    await withServer(store, { SCHEDULER_INTERVAL_MS: "100" }, async (server) => {
      const envA = await server.freshKey("test");
      const envB = await server.freshKey("test");
      const call = (key: string, method: string, path: string, body?: unknown) => ok(server, key, method, path, body);
      const setUp = async (key: string, price: string, multiplier: string, value: string) => {
        const metric = (await call(key, "POST", "/pricing-metrics", { event_name: "usage", name: "usage", unit: "unit", dimensions: [], aggregation: { aggregation_type: "sum", value_field: "n" } }))
          .id;
        const card = (await call(key, "POST", "/rate-cards", { billing_interval: "monthly", name: "Plan", usage_based_rates: [usageRate(metric, price)] })).id;
        const subject = (await call(key, "POST", "/subjects", { name: "Customer" })).id;
        const sub = (await call(key, "POST", "/subscriptions", { subject_id: subject, rate_card_id: card, rate_price_multipliers: { api: multiplier } })).result.subscription;
        return { key, subject, sub, value };
      };
      const poison = await setUp(envA, "5", "1", "1");
      const others = [await setUp(envA, "2", "1", "7"), await setUp(envB, "3", "1", "4"), await setUp(envB, "1", "2", "10")];
      // Anything thrown: here the subscription's rate card is gone (behind the API's back).
      await sql(server, "UPDATE subscriptions SET rate_card_id = 'rc_gone' WHERE id = ?", [poison.sub.id]);

      // One event half an hour ago each; then each cycle's start moves back an hour and its end
      // into the past, behind the API's back (the poison first in line: the scheduler takes the
      // oldest first).
      const now = Date.now();
      const all = [poison, ...others];
      for (const [i, x] of all.entries()) {
        await call(x.key, "POST", "/usage-events", { idempotency_key: `k-${i}`, subject_id: x.subject, event_name: "usage", timestamp: new Date(now - 1_800_000).toISOString(), data: { n: x.value } });
      }
      for (const [i, x] of all.entries()) {
        const start = dbTime(new Date(now - 3_600_000));
        const end = dbTime(new Date(now - 60_000 + i * 1000));
        await sql(server, "UPDATE subscriptions SET anchor = ?, period_start = ?, usage_since = ?, period_end = ? WHERE id = ?", [start, start, start, end, x.sub.id]);
      }

      const invoiced = async () => Promise.all(others.map(async (x) => (await call(x.key, "GET", `/invoices?subject_id=${x.subject}`)).invoices as Json[]));
      let seen: Json[][] = [];
      for (let i = 0; i < 200; i++) {
        seen = await invoiced();
        if (seen.every((list) => list.length > 0)) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      t.deepEqual(
        seen.map((list) => list.map((inv) => inv.total_amount.value)),
        [["14"], ["12"], ["20"]],
        "every other subscription, in the same environment and in another, is invoiced once",
      );
      const set = await call(envA, "GET", `/subscriptions/${poison.sub.id}`);
      t.regex(set.billing_failure.message, /^internal error at .*; the server log has the cause$/, "the cause is logged, not shown");
      t.true(set.billing_failure.attempts >= 1);
      t.deepEqual((await call(envA, "GET", `/invoices?subject_id=${poison.subject}`)).invoices, []);
    });
  });
}
