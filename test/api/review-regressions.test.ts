/**
 * Regressions found in review, each through the public API on both stores: identifiers compared
 * exactly, two rate-card changes in one instant, a deleted subject's pending timeline, a timeline
 * linked through a checkout, a callback URL with a line break.
 */
import test from "ava";
import { violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const price = (value: number) => ({ amount: { currency_code: "USD", value } });
const callbacks = { checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/no" } };

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: idempotency keys and event names are exact: case and trailing spaces matter`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const m = await s.metric();
    const ev = (key: string, name = "usage") => ({ idempotency_key: key, subject_id: s.subjectId, event_name: name, timestamp: "2026-01-15T00:00:05Z", data: { n: "1" } });
    const results = [];
    for (const key of ["abc", "ABC", "abc "]) results.push((await s.call("POST", "/usage-events", ev(key))).status);
    t.deepEqual(results, ["accepted", "accepted", "accepted"]);
    t.is((await s.call("POST", "/usage-events", ev("USAGE-1", "USAGE"))).status, "accepted");
    for (const start of ["2026-01-15T00:00:00Z", "2026-01-15T00:00:01Z"]) {
      const [summary] = await s.call("POST", `/pricing-metrics/${m}/summary`, { subject_id: s.subjectId, period: { start, end: "2026-01-16T00:00:00Z" } });
      t.is(summary.value, "3", `"USAGE" is not "usage" (from ${start})`);
    }
  });

  test(`${store}: two rate-card changes in the same instant are both invoiced`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const a = await s.card({ name: "A", fixed_rates: [{ code: "seats", name: "Seats", price: price(1000) }] });
    const b = await s.card({ name: "B", fixed_rates: [{ code: "seats", name: "Seats", price: price(2000) }] });
    const c = await s.card({ name: "C", fixed_rates: [{ code: "seats", name: "Seats", price: price(5000) }] });
    const sub = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 } })).subscription;
    await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: b, upgrade_behavior: "rate_difference" });
    await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: c, upgrade_behavior: "rate_difference" });
    t.deepEqual(
      (await s.bills()).map((x) => x[1]),
      ["1000", "1000", "3000"],
    );
  });

  test(`${store}: a deleted subject's pending timeline does not stop the clock or other subjects' cycles`, async (t) => {
    const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: price(0) }] });
    const other = (await s.call("POST", "/subjects", { name: "Leaves", test_clock_id: s.clockId })).id;
    const tl = await s.call("POST", "/subscription-timelines", { subject_id: other, rate_card_id: card });
    await s.call("POST", `/subscription-timelines/${tl.id}/items`, {
      items: [{ period: { start: "2026-01-01T00:00:00Z", end: null }, subscription_input: { rate_card_id: card, fixed_rate_quantities: { seats: 1 }, rate_price_multipliers: {} } }],
    });
    await s.call("POST", `/subscription-timelines/${tl.id}/start`, { ...callbacks, effective_at: "2026-02-01T00:00:00Z" });
    await s.call("DELETE", `/subjects/${other}`);
    await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
    await s.advance("2026-03-05T00:00:00Z");
    t.is((await s.invoices()).length, 3, "Jan, Feb and Mar closed");
    t.is((await s.call("GET", `/subscription-timelines/${tl.id}`)).status, "completed");
  });

  test(`${store}: a subscription started through a checkout keeps its timeline link`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const a = await s.card({ name: "A", fixed_rates: [{ code: "seats", name: "Seats", price: price(1000) }] });
    const b = await s.card({ name: "B", fixed_rates: [{ code: "seats", name: "Seats", price: price(2000) }] });
    const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: a });
    const item = (start: string, end: string | null, card: string) => ({
      period: { start, end },
      subscription_input: { rate_card_id: card, fixed_rate_quantities: { seats: 1 }, rate_price_multipliers: {} },
    });
    await s.call("POST", `/subscription-timelines/${tl.id}/items`, { items: [item("2026-01-15T00:00:00Z", "2026-02-01T00:00:00Z", a), item("2026-02-01T00:00:00Z", null, b)] });
    const r = await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 }, subscription_timeline_id: tl.id }, CARD_OK);
    t.is(r.result_type, "success_after_checkout");
    const linked = await s.call("GET", `/subscription-timelines/${tl.id}`);
    t.is(linked.status, "active");
    await s.advance("2026-02-02T00:00:00Z");
    t.is((await s.call("GET", `/subscriptions/${linked.subscription_id}`)).rate_card_id, b);
  });

  test(`${store}: a second checkout for a timeline already started cannot be paid (410), and takes no card`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: price(1000) }] });
    const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: card });
    await s.call("POST", `/subscription-timelines/${tl.id}/items`, {
      items: [{ period: { start: "2026-01-15T00:00:00Z", end: null }, subscription_input: { rate_card_id: card, fixed_rate_quantities: { seats: 1 }, rate_price_multipliers: {} } }],
    });
    const first = await s.call("POST", `/subscription-timelines/${tl.id}/start`, callbacks);
    const second = await s.call("POST", `/subscription-timelines/${tl.id}/start`, callbacks);
    t.is((await s.payCheckout(first.result.action.checkout_url, CARD_OK)).status, 303);
    const late = await s.payCheckout(second.result.action.checkout_url, CARD_OK);
    t.is(late.status, 410);
    t.regex(late.text, /no longer available/);
    t.is((await s.call("GET", `/subscription-timelines/${tl.id}`)).status, "active");
    t.is((await s.subscriptions()).length, 1);
  });

  test(`${store}: a callback URL with a line break is a 400`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: price(1000) }] });
    const r = await s.raw("POST", "/subscriptions", {
      subject_id: s.subjectId,
      rate_card_id: card,
      fixed_rate_quantities: { seats: 1 },
      checkout_callback_urls: { success_url: "https://app.example/ok\r\nX-Evil: 1", cancelled_url: "https://app.example/no" },
    } as Json);
    t.deepEqual([r.status, violatedFields(r.body)], [400, ["checkout_callback_urls.success_url"]]);
  });
}
