/**
 * A change of rate card mid-period on a unique_count rate with a minimum or maximum amount or a
 * volume-tiered price (DESIGN §13: the distinct values in the period; the minimum and maximum per
 * period): when the old card has the same rate on the same terms, the new window bills the
 * period's charge of the distinct count since the first-seen anchor, with the limits prorated over
 * the windows since it (and the tier the period's count reaches), less what the earlier windows
 * billed (first-seen.ts cappedChainLines), never less than nothing. Through the public API on
 * test clocks, on MariaDB and SQLite. Monthly from January 1 (31 days), changed on Jan 15: the
 * first window is 14/31 of the period, the chain at the close 31/31. Active users at 100 each.
 */
import test from "ava";
import { usd } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const JAN = "2026-01-01T00:00:00Z";
const CHANGE = "2026-01-15T00:00:00Z";
const FEB = "2026-02-01T00:00:00Z";

const mau = (m: string, extra: Json) => ({ usage_based_rate_type: "simple", code: "mau", name: "Active users", pricing_metric_id: m, included_units: 0, price: usd(100), ...extra });
const limit = (value: number) => ({ currency_code: "USD", value: String(value) });
const tier = (up_to: string | null, unit: number) => ({ up_to, unit_amount: { currency_code: "USD", value: unit }, flat_amount: null });

/** Basic and Pro with the same rate (`extra` on the mau rate), subscribed to Basic; `before` active Jan 5, changed to Pro on Jan 15, `after` active Jan 20, closed on Feb 1. */
async function janWithChange(s: Scenario, extra: Json, before: string[], after: string[]) {
  const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, [], "active");
  const basic = await s.card({ name: "Basic", usage_based_rates: [mau(m, extra)] });
  const pro = await s.card({ name: "Pro", usage_based_rates: [mau(m, extra)] });
  const id = (await s.subscribe({ rate_card_id: basic })).subscription.id;
  const at = (day: string, users: string[]) => users.map((user, i): [string, string, Json] => [`2026-01-${day}T10:${String(i).padStart(2, "0")}:00Z`, "1", { user }]);
  await s.events(at("05", before), "active");
  await s.advance(CHANGE);
  await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: pro, upgrade_behavior: "prorate" });
  await s.events(at("20", after), "active");
  await s.advance(FEB);
  return (await s.bills()).filter((b) => b[2].length > 0);
}

const users = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `u${i + from}`);

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: maximum 1,000: six users before, the same six and two more after: January bills 8 users, 800`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const bills = await janWithChange(s, { maximum_amount: limit(1000) }, users(6), users(8));
    // Jan 1–15: 6 × 100 = 600, capped at 1,000 × 14/31 = 451.61: −148.39 → −148, 452.
    // Jan 15–Feb 1: the chain since Jan 1 counts 8 (800), capped at 1,000 × 31/31: not capped.
    // The window bills 800 − 452 = 348: the 2 new users (200) and the earlier cut given back (+148).
    // January: 452 + 348 = 800 = 8 users, under the maximum. The old code billed the window alone:
    // 8 × 100 = 800 capped at 1,000 × 17/31 = 548.39 → 548, 1,000 in all for 8 users.
    t.deepEqual(bills, [
      [
        "open",
        "452",
        [
          ["Active users", "6", "100", "600"],
          ["Active users (maximum per period, prorated)", "1", "-148", "-148"],
        ],
      ],
      [
        "open",
        "348",
        [
          ["Active users", "2", "100", "200"],
          ["Active users (maximum per period, prorated, net of the earlier windows since the change)", "1", "148", "148"],
        ],
      ],
    ]);
  });

  test(`${store}: maximum 1,000: three users before, the same three and one more after: January bills 4 users, 400`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const bills = await janWithChange(s, { maximum_amount: limit(1000) }, users(3), users(4));
    // Jan 1–15: 300, under 451.61. Jan 15–Feb 1: the chain counts 4 (400), under 1,000: 400 − 300 = 100.
    // The old code: 4 × 100 = 400 under 548.39: 300 + 400 = 700, ann, bob, cat billed twice.
    t.deepEqual(
      bills.map((b) => b[1]),
      ["300", "100"],
    );
  });

  test(`${store}: maximum 1,000: ten users before and the same ten after still bill 452 + 548 = 1,000`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const bills = await janWithChange(s, { maximum_amount: limit(1000) }, users(10), users(10));
    // Jan 1–15: 1,000 capped at 451.61 → 452 (−548). The chain: 1,000, capped at 1,000: 1,000 − 452 = 548
    // (no new user; the earlier cut given back). A chain subtracting the uncapped 1,000 billed 0 (452 in all).
    t.deepEqual(bills, [
      [
        "open",
        "452",
        [
          ["Active users", "10", "100", "1000"],
          ["Active users (maximum per period, prorated)", "1", "-548", "-548"],
        ],
      ],
      ["open", "548", [["Active users (maximum per period, prorated, net of the earlier windows since the change)", "1", "548", "548"]]],
    ]);
  });

  test(`${store}: maximum 1,000 over three cards alike (Jan 10, Jan 20): 3 users, then 2 more, then 1 more: January bills 6 users, 600`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, [], "active");
    const capped = mau(m, { maximum_amount: limit(1000) });
    const [pro, pro2, pro3] = [
      await s.card({ name: "Pro", usage_based_rates: [capped] }),
      await s.card({ name: "Pro2", usage_based_rates: [capped] }),
      await s.card({ name: "Pro3", usage_based_rates: [capped] }),
    ];
    const id = (await s.subscribe({ rate_card_id: pro })).subscription.id;
    const at = (day: string, list: string[]) => list.map((user, i): [string, string, Json] => [`2026-01-${day}T10:0${i}:00Z`, "1", { user }]);
    await s.events(at("05", users(3)), "active");
    await s.advance("2026-01-10T00:00:00Z");
    await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: pro2, upgrade_behavior: "prorate" });
    await s.events(at("15", users(5)), "active");
    await s.advance("2026-01-20T00:00:00Z");
    await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: pro3, upgrade_behavior: "prorate" });
    await s.events(at("25", users(6)), "active");
    await s.advance(FEB);
    // Jan 1–10 (9/31): 300 capped at 290.32 (−9.68 → −10): 290.
    // Jan 10–20: the chain since Jan 1 (19/31) counts 5 (500), under 612.90: 500 − 290 = 210 (+200, +10 given back).
    // Jan 20–Feb 1: the chain (31/31) counts 6 (600), under 1,000: 600 − 500 = 100. January: 600 = 6 users.
    // The old code, per window: 290; 500 capped at 1,000 × 10/31 = 322.58 → 323; 600 capped at 387.10 → 387: 1,000.
    t.deepEqual(
      (await s.bills()).filter((b) => b[2].length > 0).map((b) => b[1]),
      ["290", "210", "100"],
    );
  });

  test(`${store}: minimum 1,000 per period: five users before, the same five and one more after: January bills 1,000`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const bills = await janWithChange(s, { minimum_amount: limit(1000) }, users(5), users(6));
    // Jan 1–15: 500, above 1,000 × 14/31 = 451.61: 500. Jan 15–Feb 1: the chain counts 6 (600), raised
    // to 1,000 × 31/31 = 1,000 (+400): 1,000 − 500 = 500, the new user (100) and the minimum (+400).
    // January: max(600, 1,000) = 1,000, the minimum of the period. The old code: 6 × 100 = 600 above
    // 548.39: 500 + 600 = 1,100 (five users twice); a minimum per window on the new users alone
    // would bill max(100, 548.39) = 548: 1,048.
    t.deepEqual(bills, [
      ["open", "500", [["Active users", "5", "100", "500"]]],
      [
        "open",
        "500",
        [
          ["Active users", "1", "100", "100"],
          ["Active users (minimum per period, prorated, net of the earlier windows since the change)", "1", "400", "400"],
        ],
      ],
    ]);
  });

  test(`${store}: minimum 1,000: two users before and the same two after: 452 + 548 = 1,000, as without a change`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const bills = await janWithChange(s, { minimum_amount: limit(1000) }, users(2), users(2));
    // Jan 1–15: 200 raised to 451.61 (+251.61 → +252): 452. The chain: 200 raised to 1,000 (+800):
    // 1,000 − 452 = 548, all minimum (+800 − 252).
    t.deepEqual(
      bills.map((b) => b[1]),
      ["452", "548"],
    );
  });

  test(`${store}: volume tiers (1–5 at 100, 6 and more at 60): four users before, the same four and six more after: the period's 10 users at 60, 600`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const volume = { price: { price_type: "tiered", tiers_mode: "volume", tiers: [tier("5", 100), tier(null, 60)] } };
    const bills = await janWithChange(s, volume, users(4), users(10));
    // Jan 1–15: 4 × 100 = 400. The chain counts 10: 10 × 60 = 600; the window bills 600 − 400 = 200.
    // The old code: 10 × 60 = 600 alone: 400 + 600 = 1,000 for 10 users.
    t.deepEqual(
      bills.map((b) => b[1]),
      ["400", "200"],
    );
  });

  test(`${store}: volume tiers: four users before, the same four and two more after: the period's 6 users cost 360, less than the 400 billed; the window bills nothing`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const volume = { price: { price_type: "tiered", tiers_mode: "volume", tiers: [tier("5", 100), tier(null, 60)] } };
    const bills = await janWithChange(s, volume, users(4), users(6));
    // Jan 1–15: 400. The chain: 6 × 60 = 360 − 400 = −40: never negative, 0. The old code: 6 × 60 = 360 alone, 760.
    t.deepEqual(
      bills.map((b) => b[1]),
      ["400"],
    );
  });

  test(`${store}: the same rate with another maximum on the new card (1,000, then 2,000) is billed per window: 300 + 400`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, [], "active");
    const basic = await s.card({ name: "Basic", usage_based_rates: [mau(m, { maximum_amount: limit(1000) })] });
    const pro = await s.card({ name: "Pro", usage_based_rates: [mau(m, { maximum_amount: limit(2000) })] });
    const id = (await s.subscribe({ rate_card_id: basic })).subscription.id;
    const at = (day: string, list: string[]) => list.map((user, i): [string, string, Json] => [`2026-01-${day}T10:0${i}:00Z`, "1", { user }]);
    await s.events(at("05", users(3)), "active");
    await s.advance(CHANGE);
    await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: pro, upgrade_behavior: "prorate" });
    await s.events(at("20", users(4)), "active");
    await s.advance(FEB);
    // Not on the same terms: what Basic billed is not what Pro's terms price, so no chain (first-seen.ts
    // sameShape): Jan 1–15 300, Jan 15–Feb 1 4 × 100 = 400 (under 2,000 × 17/31), as before.
    t.deepEqual(
      (await s.bills()).filter((b) => b[2].length > 0).map((b) => b[1]),
      ["300", "400"],
    );
  });
}
