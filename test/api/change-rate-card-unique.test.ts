/**
 * A change of rate card mid-period on a unique_count rate (DESIGN §13: the distinct values in the
 * period): the windows of consecutive cards that both bill the metric count a value once (the
 * new window's first-seen anchor, src/billing/subscriptions/first-seen.ts); a card in between
 * that does not bill the metric starts afresh. Through the public API on test clocks, on MariaDB
 * and SQLite: change-rate-card and a timeline's move, billing state, available credit and late
 * usage; included units given once across the chain, and no anchor where the old card's rate
 * differs (another shape, a cell it lacks, another code). Monthly from January 1; active users at
 * 100 each (dimensional: eu 10, us 20), API calls at 1 each. A bill is [status, total, lines (each [description, quantity, unit price, amount])].
 */
import test from "ava";
import { usd } from "../helpers/catalog-bodies.js";
import { wireCredits } from "../helpers/credit-realtime.js";
import { STORES } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const JAN = "2026-01-01T00:00:00Z";
const CHANGE = "2026-01-15T00:00:00Z";
const FEB = "2026-02-01T00:00:00Z";

/** Two cards (Basic, Pro) each with one simple rate "Active users" at 100 a user, nothing included. */
async function simpleCards(s: Scenario) {
  const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, [], "active");
  const card = (name: string) =>
    s.card({ name, usage_based_rates: [{ usage_based_rate_type: "simple", code: "mau", name: "Active users", pricing_metric_id: m, included_units: 0, price: usd(100) }] });
  return { basic: await card("Basic"), pro: await card("Pro") };
}

/** A card billing API calls only (a sum of "api" events' n, 1 each): it does not bill active users. */
async function callsCard(s: Scenario, name: string) {
  const m = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "api");
  return s.card({ name, usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: m, included_units: 0, price: usd(1) }] });
}

/** Two cards each with one dimensional rate "Regional users" by region: eu 10, us 20 a user. */
async function regionalCards(s: Scenario) {
  const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, ["region"], "active");
  const card = (name: string) =>
    s.card({
      name,
      usage_based_rates: [
        {
          usage_based_rate_type: "dimensional",
          code: "regional",
          name: "Regional users",
          pricing_metric_id: m,
          dimensions: [{ key: "region", values: ["eu", "us"] }],
          pricing_matrix: {
            cells: [
              { dimension_coordinates: { region: "eu" }, price: usd(10) },
              { dimension_coordinates: { region: "us" }, price: usd(20) },
            ],
          },
        },
      ],
    });
  return { basic: await card("Basic"), pro: await card("Pro") };
}

/** A dimensional rate by region on metric `m` with the cells given ([region, price]). */
const regional = (m: string, cells: [string, number][]) => ({
  usage_based_rate_type: "dimensional",
  code: "regional",
  name: "Regional users",
  pricing_metric_id: m,
  dimensions: [{ key: "region", values: ["eu", "us"] }],
  pricing_matrix: { cells: cells.map(([region, price]) => ({ dimension_coordinates: { region }, price: usd(price) })) },
});

/** The simple rate "Active users" (code mau) on metric `m` at 100 a user, `included` included. */
const mau = (m: string, included = 0) => ({ usage_based_rate_type: "simple", code: "mau", name: "Active users", pricing_metric_id: m, included_units: included, price: usd(100) });

const change = (s: Scenario, id: string, card: string) => s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: card, upgrade_behavior: "prorate" });
const usedUnits = async (s: Scenario) => (await s.call("GET", `/customer-access/${s.subjectId}/billing-state`)).usage_data.map((u: Json) => u.used_units);
const withLines = async (s: Scenario) => (await s.bills()).filter((b) => b[2].length > 0);

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: change-rate-card on Jan 15, ann and bob active before, ann and cat after: January bills 3 users, 300`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const { basic, pro } = await simpleCards(s);
    const id = (await s.subscribe({ rate_card_id: basic })).subscription.id;
    await s.events(
      [
        ["2026-01-05T10:00:00Z", "1", { user: "ann" }],
        ["2026-01-05T11:00:00Z", "1", { user: "bob" }],
      ],
      "active",
    );
    await s.advance(CHANGE);
    await change(s, id, pro);
    await s.events(
      [
        ["2026-01-20T10:00:00Z", "1", { user: "ann" }],
        ["2026-01-20T11:00:00Z", "1", { user: "cat" }],
      ],
      "active",
    );
    await s.advance("2026-01-25T00:00:00Z");
    // The period's users across both windows: ann, bob, cat (the window bills cat only; per window: ann, cat, 2).
    t.deepEqual(await usedUnits(s), ["3"]);
    await s.advance(FEB);
    // Jan 1–15 at Basic: ann, bob = 200; Jan 15–Feb 1 at Pro: cat = 100; 300 for 3 users
    // (the old code billed ann again: 2 × 100 = 200 on Feb 1, 400 in all).
    t.deepEqual(await withLines(s), [
      ["open", "200", [["Active users", "2", "100", "200"]]],
      ["open", "100", [["Active users", "1", "100", "100"]]],
    ]);
    // Late for the old card's window: cat on Jan 10, first seen there now: +100 on Jan 1–15, −100 on
    // Jan 15–Feb 1, which no longer counts her; January stays 300. dan in February: 100.
    await s.events(
      [
        ["2026-01-10T10:00:00Z", "1", { user: "cat" }],
        ["2026-02-10T10:00:00Z", "1", { user: "dan" }],
      ],
      "active",
    );
    await s.advance("2026-03-01T00:00:00Z");
    const march = (await s.invoices()).at(-1) as Json;
    t.deepEqual(
      (march.line_items as Json[]).map((l) => [l.kind, l.description, String(l.quantity), l.amount.value]),
      [
        ["usage", "Active users", "1", "100"],
        ["adjustment", "Late usage adjustment: Active users (period 2026-01-01T00:00:00Z to 2026-01-15T00:00:00Z)", "1", "100"],
        ["adjustment", "Late usage adjustment: Active users (period 2026-01-15T00:00:00Z to 2026-02-01T00:00:00Z)", "-1", "-100"],
      ],
    );
    const summary = await s.call("POST", `/pricing-metrics/${(await s.call("GET", `/rate-cards/${pro}`)).usage_based_rates[0].pricing_metric_id}/summary`, {
      subject_id: s.subjectId,
      period: { start: JAN, end: FEB },
    });
    t.is(summary[0].value, "3", "ann, bob, cat: what January's windows add up to");
  });

  test(`${store}: Basic (API calls only) changed to Pro (active users) on Jan 15: Pro bills ann and bob, 200, though active before the change`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const { pro } = await simpleCards(s);
    const basic = await callsCard(s, "Basic");
    const id = (await s.subscribe({ rate_card_id: basic })).subscription.id;
    await s.events([["2026-01-06T10:00:00Z", "10"]], "api");
    await s.events(
      [
        ["2026-01-05T10:00:00Z", "1", { user: "ann" }],
        ["2026-01-05T11:00:00Z", "1", { user: "bob" }],
      ],
      "active",
    );
    await s.advance(CHANGE);
    await change(s, id, pro);
    await s.events(
      [
        ["2026-01-20T10:00:00Z", "1", { user: "ann" }],
        ["2026-01-20T11:00:00Z", "1", { user: "bob" }],
      ],
      "active",
    );
    await s.advance("2026-01-25T00:00:00Z");
    t.deepEqual(await usedUnits(s), ["2"]);
    await s.advance(FEB);
    // Basic never billed users: Pro's window counts both (reverted a9b26a6 billed 0 here).
    t.deepEqual(await withLines(s), [
      ["open", "10", [["API calls", "10", "1", "10"]]],
      ["open", "200", [["Active users", "2", "100", "200"]]],
    ]);
  });

  test(`${store}: A → B → A with only A billing users: ann under A, dan under B, dan and eve under A again: 100 + 200 = 300; late eve under B changes nothing`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const { basic: a } = await simpleCards(s);
    const b = await callsCard(s, "B");
    const id = (await s.subscribe({ rate_card_id: a })).subscription.id;
    await s.events([["2026-01-05T10:00:00Z", "1", { user: "ann" }]], "active");
    await s.advance("2026-01-10T00:00:00Z");
    await change(s, id, b);
    await s.events([["2026-01-12T10:00:00Z", "1", { user: "dan" }]], "active");
    await s.advance("2026-01-20T00:00:00Z");
    await change(s, id, a);
    await s.events(
      [
        ["2026-01-22T10:00:00Z", "1", { user: "dan" }],
        ["2026-01-22T11:00:00Z", "1", { user: "eve" }],
      ],
      "active",
    );
    await s.advance(FEB);
    // B in between does not bill users: A's second window starts afresh (dan was seen, never billed).
    const january = [
      ["open", "100", [["Active users", "1", "100", "100"]]],
      ["open", "200", [["Active users", "2", "100", "200"]]],
    ];
    t.deepEqual(await withLines(s), january);
    // Late eve on Jan 12 (under B): no window billing users counts it differently, no adjustment
    // (reverted a9b26a6 took eve off A's second window: −100).
    await s.events([["2026-01-12T12:00:00Z", "1", { user: "eve" }]], "active");
    await s.advance("2026-03-01T00:00:00Z");
    t.deepEqual(await withLines(s), january);
  });

  test(`${store}: Pro → Pro2 → Pro3 in one month, all billing users: each user once, 300 for ann, bob, cat`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const { basic: pro, pro: pro2 } = await simpleCards(s);
    const m = (await s.call("GET", `/rate-cards/${pro}`)).usage_based_rates[0].pricing_metric_id;
    const pro3 = await s.card({ name: "Pro3", usage_based_rates: [{ usage_based_rate_type: "simple", code: "mau", name: "Active users", pricing_metric_id: m, included_units: 0, price: usd(100) }] });
    const id = (await s.subscribe({ rate_card_id: pro })).subscription.id;
    await s.events([["2026-01-05T10:00:00Z", "1", { user: "ann" }]], "active");
    await s.advance("2026-01-10T00:00:00Z");
    await change(s, id, pro2);
    await s.events(
      [
        ["2026-01-12T10:00:00Z", "1", { user: "ann" }],
        ["2026-01-12T11:00:00Z", "1", { user: "bob" }],
      ],
      "active",
    );
    await s.advance("2026-01-20T00:00:00Z");
    await change(s, id, pro3);
    await s.events(
      [
        ["2026-01-22T10:00:00Z", "1", { user: "ann" }],
        ["2026-01-22T11:00:00Z", "1", { user: "bob" }],
        ["2026-01-22T12:00:00Z", "1", { user: "cat" }],
      ],
      "active",
    );
    await s.advance(FEB);
    // The anchor is Jan 1 for both later windows: bob new on Jan 12, cat on Jan 22 (the old code: 1 + 2 + 3 = 600).
    t.deepEqual(await withLines(s), [
      ["open", "100", [["Active users", "1", "100", "100"]]],
      ["open", "100", [["Active users", "1", "100", "100"]]],
      ["open", "100", [["Active users", "1", "100", "100"]]],
    ]);
    // February starts afresh: ann again, 100.
    await s.events([["2026-02-03T10:00:00Z", "1", { user: "ann" }]], "active");
    await s.advance("2026-03-01T00:00:00Z");
    t.deepEqual((await withLines(s)).at(-1), ["open", "100", [["Active users", "1", "100", "100"]]]);
  });

  test(`${store}: a timeline's move to another card on Jan 15 bills a unique_count once in the period`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const { basic, pro } = await simpleCards(s);
    const item = (start: string, end: string, card: string) => ({ period: { start, end }, subscription_input: { rate_card_id: card } });
    const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: basic });
    await s.call("POST", `/subscription-timelines/${tl.id}/items`, { items: [item(JAN, CHANGE, basic), item(CHANGE, "2026-03-01T00:00:00Z", pro)] });
    const started = await s.call("POST", `/subscription-timelines/${tl.id}/start`, {
      checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/no" },
    });
    if (started.result.action?.checkout_url) t.is((await s.payCheckout(started.result.action.checkout_url, CARD_OK)).status, 303);
    await s.events(
      [
        ["2026-01-05T10:00:00Z", "1", { user: "ann" }],
        ["2026-01-05T11:00:00Z", "1", { user: "bob" }],
        ["2026-01-20T10:00:00Z", "1", { user: "ann" }],
        ["2026-01-20T11:00:00Z", "1", { user: "cat" }],
      ],
      "active",
    );
    await s.advance(FEB);
    // 2 + 1 = 3 users, 300 (the old code: 2 + 2, 400).
    t.deepEqual(await withLines(s), [
      ["open", "200", [["Active users", "2", "100", "200"]]],
      ["open", "100", [["Active users", "1", "100", "100"]]],
    ]);
  });

  test.serial(`${store}: a dimensional unique_count rate after a change counts per cell the values new in the period; available credit agrees`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const w = await wireCredits(s);
    try {
      const { basic, pro } = await regionalCards(s);
      const id = (await s.subscribe({ rate_card_id: basic })).subscription.id;
      await s.events(
        [
          ["2026-01-05T10:00:00Z", "1", { user: "ann", region: "eu" }],
          ["2026-01-05T11:00:00Z", "1", { user: "bob", region: "us" }],
        ],
        "active",
      );
      await w.advance(CHANGE);
      await change(s, id, pro);
      await s.events(
        [
          ["2026-01-20T10:00:00Z", "1", { user: "ann", region: "eu" }],
          ["2026-01-20T11:00:00Z", "1", { user: "ann", region: "us" }],
          ["2026-01-20T12:00:00Z", "1", { user: "cat", region: "eu" }],
        ],
        "active",
      );
      await w.grant("1000");
      // New in the period per cell: eu cat (ann was in eu before), us ann (bob before): 10 + 20 = 30,
      // 1,000 − 30 = 970 available (the old code: eu ann, cat = 20 + us ann = 20, 960). Used: the
      // period's per-cell count, eu {ann, cat} + us {bob, ann} = 4.
      t.deepEqual(await usedUnits(s), ["4"]);
      t.deepEqual(await w.state(), ["1000", "970"]);
      await w.advance(FEB);
      // January per cell: eu {ann, cat} = 2 × 10, us {bob, ann} = 2 × 20: 60 = 30 + 30 (the old code 30 + 40 = 70).
      t.deepEqual(await withLines(s), [
        [
          "open",
          "30",
          [
            ["Regional users (region=eu)", "1", "10", "10"],
            ["Regional users (region=us)", "1", "20", "20"],
          ],
        ],
        [
          "paid",
          "30",
          [
            ["Regional users (region=eu)", "1", "10", "10"],
            ["Regional users (region=us)", "1", "20", "20"],
          ],
        ],
      ]);
      t.deepEqual(await w.state(), ["970", "970"]);
    } finally {
      await w.close();
    }
  });
  test(`${store}: included units apply once across the chain: 2 included on Basic and Pro, ann and bob before Jan 15, ann, bob, cat and dan after: January bills 4 − 2 = 2 users, 200`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, [], "active");
    const basic = await s.card({ name: "Basic", usage_based_rates: [mau(m, 2)] });
    const pro = await s.card({ name: "Pro", usage_based_rates: [mau(m, 2)] });
    const id = (await s.subscribe({ rate_card_id: basic })).subscription.id;
    await s.events(
      [
        ["2026-01-05T10:00:00Z", "1", { user: "ann" }],
        ["2026-01-05T11:00:00Z", "1", { user: "bob" }],
      ],
      "active",
    );
    await s.advance(CHANGE);
    await change(s, id, pro);
    await s.events(
      [
        ["2026-01-20T10:00:00Z", "1", { user: "ann" }],
        ["2026-01-20T10:00:01Z", "1", { user: "bob" }],
        ["2026-01-20T11:00:00Z", "1", { user: "cat" }],
        ["2026-01-20T12:00:00Z", "1", { user: "dan" }],
      ],
      "active",
    );
    await s.advance("2026-01-25T00:00:00Z");
    // 4 users since the anchor, none billed beyond the 2 included before: 4 used of 2 (the window bills 2).
    t.deepEqual(await usedUnits(s), ["4"]);
    await s.advance(FEB);
    // Basic: ann, bob within the 2 included (0); Pro: f(4) − f(2) = 200 − 0 (14ee84c: 2 new − 2 included = 0).
    t.deepEqual(await withLines(s), [["open", "200", [["Active users", "2", "100", "200"]]]]);
  });

  test(`${store}: the old card has no us cell: ann in us before and after the change is billed by Pro, 20; late us usage under the old card takes nothing off Pro`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, ["region"], "active");
    const basic = await s.card({ name: "Basic", usage_based_rates: [regional(m, [["eu", 10]])] });
    const pro = await s.card({
      name: "Pro",
      usage_based_rates: [
        regional(m, [
          ["eu", 10],
          ["us", 20],
        ]),
      ],
    });
    const id = (await s.subscribe({ rate_card_id: basic })).subscription.id;
    await s.events([["2026-01-05T10:00:00Z", "1", { user: "ann", region: "us" }]], "active");
    await s.advance(CHANGE);
    await change(s, id, pro);
    await s.events(
      [
        ["2026-01-20T10:00:00Z", "1", { user: "ann", region: "us" }],
        ["2026-01-20T11:00:00Z", "1", { user: "bob", region: "us" }],
      ],
      "active",
    );
    await s.advance(FEB);
    // Basic billed ann at no price; Pro has no anchor (its us cell is not priced by Basic): ann and bob, 40 (14ee84c: bob only, 20).
    t.deepEqual((await withLines(s)).at(-1), ["open", "40", [["Regional users (region=us)", "2", "20", "40"]]]);
    // bob reported late for Jan 6, under Basic: Basic's window counts him at no price; Pro's still bills him (14ee84c: −20 on Pro's window).
    await s.events([["2026-01-06T10:00:00Z", "1", { user: "bob", region: "us" }]], "active");
    await s.advance("2026-03-01T00:00:00Z");
    const adjustments = ((await s.invoices()) as Json[]).flatMap((i) => (i.line_items as Json[]).filter((l) => l.kind === "adjustment").map((l) => l.amount.value));
    t.true(
      adjustments.every((a) => a === "0"),
      JSON.stringify(adjustments),
    );
  });

  test(`${store}: an eu-only dimensional rate changed to a simple rate: ann in us before and after is billed by Pro, 100`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, ["region"], "active");
    const basic = await s.card({ name: "Basic", usage_based_rates: [{ ...regional(m, [["eu", 10]]), code: "mau" }] });
    const pro = await s.card({ name: "Pro", usage_based_rates: [mau(m)] });
    const id = (await s.subscribe({ rate_card_id: basic })).subscription.id;
    await s.events([["2026-01-05T10:00:00Z", "1", { user: "ann", region: "us" }]], "active");
    await s.advance(CHANGE);
    await change(s, id, pro);
    await s.events([["2026-01-20T10:00:00Z", "1", { user: "ann", region: "us" }]], "active");
    await s.advance(FEB);
    // Not the same shape: no anchor, Pro bills ann (14ee84c: 0).
    t.deepEqual((await withLines(s)).at(-1), ["open", "100", [["Active users", "1", "100", "100"]]]);
  });

  test(`${store}: with a maximum amount carried over alike: ten users before and after a change on Jan 15 bill 1,000 for January`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, [], "active");
    const capped = { ...mau(m), maximum_amount: { currency_code: "USD", value: "1000" } };
    const basic = await s.card({ name: "Basic", usage_based_rates: [capped] });
    const pro = await s.card({ name: "Pro", usage_based_rates: [capped] });
    const id = (await s.subscribe({ rate_card_id: basic })).subscription.id;
    const users = Array.from({ length: 10 }, (_, i) => `u${i}`);
    await s.events(
      users.map((u, i): [string, string, Json] => [`2026-01-05T10:0${i}:00Z`, "1", { user: u }]),
      "active",
    );
    await s.advance(CHANGE);
    await change(s, id, pro);
    await s.events(
      users.map((u, i): [string, string, Json] => [`2026-01-20T10:0${i}:00Z`, "1", { user: u }]),
      "active",
    );
    await s.advance(FEB);
    // Jan 1–15 (14/31): 1,000 capped at 1,000 × 14/31 = 451.61 → 452 (−548); Jan 15–Feb 1: the chain
    // since Jan 1 counts the same ten, 1,000 capped at 1,000 × 31/31, less the 452 billed: 548; 1,000,
    // what the month costs without a change. Anchored as a rate that adds up (6c6119b), the second
    // window took the uncapped 1,000 off and billed 0: 452 (change-rate-card-unique-limits.test.ts).
    t.deepEqual(
      (await withLines(s)).map((b) => b[1]),
      ["452", "548"],
    );
  });

  test(`${store}: used_units after a change is the period's count: twelve users before and after, ten included, report 12 and an overage`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, [], "active");
    const basic = await s.card({ name: "Basic", usage_based_rates: [mau(m, 10)] });
    const pro = await s.card({ name: "Pro", usage_based_rates: [mau(m, 10)] });
    const id = (await s.subscribe({ rate_card_id: basic })).subscription.id;
    const users = Array.from({ length: 12 }, (_, i) => `u${String(i).padStart(2, "0")}`);
    await s.events(
      users.map((u, i): [string, string, Json] => [`2026-01-05T10:${String(i).padStart(2, "0")}:00Z`, "1", { user: u }]),
      "active",
    );
    await s.advance(CHANGE);
    await change(s, id, pro);
    await s.events(
      users.map((u, i): [string, string, Json] => [`2026-01-20T10:${String(i).padStart(2, "0")}:00Z`, "1", { user: u }]),
      "active",
    );
    await s.advance("2026-01-25T00:00:00Z");
    const state = await s.call("GET", `/customer-access/${s.subjectId}/billing-state`);
    // 12 of 10 included in the period (2 billed as overage at the change); 6c6119b reported 12 − 2 = 10, no overage.
    t.deepEqual([state.usage_data[0].used_units, state.has_overage_for_usage], ["12", true]);
    await s.advance(FEB);
    // Basic: 12 − 10 = 2 × 100 = 200; Pro: f(12) − f(12) = 0.
    t.deepEqual(await withLines(s), [["open", "200", [["Active users", "2", "100", "200"]]]]);
  });

  test(`${store}: a second rate on the metric that the old card lacks is not anchored by the first: ann in eu before and after, Pro's regional rate bills 10`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, ["region"], "active");
    const basic = await s.card({ name: "Basic", usage_based_rates: [mau(m)] });
    const pro = await s.card({
      name: "Pro",
      usage_based_rates: [
        mau(m),
        regional(m, [
          ["eu", 10],
          ["us", 20],
        ]),
      ],
    });
    const id = (await s.subscribe({ rate_card_id: basic })).subscription.id;
    await s.events([["2026-01-05T10:00:00Z", "1", { user: "ann", region: "eu" }]], "active");
    await s.advance(CHANGE);
    await change(s, id, pro);
    await s.events([["2026-01-20T10:00:00Z", "1", { user: "ann", region: "eu" }]], "active");
    await s.advance(FEB);
    // mau is anchored (ann billed by Basic: 0 more); regional is new on Pro: ann in eu, 10 (14ee84c: 0, one anchor per metric).
    t.deepEqual(await withLines(s), [
      ["open", "100", [["Active users", "1", "100", "100"]]],
      ["open", "10", [["Regional users (region=eu)", "1", "10", "10"]]],
    ]);
  });
}
