/**
 * Subscription timelines through the public API on test clocks, on MariaDB and SQLite: a
 * three-phase timeline with its invoices line by line, a future start, an open-ended last item,
 * linking from create subscription, and every bad input.
 */
import test from "ava";
import { violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const seats = (value: number, name: string) => ({ fixed_rates: [{ code: "seats", name, price: { amount: { currency_code: "USD", value } } }] });
const item = (start: string, end: string | null, rate_card_id: string, seatsQty: number | string = 1, multipliers: Json = {}) => ({
  period: { start, end },
  subscription_input: { rate_card_id, fixed_rate_quantities: { seats: seatsQty }, rate_price_multipliers: multipliers },
});
const callbacks = { checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/no" } };

for (const store of STORES) {
  const server = useServer(store);

  async function setup(at = "2026-01-01T00:00:00Z") {
    const s = await Scenario.start(server, at);
    const trial = await s.card({ name: "Trial", ...seats(0, "Trial seats") });
    const standard = await s.card({ name: "Standard", ...seats(3000, "Seats") });
    const discounted = await s.card({ name: "Discounted", ...seats(2000, "Seats (discounted)") });
    return { s, trial, standard, discounted };
  }

  test(`${store}: a three-phase timeline (trial → standard → discounted), invoiced line by line`, async (t) => {
    const { s, trial, standard, discounted } = await setup();
    const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: trial });
    t.deepEqual([tl.status, tl.subscription_id, tl.rate_card_id], ["draft", null, trial], "no subscription yet: null");
    const added = await s.call("POST", `/subscription-timelines/${tl.id}/items`, {
      items: [
        item("2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", trial),
        item("2026-02-01T00:00:00Z", "2026-04-01T00:00:00Z", standard, 2),
        item("2026-04-01T00:00:00Z", "2026-06-01T00:00:00Z", discounted, 2),
      ],
    });
    t.true(Array.isArray(added), "a bare array");
    t.deepEqual(
      added.map((i: Json) => [i.period.start, i.period.end, i.subscription_input.rate_card_id, i.subscription_input.fixed_rate_quantities.seats]),
      [
        ["2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", trial, "1"],
        ["2026-02-01T00:00:00Z", "2026-04-01T00:00:00Z", standard, "2"],
        ["2026-04-01T00:00:00Z", "2026-06-01T00:00:00Z", discounted, "2"],
      ],
    );
    const listed = await s.call("GET", `/subscription-timelines/${tl.id}/items?limit=2`);
    t.deepEqual([listed.has_more, listed.items.length], [true, 2]);

    // Paid items and no card on file: a checkout first.
    const started = await s.call("POST", `/subscription-timelines/${tl.id}/start`, callbacks);
    t.is(started.result.result_type, "requires_action");
    t.is(started.result.action.requires_action_type, "checkout");
    t.is((await s.payCheckout(started.result.action.checkout_url, CARD_OK)).status, 303);
    const active = await s.call("GET", `/subscription-timelines/${tl.id}`);
    t.is(active.status, "active");
    t.regex(active.subscription_id, /^sub_/);

    await s.advance("2026-07-01T00:00:00Z");
    const done = await s.call("GET", `/subscription-timelines/${tl.id}`);
    t.is(done.status, "completed");
    const sub = await s.call("GET", `/subscriptions/${active.subscription_id}`);
    t.deepEqual([sub.status, sub.rate_card_id], ["cancelled", discounted]);
    t.deepEqual(
      (await s.invoices()).map((i) => [i.created_at, i.status, i.total_amount.value, i.line_items.map((l: Json) => [l.description, l.quantity, l.price_in_unit_amount.value, l.amount.value])]),
      [
        ["2026-01-01T00:00:00Z", "paid", "0", [["Trial seats", "1", "0", "0"]]],
        ["2026-02-01T00:00:00Z", "paid", "6000", [["Seats", "2", "3000", "6000"]]],
        ["2026-03-01T00:00:00Z", "paid", "6000", [["Seats", "2", "3000", "6000"]]],
        ["2026-04-01T00:00:00Z", "paid", "4000", [["Seats (discounted)", "2", "2000", "4000"]]],
        ["2026-05-01T00:00:00Z", "paid", "4000", [["Seats (discounted)", "2", "2000", "4000"]]],
      ],
    );
  });

  test(`${store}: a future effective_at waits as pending, then starts on time; an open-ended item runs on`, async (t) => {
    const { s, standard, discounted } = await setup("2026-01-10T00:00:00Z");
    await s.subscribe({ rate_card_id: discounted, fixed_rate_quantities: { seats: 1 } }); // puts a card on file
    const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: standard });
    await s.call("POST", `/subscription-timelines/${tl.id}/items`, {
      items: [item("2026-01-15T00:00:00Z", "2026-02-15T00:00:00Z", standard), item("2026-02-15T00:00:00Z", null, discounted)],
    });
    const listed = await s.call("GET", `/subscription-timelines/${tl.id}/items`);
    t.is(listed.items[1].period.end, null, "an open-ended item's end is null");
    const r = await s.call("POST", `/subscription-timelines/${tl.id}/start`, { ...callbacks, effective_at: "2026-01-15T00:00:00Z" });
    t.deepEqual([r.result.result_type, r.result.subscription_timeline.status, r.result.subscription_timeline.subscription_id], ["success", "pending", null]);
    await s.advance("2026-01-14T23:59:59Z");
    t.is((await s.call("GET", `/subscription-timelines/${tl.id}`)).status, "pending");
    await s.advance("2026-01-15T00:00:00Z");
    const active = await s.call("GET", `/subscription-timelines/${tl.id}`);
    t.is(active.status, "active");
    const sub = await s.call("GET", `/subscriptions/${active.subscription_id}`);
    t.is(sub.effective_at, "2026-01-15T00:00:00Z");
    await s.advance("2026-06-01T00:00:00Z");
    const later = await s.call("GET", `/subscriptions/${active.subscription_id}`);
    t.deepEqual([later.status, later.rate_card_id, (await s.call("GET", `/subscription-timelines/${tl.id}`)).status], ["active", discounted, "active"]);
    const totals = (await s.invoices()).filter((i) => i.subscription_id === active.subscription_id).map((i) => [i.created_at, i.total_amount.value]);
    t.deepEqual(totals, [
      ["2026-01-15T00:00:00Z", "3000"],
      ["2026-02-15T00:00:00Z", "2000"],
      ["2026-03-15T00:00:00Z", "2000"],
      ["2026-04-15T00:00:00Z", "2000"],
      ["2026-05-15T00:00:00Z", "2000"],
    ]);
  });

  test(`${store}: subscription_timeline_id on create subscription links it to a draft timeline`, async (t) => {
    const { s, trial, standard } = await setup();
    const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: trial });
    await s.call("POST", `/subscription-timelines/${tl.id}/items`, { items: [item("2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", trial), item("2026-02-01T00:00:00Z", null, standard)] });
    const r = await s.subscribe({ rate_card_id: trial, fixed_rate_quantities: { seats: 1 }, subscription_timeline_id: tl.id }, null);
    t.is(r.result_type, "success");
    const linked = await s.call("GET", `/subscription-timelines/${tl.id}`);
    t.deepEqual([linked.status, linked.subscription_id], ["active", r.subscription.id]);
    const again = await s.raw("POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: trial, fixed_rate_quantities: { seats: 1 }, subscription_timeline_id: tl.id });
    t.deepEqual([again.status, again.body.code], [400, "failed_precondition"]);
    const unknown = await s.raw("POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: trial, fixed_rate_quantities: { seats: 1 }, subscription_timeline_id: "stl_nope" });
    t.deepEqual(violatedFields(unknown.body), ["subscription_timeline_id"]);
  });

  test(`${store}: linking on create needs an item covering the subscription's start, on its rate card; refused, nothing is written`, async (t) => {
    const { s, trial, standard } = await setup("2026-01-15T00:00:00Z");
    await s.saveCardInPortal(CARD_OK);
    const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: standard });
    await s.call("POST", `/subscription-timelines/${tl.id}/items`, { items: [item("2026-02-01T00:00:00Z", "2026-04-01T00:00:00Z", standard)] });
    // Linked on Jan 15, it would be active with no next transition, and billed on after Apr 1.
    const uncovered = await s.raw("POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: standard, fixed_rate_quantities: { seats: 1 }, subscription_timeline_id: tl.id });
    t.deepEqual([uncovered.status, uncovered.body.code, violatedFields(uncovered.body)], [400, "invalid_argument", ["subscription_timeline_id"]]);
    t.regex(JSON.stringify(uncovered.body), /no item of the timeline covers the subscription's start \(2026-01-15T00:00:00\.000Z\): start the timeline instead/);

    const other = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: trial });
    await s.call("POST", `/subscription-timelines/${other.id}/items`, { items: [item("2026-01-15T00:00:00Z", null, standard)] });
    const wrongCard = await s.raw("POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: trial, fixed_rate_quantities: { seats: 1 }, subscription_timeline_id: other.id });
    t.deepEqual([wrongCard.status, violatedFields(wrongCard.body)], [400, ["subscription_timeline_id"]]);
    t.regex(JSON.stringify(wrongCard.body), new RegExp(`is on rate card ${standard}, not rate_card_id ${trial}`));

    t.deepEqual([(await s.call("GET", `/subscription-timelines/${tl.id}`)).status, (await s.call("GET", `/subscription-timelines/${other.id}`)).status], ["draft", "draft"]);
    t.deepEqual([await s.subscriptions(), await s.invoices()], [[], []]);
  });

  test(`${store}: bad timeline input is a 400 naming the field and changes nothing`, async (t) => {
    const { s, trial, standard } = await setup();
    const other = await Scenario.start(server, "2026-01-01T00:00:00Z");
    const yearly = await s.card({ billing_interval: "yearly", ...seats(100, "Yearly seats") });
    const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: trial });
    const bad = async (items: Json[]) => {
      const r = await s.raw("POST", `/subscription-timelines/${tl.id}/items`, { items });
      t.is(r.status, 400, JSON.stringify(items));
      return [violatedFields(r.body), r.body.message as string] as const;
    };
    t.deepEqual((await bad([item("2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", trial), item("2026-01-20T00:00:00Z", null, standard)]))[0], ["items[1].period.start"], "overlap");
    t.deepEqual((await bad([item("2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", trial), item("2026-02-02T00:00:00Z", null, standard)]))[0], ["items[1].period.start"], "gap");
    t.deepEqual((await bad([item("2026-02-01T00:00:00Z", "2026-01-01T00:00:00Z", trial)]))[0], ["items[0].period.end"], "ends before it starts");
    t.deepEqual((await bad([item("2026-01-01T00:00:00Z", null, "rc_nope")]))[0], ["items[0].subscription_input.rate_card_id"], "unknown rate card");
    t.deepEqual((await bad([item("2026-01-01T00:00:00Z", null, yearly)]))[0], ["items[0].subscription_input.rate_card_id"], "another billing interval");
    const [fields, message] = await bad([
      { period: { start: "2026-01-01T00:00:00Z", end: null }, subscription_input: { rate_card_id: standard, fixed_rate_quantities: {}, rate_price_multipliers: {} } },
    ]);
    t.deepEqual(fields, ["items[0].subscription_input.fixed_rate_quantities"]);
    t.regex(message, /missing: seats/);
    t.deepEqual((await bad([item("2026-01-01T00:00:00Z", null, trial), item("2026-03-01T00:00:00Z", null, standard)]))[0], ["items[1].period.start"], "only the last may be open-ended");
    t.deepEqual((await s.call("GET", `/subscription-timelines/${tl.id}/items`)).items, [], "nothing was added");

    const empty = await s.raw("POST", `/subscription-timelines/${tl.id}/start`, callbacks);
    t.deepEqual([empty.status, violatedFields(empty.body)], [400, ["subscription_timeline_id"]]);
    await s.call("POST", `/subscription-timelines/${tl.id}/items`, { items: [item("2026-01-01T00:00:00Z", null, trial)] });
    const uncovered = await s.raw("POST", `/subscription-timelines/${tl.id}/start`, { ...callbacks, effective_at: "2025-12-01T00:00:00Z" });
    t.deepEqual(violatedFields(uncovered.body), ["effective_at"]);
    const badUrls = await s.raw("POST", `/subscription-timelines/${tl.id}/start`, {
      create_checkout_session: "always",
      checkout_callback_urls: { success_url: "javascript:alert(1)", cancelled_url: "https://app.example/no\r\nX-Evil: 1" },
    });
    t.deepEqual([badUrls.status, violatedFields(badUrls.body).sort()], [400, ["checkout_callback_urls.cancelled_url", "checkout_callback_urls.success_url"]]);
    t.is((await s.call("GET", `/subscription-timelines/${tl.id}`)).status, "draft", "a refused start changes nothing");
    t.is((await s.call("POST", `/subscription-timelines/${tl.id}/start`, callbacks)).result.result_type, "success");
    const late = await s.raw("POST", `/subscription-timelines/${tl.id}/items`, { items: [item("2026-03-01T00:00:00Z", null, trial)] });
    t.deepEqual([late.status, late.body.code], [400, "failed_precondition"]);
    const twice = await s.raw("POST", `/subscription-timelines/${tl.id}/start`, callbacks);
    t.deepEqual([twice.status, twice.body.code], [400, "failed_precondition"]);
    t.is((await other.raw("GET", `/subscription-timelines/${tl.id}`)).status, 404, "another environment cannot see it");
    const list = await s.call("GET", "/subscription-timelines");
    t.deepEqual(
      list.subscription_timelines.map((x: Json) => x.id),
      [tl.id],
    );
  });
}
