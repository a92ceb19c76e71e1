/**
 * Archiving rate cards and pricing metrics through the public API, on MariaDB and SQLite: the
 * archive calls (idempotent, not found across environments, secret key only, Idempotency-Key
 * replay), what an archived card or metric refuses (new subscriptions, timelines and their items;
 * new rates) and what it keeps doing (renewing subscriptions already on it, metering and billing
 * its events), and the lists' `archived` filter.
 */
import test from "ava";
import { reasonOf, rest, violatedFields } from "../helpers/clients.js";
import { seats, simple, usd } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const callbacks = { checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/no" } };

for (const store of STORES) {
  const server = useServer(store);
  const start = (at = "2026-01-15T00:00:00Z") => Scenario.start(server, at);

  test(`${store}: archiving a rate card sets archived and archived_at once; archiving again answers it unchanged`, async (t) => {
    const s = await start();
    const id = await s.card({ fixed_rates: [seats()] });
    const fresh = await s.call("GET", `/rate-cards/${id}`);
    t.deepEqual([fresh.archived, fresh.archived_at], [false, null]);
    const first = await s.call("POST", `/rate-cards/${id}/archive`, {});
    t.is(first.id, id);
    t.true(first.archived);
    t.regex(first.archived_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    t.is(first.updated_at, first.archived_at, "archiving is the card's one change");
    t.deepEqual(first.fixed_rates, fresh.fixed_rates, "its rates are kept");
    await new Promise((r) => setTimeout(r, 20));
    const again = await s.call("POST", `/rate-cards/${id}/archive`, {});
    t.deepEqual(again, first, "idempotent: the first archived_at is kept");
    t.deepEqual(await s.call("GET", `/rate-cards/${id}`), first);
  });

  test(`${store}: archiving a pricing metric sets archived and archived_at once`, async (t) => {
    const s = await start();
    const id = await s.metric();
    t.deepEqual((({ archived, archived_at }) => [archived, archived_at])(await s.call("GET", `/pricing-metrics/${id}`)), [false, null]);
    const first = await s.call("POST", `/pricing-metrics/${id}/archive`, {});
    t.true(first.archived);
    t.truthy(first.archived_at);
    await new Promise((r) => setTimeout(r, 20));
    t.deepEqual(await s.call("POST", `/pricing-metrics/${id}/archive`, {}), first);
    t.deepEqual(await s.call("GET", `/pricing-metrics/${id}`), first);
  });

  test(`${store}: archive answers not found for an unknown ID or another environment's, and needs a secret key`, async (t) => {
    const s = await start();
    const card = await s.card({ fixed_rates: [seats()] });
    const metric = await s.metric();
    const other = await server.freshKey("test");
    for (const [path, reason] of [
      [`/rate-cards/${card}/archive`, "RATE_CARD_NOT_FOUND"],
      ["/rate-cards/rc_nope/archive", "RATE_CARD_NOT_FOUND"],
      [`/pricing-metrics/${metric}/archive`, "PRICING_METRIC_NOT_FOUND"],
      ["/pricing-metrics/pm_nope/archive", "PRICING_METRIC_NOT_FOUND"],
    ]) {
      const r = await rest(server.url, "POST", path, other, {});
      t.is(r.status, 404, path);
      t.is(reasonOf(r.body), reason, path);
    }
    t.false((await s.call("GET", `/rate-cards/${card}`)).archived, "another environment's call changed nothing");
    const publishable = await rest(server.url, "POST", "/rate-cards/rc_nope/archive", server.keys.aPublishable, {});
    t.is(publishable.status, 403);
    t.is((await rest(server.url, "POST", "/pricing-metrics/pm_nope/archive", server.keys.aPublishable, {})).status, 403);
  });

  test(`${store}: an Idempotency-Key on archive replays the first answer`, async (t) => {
    const s = await start();
    const id = await s.card({ fixed_rates: [seats()] });
    const call = () =>
      fetch(`${server.url}/rate-cards/${id}/archive`, { method: "POST", headers: { "x-api-key": s.key, "content-type": "application/json", "idempotency-key": "archive-1" }, body: "{}" });
    const first = await call();
    const firstBody = await first.text();
    t.is(first.status, 200);
    t.is(first.headers.get("idempotent-replayed"), null);
    const second = await call();
    t.is(second.status, 200);
    t.is(second.headers.get("idempotent-replayed"), "true");
    t.is(await second.text(), firstBody);
  });

  test(`${store}: an archived rate card takes no new subscription, timeline or timeline item (400 RATE_CARD_ARCHIVED)`, async (t) => {
    const s = await start();
    const open = await s.card({ name: "Open", fixed_rates: [seats(0)] });
    const archived = await s.card({ name: "Old", fixed_rates: [seats(0)] });
    await s.call("POST", `/rate-cards/${archived}/archive`, {});
    const refused = (r: { status: number; body: Json }, what: string) => {
      t.is(r.status, 400, what);
      t.is(r.body.code, "failed_precondition", what);
      t.is(reasonOf(r.body), "RATE_CARD_ARCHIVED", what);
      t.true(r.body.message.includes(archived), `${what}: the message names the card`);
      t.true(r.body.message.includes("archived"), what);
    };
    refused(await s.raw("POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: archived, fixed_rate_quantities: { seats: 1 }, ...callbacks }), "create subscription");
    refused(await s.raw("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: archived }), "create timeline");
    const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: open });
    const item = (card: string) => ({ period: { start: "2026-01-15T00:00:00Z", end: null }, subscription_input: { rate_card_id: card, fixed_rate_quantities: { seats: 1 } } });
    const added = await s.raw("POST", `/subscription-timelines/${tl.id}/items`, { items: [item(archived)] });
    refused(added, "timeline item");
    t.true(added.body.message.startsWith("items[0].subscription_input.rate_card_id: "), added.body.message);
    t.deepEqual(await s.call("GET", `/subscription-timelines/${tl.id}/items`), { items: [], has_more: false }, "nothing written");
    t.deepEqual(await s.subscriptions(), [], "nothing written");
    // An unknown card on an item is still a field violation.
    t.deepEqual(violatedFields((await s.raw("POST", `/subscription-timelines/${tl.id}/items`, { items: [item("rc_nope")] })).body), ["items[0].subscription_input.rate_card_id"]);
  });

  // Failing until SubscriptionChanges.changeRateCard loads the new card with Lookups.cardForNewUse
  // (src/billing/subscriptions/changes.ts); then this becomes a plain test.
  test(`${store}: no change of rate card to an archived card (400 RATE_CARD_ARCHIVED)`, async (t) => {
    const s = await start();
    const from = await s.card({ name: "From", fixed_rates: [seats(0)] });
    const to = await s.card({ name: "To", fixed_rates: [seats(0)] });
    const r = await s.subscribe({ rate_card_id: from, fixed_rate_quantities: { seats: 1 } });
    await s.call("POST", `/rate-cards/${to}/archive`, {});
    const change = await s.raw("POST", `/subscriptions/${r.subscription.id}/change-rate-card`, { rate_card_id: to });
    t.is(change.status, 400);
    t.is(reasonOf(change.body), "RATE_CARD_ARCHIVED");
    t.is((await s.subscriptions())[0].rate_card_id, from);
  });

  test(`${store}: a subscription already on an archived card renews, and usage of an archived metric is still billed`, async (t) => {
    const s = await start();
    const metric = await s.metric();
    const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [simple(metric, usd(2))] });
    const r = await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
    t.is(r.result_type, "success_after_checkout");
    await s.call("POST", `/rate-cards/${card}/archive`, {});
    await s.call("POST", `/pricing-metrics/${metric}/archive`, {});
    await s.events([["2026-01-20T00:00:00Z", "5"]]);
    await s.advance("2026-02-15T00:00:00Z");
    t.deepEqual(await s.bills(), [
      ["paid", "1000", [["Seats", "1", "1000", "1000"]]],
      [
        "paid",
        "1010",
        [
          ["Seats", "1", "1000", "1000"],
          ["API calls", "5", "2", "10"],
        ],
      ],
    ]);
    const [sub] = await s.subscriptions();
    t.deepEqual([sub.status, sub.rate_card_id, sub.current_period.start], ["active", card, "2026-02-15T00:00:00Z"]);
  });

  test(`${store}: no new rate may use an archived pricing metric (rate cards and catalogs, 400 naming the field)`, async (t) => {
    const s = await start();
    const live = await s.metric(undefined, [], "live");
    const old = await s.metric(undefined, [], "old");
    await s.call("POST", `/pricing-metrics/${old}/archive`, {});
    const body = { usage_based_rates: [simple(live, usd(1), 0, "a", "A"), simple(old, usd(1), 0, "b", "B")] };
    const card = await s.raw("POST", "/rate-cards", { billing_interval: "monthly", name: "Plan", ...body });
    t.is(card.status, 400);
    t.deepEqual(violatedFields(card.body), ["usage_based_rates[1].pricing_metric_id"]);
    t.regex(card.body.message, /usage_based_rates\[1\]\.pricing_metric_id: is archived/);
    t.deepEqual((await s.call("GET", "/rate-cards")).rate_cards, [], "nothing written");
    const catalog = await s.call("POST", "/rate-catalogs", { name: "Add-ons", description: "" });
    const add = await s.raw("POST", `/rate-catalogs/${catalog.id}/add_rates`, { billing_interval: "monthly", ...body });
    t.is(add.status, 400);
    t.deepEqual(violatedFields(add.body), ["usage_based_rates[1].pricing_metric_id"]);
    t.is((await s.call("GET", `/rate-catalogs/${catalog.id}`)).rate_count, 0);
    // The metric that is not archived still makes rates.
    t.truthy(await s.card({ usage_based_rates: [simple(live, usd(1))] }));
  });

  test(`${store}: lists filter by archived (absent: all; true: archived; false: the others); a bad value is a 400`, async (t) => {
    const s = await start();
    const [c1, c2, c3] = [await s.card({ name: "One", fixed_rates: [seats()] }), await s.card({ name: "Two", fixed_rates: [seats()] }), await s.card({ name: "Three", fixed_rates: [seats()] })];
    const [m1, m2] = [await s.metric(undefined, [], "one"), await s.metric(undefined, [], "two")];
    await s.call("POST", `/rate-cards/${c2}/archive`, {});
    await s.call("POST", `/pricing-metrics/${m1}/archive`, {});
    const cards = async (q: string) => (await s.call("GET", `/rate-cards${q}`)).rate_cards.map((c: Json) => c.id);
    const metrics = async (q: string) => (await s.call("GET", `/pricing-metrics${q}`)).pricing_metrics.map((m: Json) => m.id);
    t.deepEqual(await cards(""), [c1, c2, c3]);
    t.deepEqual(await cards("?archived=true"), [c2]);
    t.deepEqual(await cards("?archived=false"), [c1, c3]);
    t.deepEqual(await cards("?archived=false&limit=1&offset=1"), [c3]);
    t.deepEqual(await metrics(""), [m1, m2]);
    t.deepEqual(await metrics("?archived=true"), [m1]);
    t.deepEqual(await metrics("?archived=false"), [m2]);
    for (const path of ["/rate-cards?archived=maybe", "/pricing-metrics?archived=yes"]) {
      const r = await s.raw("GET", path);
      t.is(r.status, 400, path);
      t.deepEqual(violatedFields(r.body), ["archived"], path);
    }
  });
}
