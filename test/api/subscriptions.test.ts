/**
 * Subscriptions beyond the golden table: bad input (400 naming the field, nothing changed),
 * lookups, billing state (also with a publishable key), the checkout page's life cycle, test
 * clock rules, the delete guard, and the usage invariant between billing state and invoices.
 */
import test from "ava";
import { reasonOf, rest, violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const usd = (value: string | number) => ({ amount: { currency_code: "USD", value } });

async function planWithUsage(s: Scenario) {
  const m = await s.metric();
  const card = await s.card({
    name: "Team",
    fixed_rates: [
      { code: "seats", name: "Seats", price: usd(1000) },
      { code: "storage", name: "Storage", price: usd(200) },
    ],
    usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: m, included_units: 100, price: usd("0.5") }],
  });
  return { m, card };
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: bad subscription input is a 400 naming the field and creates nothing`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const { card } = await planWithUsage(s);
    const base = { subject_id: s.subjectId, rate_card_id: card, fixed_rate_quantities: { seats: 1, storage: 1 } };
    const cases: [Json, string[], RegExp?][] = [
      [{ fixed_rate_quantities: {} }, ["fixed_rate_quantities"], /missing: seats, storage/],
      [{ fixed_rate_quantities: { seats: 1 } }, ["fixed_rate_quantities"], /missing: storage/],
      [{ fixed_rate_quantities: { seats: -1, storage: 1 } }, ["fixed_rate_quantities.seats"]],
      [{ fixed_rate_quantities: { seats: "x", storage: 1 } }, ["fixed_rate_quantities.seats"]],
      [{ fixed_rate_quantities: { seats: 1, storage: 1, nope: 1 } }, ["fixed_rate_quantities.nope"]],
      [{ rate_price_multipliers: { unknown: "0.5" } }, ["rate_price_multipliers.unknown"]],
      [{ rate_price_multipliers: { seats: "-0.5" } }, ["rate_price_multipliers.seats"]],
      [{ create_checkout_session: "sometimes" }, ["create_checkout_session"]],
      [{ checkout_callback_urls: undefined }, ["checkout_callback_urls"]],
      [{ checkout_callback_urls: { success_url: "not a url", cancelled_url: "" } }, ["checkout_callback_urls.cancelled_url", "checkout_callback_urls.success_url"]],
      [{ rate_card_id: "" }, ["rate_card_id"]],
      [{ subscription_timeline_id: "stl_nope" }, ["subscription_timeline_id"]],
    ];
    for (const [over, fields, message] of cases) {
      const body = { checkout_callback_urls: { success_url: "https://a.example/ok", cancelled_url: "https://a.example/no" }, ...base, ...over };
      const r = await s.raw("POST", "/subscriptions", body);
      t.is(r.status, 400, JSON.stringify(over));
      t.deepEqual(violatedFields(r.body).sort(), fields, JSON.stringify(over));
      if (message) t.regex(r.body.message, message);
    }
    t.is((await s.raw("POST", "/subscriptions", { ...base, subject_id: "nobody" })).status, 404);
    t.is((await s.raw("POST", "/subscriptions", { ...base, rate_card_id: "rc_nope" })).status, 404);
    t.deepEqual(await s.subscriptions(), []);
    t.deepEqual(await s.invoices(), []);
  });

  test(`${store}: get, list with filters, cancel rules`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const { card } = await planWithUsage(s);
    const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1, storage: 0 }, metadata: { team: "a" } })).subscription;
    t.deepEqual(await s.call("GET", `/subscriptions/${sub.id}`), sub);
    t.deepEqual(sub.fixed_rate_quantities, { seats: "1", storage: "0" });
    t.deepEqual(sub.metadata, { team: "a" });
    t.is((await s.call("GET", `/subscriptions?rate_card_id=${card}`)).subscriptions.length, 1);
    t.is((await s.call("GET", "/subscriptions?rate_card_id=rc_other")).subscriptions.length, 0);
    const both = await s.raw("GET", `/subscriptions?rate_card_id=${card}&subject_id=${s.subjectId}`);
    t.deepEqual([both.status, violatedFields(both.body)], [400, ["rate_card_id"]]);
    t.is((await s.raw("GET", "/subscriptions/sub_nope")).status, 404);
    t.is((await rest(server.url, "GET", `/subscriptions/${sub.id}`, server.keys.b)).status, 404, "another environment cannot see it");

    const no = await s.raw("POST", `/subscriptions/${sub.id}/cancel`, { cancel_at_end_of_cycle: false });
    t.deepEqual([no.status, violatedFields(no.body)], [400, ["cancel_at_end_of_cycle"]]);
    t.is((await s.call("GET", `/subscriptions/${sub.id}`)).status, "active");

    // Deleting a subject with an active subscription is refused.
    const del = await s.raw("DELETE", `/subjects/${s.subjectId}`);
    t.deepEqual([del.status, del.body.code], [400, "failed_precondition"]);

    await s.call("POST", `/subscriptions/${sub.id}/cancel`, {});
    const again = await s.raw("POST", `/subscriptions/${sub.id}/cancel`, {});
    t.deepEqual([again.status, again.body.code], [400, "failed_precondition"]);
    const atEnd = await s.raw("POST", `/subscriptions/${sub.id}/cancel`, { cancel_at_end_of_cycle: true });
    t.deepEqual([atEnd.status, atEnd.body.code], [400, "failed_precondition"]);
    t.is((await s.raw("DELETE", `/subjects/${s.subjectId}`)).status, 200, "deletable once nothing is active");
  });

  test(`${store}: billing state: used units, overage, and a publishable key may read it`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const { m, card } = await planWithUsage(s);
    const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1, storage: 1 } })).subscription;
    const state = async () => s.call("GET", `/customer-access/${s.subjectId}/billing-state`);
    t.deepEqual(await state(), {
      has_active_subscription: true,
      has_overage_for_usage: false,
      active_subscriptions: [{ rate_card_id: card, subscription_id: sub.id }],
      usage_data: [{ included_units: 100, pricing_metric_id: m, rate_name: "API calls", used_units: "0" }],
      paused_subscriptions: [],
      // No credit ever: no currency (DESIGN §14), so an app stopping at zero credit lets it through.
      credit_balance: [],
      available_credit: [],
      // Nothing carried from an invoice below the provider's minimum charge (payments/carries.ts).
      carried_balance: [],
    });
    await s.events([
      ["2026-01-16T00:00:00Z", "60.5"],
      ["2026-01-17T00:00:00Z", "40"],
    ]);
    const after = await state();
    t.is(after.usage_data[0].used_units, "100.5");
    t.true(after.has_overage_for_usage);

    // A publishable key of another environment sees nothing; one of this environment can read it
    // (the scenario's environment has none, so use the seeded environment A's).
    const a = server.keys;
    const other = await rest(server.url, "GET", `/customer-access/${s.subjectId}/billing-state`, a.aPublishable);
    t.is(other.status, 404);
    const own = await rest(server.url, "POST", "/subjects", a.a, { external_id: `pub-${Date.now()}` });
    const viaPublishable = await rest(server.url, "GET", `/customer-access/${own.body.external_id}/billing-state`, a.aPublishable);
    t.deepEqual([viaPublishable.status, viaPublishable.body.has_active_subscription], [200, false]);
    // A key that names no subject: the not-found every subject lookup gives, and an empty key is refused.
    const nobody = await rest(server.url, "GET", "/customer-access/nobody/billing-state", a.a);
    t.deepEqual([nobody.status, nobody.body.code, reasonOf(nobody.body), nobody.body.message], [404, "not_found", "SUBJECT_NOT_FOUND", 'subject_id: subject "nobody" not found']);
    const unsubscribed = await rest(server.url, "POST", "/subjects", a.a, { name: "No subscription" });
    const none = await rest(server.url, "GET", `/customer-access/${unsubscribed.body.id}/billing-state`, a.a);
    t.deepEqual([none.status, none.body.has_active_subscription, none.body.active_subscriptions], [200, false, []]);

    // A key that is one subject's ID and another's external ID names the first (an ID match wins),
    // whichever of the two has the subscription.
    const twin = await s.call("POST", "/subjects", { name: "Twin", external_id: s.subjectId });
    t.true((await state()).has_active_subscription, "the subscribed subject, by its ID");
    t.is((await s.call("GET", `/customer-access/${twin.id}/billing-state`)).has_active_subscription, false, "the other, by its own ID");
    const plain = await s.call("POST", "/subjects", { name: "Plain" });
    const named = await s.call("POST", "/subjects", { name: "Named", external_id: plain.id });
    await s.subscribe({ subject_id: named.id, rate_card_id: card, fixed_rate_quantities: { seats: 1, storage: 1 } });
    t.true((await s.call("GET", `/customer-access/${named.id}/billing-state`)).has_active_subscription, "the subscribed one, by its ID");
    t.is((await s.call("GET", `/customer-access/${plain.id}/billing-state`)).has_active_subscription, false, "the unsubscribed subject its ID names, not the subscribed one whose external ID it is");
  });

  test(`${store}: invariant: at the end of a period, billing state's used units are what is billed`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const { card } = await planWithUsage(s);
    await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1, storage: 0 } });
    let seq = 0;
    for (const [day, n] of [
      ["16", "33.25"],
      ["20", "80"],
      ["28", "12.5"],
      ["31", "7"],
    ]) {
      await s.events([[`2026-01-${day}T12:00:00Z`, n as string]]);
      seq++;
    }
    await s.advance("2026-02-15T00:00:00Z"); // the first cycle closes here
    const invoices = await s.invoices();
    const usageLine = invoices.at(-1).line_items.find((l: Json) => l.description === "API calls");
    // Billed quantity = used − included units.
    t.is(usageLine.quantity, "32.75");
    // And billing state, read at the very end of the next period, agrees with the next invoice.
    await s.events([["2026-03-01T00:00:00Z", "250"]]);
    await s.advance("2026-03-14T23:59:59Z");
    const used = (await s.call("GET", `/customer-access/${s.subjectId}/billing-state`)).usage_data[0].used_units;
    await s.advance("2026-03-15T00:00:00Z");
    const next = (await s.invoices()).at(-1).line_items.find((l: Json) => l.description === "API calls");
    t.is(used, "250");
    t.is(next.quantity, String(Number(used) - 100));
    t.is(seq, 4);
  });

  test(`${store}: the hosted checkout: a labelled form, cancel button, one use only, expiry after 24 h`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ name: "Pro <b>", fixed_rates: [{ code: "seats", name: "Seats", price: usd(1999) }] });
    const start = async () => (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, null)).action.checkout_url as string;
    const url = await start();
    t.regex(url, /^http:\/\/localhost:\d+\/hosted\/checkout\/[0-9A-Za-z]{40}$/);
    const path = new URL(url).pathname;
    const page = await fetch(`${server.url}${path}`);
    const html = await page.text();
    t.is(page.status, 200);
    t.regex(html, /<label for="card_number">Card number<\/label>/);
    t.regex(html, /<input id="card_number" name="card_number"/);
    t.regex(html, /<form method="post" action="\/hosted\/checkout\//);
    t.regex(html, /USD 19\.99/);
    t.regex(html, /Pro &lt;b&gt;/, "names are escaped");
    t.false(/<script/i.test(html), "works without JavaScript");

    const cancel = await fetch(`${server.url}${path}/cancel`, { method: "POST", redirect: "manual" });
    t.deepEqual([cancel.status, cancel.headers.get("location")], [303, "https://app.example/cancelled"]);
    t.is((await s.payCheckout(url, CARD_OK)).status, 410, "a cancelled checkout cannot be completed");

    const url2 = await start();
    await s.advance("2026-01-16T00:00:01Z");
    t.is((await fetch(`${server.url}${new URL(url2).pathname}`)).status, 410, "expired after 24 hours");
    t.is((await s.payCheckout(url2, CARD_OK)).status, 410);
    t.deepEqual(await s.subscriptions(), []);
    t.is((await fetch(`${server.url}/hosted/checkout/${"x".repeat(40)}`)).status, 404);
  });

  test(`${store}: the hosted invoice page is readable without a key, and only through its token`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: usd(1234) }] });
    await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 2 } });
    const [inv] = await s.invoices();
    t.regex(inv.hosted_url, /\/hosted\/invoices\/[0-9A-Za-z]{32}$/);
    const res = await fetch(`${server.url}${new URL(inv.hosted_url).pathname}`);
    const html = await res.text();
    t.is(res.status, 200);
    t.regex(html, new RegExp(`Invoice ${inv.number}`));
    t.regex(html, /Seats<\/td><td class="n">2<\/td><td class="n">USD 12\.34<\/td><td class="n">USD 24\.68<\/td>/);
    t.regex(html, /@media print/);
    t.is((await fetch(`${server.url}/hosted/invoices/${"A".repeat(32)}`)).status, 404);
    const listed = await s.call("GET", `/invoices?subject_id=${s.subjectId}&limit=1`);
    t.deepEqual([listed.has_more, listed.invoices[0].id], [false, inv.id]);
    // Without subject_id: every subject's (DESIGN §15); a subject_id that names no subject is a 404.
    const missing = await s.raw("GET", "/invoices?subject_id=subj_nobody");
    t.is(missing.status, 404);
  });

  test(`${store}: test clocks: forward only, test environments only`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const back = await s.raw("POST", `/test-clocks/${s.clockId}/advance`, { frozen_time: "2026-01-14T00:00:00Z" });
    t.deepEqual([back.status, violatedFields(back.body)], [400, ["frozen_time"]]);
    const clock = await s.call("GET", `/test-clocks/${s.clockId}`);
    t.is(clock.frozen_time, "2026-01-15T00:00:00Z");
    const live = await rest(server.url, "POST", "/test-clocks", server.keys.b, { name: "x", frozen_time: "2026-01-01T00:00:00Z" });
    t.deepEqual([live.status, live.body.code], [400, "failed_precondition"]);
    const bad = await rest(server.url, "POST", "/subjects", server.keys.b, { test_clock_id: s.clockId });
    t.deepEqual([bad.status, violatedFields(bad.body)], [400, ["test_clock_id"]], "a clock of another environment");
    // An event without a timestamp happens at the subject's clock time.
    const m = await s.metric();
    await s.call("POST", "/usage-events", { idempotency_key: "now", subject_id: s.subjectId, event_name: "usage", data: { n: "1" } });
    const sum = await s.call("POST", `/pricing-metrics/${m}/summary`, { subject_id: s.subjectId, period: { start: "2026-01-15T00:00:00Z", end: "2026-01-15T00:00:00.001Z" } });
    t.is(sum[0].value, "1");
  });
}
