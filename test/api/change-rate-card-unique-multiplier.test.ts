/**
 * A unique_count rate with a maximum carried over a change of rate card on the same terms
 * (first-seen.ts cappedChainLines) whose multiplier is not the one its earlier windows were billed
 * at: the new window bills the chain priced at the multiplier now in force less what the earlier
 * windows billed, at the multiplier they were billed at (kept with the anchor at each switch), the
 * difference of those windows' usage at the two multipliers shown as an adjustment line. A rate
 * that does not add up is priced at the multiplier in force at its window's end for the whole
 * window (usage-term-changes.ts), so the period costs what it costs without the change of card.
 * Through the public API on test clocks, on MariaDB and SQLite. Monthly from January 1 (31 days),
 * changed on Jan 15: the first window is 14/31 of the period. Active users at 100, maximum 1,000.
 */
import test from "ava";
import { usd } from "../helpers/catalog-bodies.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const JAN = "2026-01-01T00:00:00Z";
const CHANGE = "2026-01-15T00:00:00Z";
const FEB = "2026-02-01T00:00:00Z";

const capped = (m: string) => ({
  usage_based_rate_type: "simple",
  code: "mau",
  name: "Active users",
  pricing_metric_id: m,
  included_units: 0,
  price: usd(100),
  maximum_amount: { currency_code: "USD", value: "1000" },
});
const users = (n: number) => Array.from({ length: n }, (_, i) => `u${i}`);
const at = (day: string, list: string[]) => list.map((user, i): [string, string, Json] => [`2026-01-${day}T10:${String(i).padStart(2, "0")}:00Z`, "1", { user }]);
const billed = async (s: Scenario) => (await s.bills()).filter((b) => b[2].length > 0);

/**
 * Subscribed to Basic at `first` (null: none set), `before` active Jan 5, changed to Pro (the same
 * rate) on Jan 15 (then `switched`), with `card` false the same card kept; the multiplier set to
 * `then` on Jan 16, `after` active Jan 20, closed on Feb 1.
 */
async function janWithPatch(s: Scenario, first: string | null, then: string, before: string[], after: string[], card = true, switched?: (id: string) => Promise<void>) {
  const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, [], "active");
  const basic = await s.card({ name: "Basic", usage_based_rates: [capped(m)] });
  const pro = await s.card({ name: "Pro", usage_based_rates: [capped(m)] });
  const id = (await s.subscribe({ rate_card_id: basic, ...(first ? { rate_price_multipliers: { mau: first } } : {}) })).subscription.id;
  await s.events(at("05", before), "active");
  await s.advance(CHANGE);
  if (card) await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: pro, upgrade_behavior: "prorate" });
  await switched?.(id);
  await s.advance("2026-01-16T00:00:00Z");
  await s.call("PATCH", `/subscriptions/${id}`, { rate_price_multipliers: { mau: then } });
  await s.events(at("20", after), "active");
  await s.advance(FEB);
  return billed(s);
}

/** A timeline of `items` ([start, end, card index, multiplier]) over cards alike, started on Jan 1; then `events` sent as the clock moves on to each day given, closed on Feb 1. */
async function timeline(s: Scenario, cards: number, items: [string, string, number, string][], events: [string, string[]][]) {
  const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, [], "active");
  const ids: string[] = [];
  for (let i = 0; i < cards; i++) ids.push(await s.card({ name: `Card ${i}`, usage_based_rates: [capped(m)] }));
  const item = ([start, end, card, mult]: [string, string, number, string]) => ({ period: { start, end }, subscription_input: { rate_card_id: ids[card], rate_price_multipliers: { mau: mult } } });
  const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: ids[0] });
  await s.call("POST", `/subscription-timelines/${tl.id}/items`, { items: items.map(item) });
  const started = await s.call("POST", `/subscription-timelines/${tl.id}/start`, { checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/no" } });
  if (started.result?.action?.checkout_url) await s.payCheckout(started.result.action.checkout_url, CARD_OK);
  for (const [day, list] of events) {
    await s.advance(`2026-01-${day}T00:00:00Z`);
    await s.events(at(day, list), "active");
  }
  await s.advance(FEB);
  return billed(s);
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: x1, Basic -> Pro on Jan 15, x2 on Jan 16, the same 4 users before and after: 400 + 400 = 800, as without the change of card`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const bills = await janWithPatch(s, null, "2", users(4), users(4));
    // Jan 1–15 at x1: 4 × 100 = 400, under 1,000 × 14/31 = 451.61: 400.
    // Jan 15–Feb 1 at x2 (the raise re-prices the whole window): the chain since Jan 1 counts 4:
    // 4 × 200 = 800, under 1,000 × 31/31; the earlier window billed its 4 at x1, 400 (under
    // 451.61): no new user (800 − 800 at x2), +400 for the earlier window's users at x2 instead
    // of x1, no maximum either side: 400. January: 400 + 400 = 800.
    // The old code priced the earlier window at x2 (800, capped at 451.61: −348.39) and gave back
    // a cut never made: 400 + 348 = 748.
    t.deepEqual(bills, [
      ["open", "400", [["Active users", "4", "100", "400"]]],
      ["open", "400", [["Active users: the earlier windows' usage since the change (2026-01-01T00:00:00Z to 2026-01-15T00:00:00Z) at multiplier 2, billed at 1", "1", "400", "400"]]],
    ]);
  });

  test(`${store}: the same without the change of card: x2 on Jan 16 bills January's 4 users at x2, 800`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const bills = await janWithPatch(s, null, "2", users(4), users(4), false);
    // One window, priced at the multiplier at its end: 4 × 200 = 800, under 1,000.
    t.deepEqual(
      bills.map((b) => b[1]),
      ["800"],
    );
  });

  test(`${store}: x2, Basic -> Pro on Jan 15, x1 on Jan 16, 3 users before, the same 3 and 3 more after: 452 + 148 = 600, as without the change of card`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const bills = await janWithPatch(s, "2", "1", users(3), users(6));
    // Jan 1–15 at x2: 3 × 200 = 600, capped at 451.61: −148.39 → −148, 452.
    // Jan 15–Feb 1 at x1: the chain counts 6: 600, under 1,000. The earlier window billed its 3 at x2
    // (600 capped at 451.61). The window: 3 new users +300, −300 for the earlier 3 at x1 instead of
    // x2 (300 − 600), +148 of the cut given back (0 − (−148.39)): 148. January: 452 + 148 = 600,
    // 6 users at x1. The old code priced the earlier window at x1 (300, not capped): 452 + 300 = 752.
    t.deepEqual(bills, [
      [
        "open",
        "452",
        [
          ["Active users", "3", "200", "600"],
          ["Active users (maximum per period, prorated)", "1", "-148", "-148"],
        ],
      ],
      [
        "open",
        "148",
        [
          ["Active users", "3", "100", "300"],
          ["Active users: the earlier windows' usage since the change (2026-01-01T00:00:00Z to 2026-01-15T00:00:00Z) at multiplier 1, billed at 2", "1", "-300", "-300"],
          ["Active users (maximum per period, prorated, net of the earlier windows since the change)", "1", "148", "148"],
        ],
      ],
    ]);
  });

  test(`${store}: a timeline Basic x1 -> Pro x2 on Jan 15, the same 4 users before and after: 400 + (800 − 400) = 800`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const bills = await timeline(
      s,
      2,
      [
        [JAN, CHANGE, 0, "1"],
        [CHANGE, "2026-03-01T00:00:00Z", 1, "2"],
      ],
      [
        ["05", users(4)],
        ["20", users(4)],
      ],
    );
    // Jan 1–15 at x1: 400 (under 451.61). Jan 15–Feb 1 at x2: the chain, 4 × 200 = 800 (under 1,000),
    // less the earlier window at x1, 400: 800 − 400 = 400. The old code: 800 − 800 capped at
    // 451.61 = +348: 748.
    t.deepEqual(
      bills.map((b) => b[1]),
      ["400", "400"],
    );
  });

  test(`${store}: a timeline x1 (Jan 1–10) -> x2 (Jan 10–20) -> x3 on cards alike, the same 3 users in each: 290 + 310 + 300 = 900`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const bills = await timeline(
      s,
      3,
      [
        [JAN, "2026-01-10T00:00:00Z", 0, "1"],
        ["2026-01-10T00:00:00Z", "2026-01-20T00:00:00Z", 1, "2"],
        ["2026-01-20T00:00:00Z", "2026-03-01T00:00:00Z", 2, "3"],
      ],
      [
        ["05", users(3)],
        ["15", users(3)],
        ["25", users(3)],
      ],
    );
    // Jan 1–10 (9/31) at x1: 300 capped at 290.32 (−9.68 → −10): 290.
    // Jan 10–20 at x2: the chain (19/31) 3 × 200 = 600 under 612.90, less Jan 1–10 at x1 (300 capped
    // at 290.32): +300 re-priced, +10 of the cut given back: 310 (the old code too: 600 capped at 290.32).
    // Jan 20–Feb 1 at x3: the chain 3 × 300 = 900 under 1,000, less Jan 1–20 as billed, at x2 (600
    // under 612.90): 300. January: 900 = 3 users at x3. The old code priced Jan 1–20 at x3 (900
    // capped at 612.90: −287.10) and billed 287: 887.
    t.deepEqual(
      bills.map((b) => b[1]),
      ["290", "310", "300"],
    );
  });

  test(`${store}: x1 -> x2 after the change, a new user dated Jan 20 sent late: the window's late usage adjustment is that user at x2, +200`, async (t) => {
    const s = await Scenario.start(server, JAN);
    await janWithPatch(s, null, "2", users(4), users(4));
    await s.advance("2026-02-10T00:00:00Z");
    await s.events(at("20", ["u9"]), "active");
    await s.advance("2026-03-01T00:00:00Z");
    // Jan 15–Feb 1 now: the chain counts 5 at x2 (1,000, at the maximum), the earlier window as billed
    // (400 at x1): +200 for u9, +400 repriced: 600, billed 400: +200 (usage key: 1 unit, 200; the
    // repriced adjustment shares the usage's key and adds no unit). The old code also added +200
    // (1,000 − 800 usage, its +348 maximum line unchanged): this guards the key shared by the two lines.
    const late = (await s.bills()).flatMap((b) => b[2]).filter((l) => l[0].startsWith("Late usage adjustment"));
    t.deepEqual(late, [["Late usage adjustment: Active users (period 2026-01-15T00:00:00Z to 2026-02-01T00:00:00Z)", "1", "200", "200"]]);
  });

  test(`${store}: an anchor kept before its billed multiplier was (ISO text alone) prices the earlier windows at the multiplier in force, as before: 400 + 348`, async (t) => {
    const s = await Scenario.start(server, JAN);
    // The anchor the change wrote, rewritten as kept before: its instant alone.
    const legacy = (id: string) =>
      withDatabase(server.db.url, async (db) => {
        const [row] = (await db.dataSource.query("SELECT first_seen AS f FROM subscriptions WHERE id = ?", [id])) as { f: string }[];
        const kept = JSON.parse(String(row?.f)) as Record<string, { at: string; billedMultiplier: string }>;
        t.deepEqual(
          Object.values(kept).map((a) => a.billedMultiplier),
          ["1"],
        );
        const old = Object.fromEntries(Object.entries(kept).map(([k, a]) => [k, a.at]));
        await db.dataSource.query("UPDATE subscriptions SET first_seen = ? WHERE id = ?", [JSON.stringify(old), id]);
      });
    const bills = await janWithPatch(s, null, "2", users(4), users(4), true, legacy);
    // Without the multiplier the earlier window was billed at, it is priced at x2: 800 capped at 451.61.
    t.deepEqual(
      bills.map((b) => b[1]),
      ["400", "348"],
    );
  });

  test(`${store}: Basic -> Pro, x2, then Pro -> Pro2 at the same instant (Jan 15): the empty window between bills nothing and passes on x1, 400 + 400 = 800`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, [], "active");
    const [basic, pro, pro2] = [
      await s.card({ name: "Basic", usage_based_rates: [capped(m)] }),
      await s.card({ name: "Pro", usage_based_rates: [capped(m)] }),
      await s.card({ name: "Pro2", usage_based_rates: [capped(m)] }),
    ];
    const id = (await s.subscribe({ rate_card_id: basic })).subscription.id;
    await s.events(at("05", users(4)), "active");
    await s.advance(CHANGE);
    await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: pro, upgrade_behavior: "prorate" });
    await s.call("PATCH", `/subscriptions/${id}`, { rate_price_multipliers: { mau: "2" } });
    await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: pro2, upgrade_behavior: "prorate" });
    await s.events(at("20", users(4)), "active");
    await s.advance(FEB);
    // Jan 1–15 at x1: 400. Jan 15–15 on Pro at x2: empty, nothing (priced against the earlier window at
    // x1 it would bill 800 − 400 for no time at all). Jan 15–Feb 1 on Pro2 at x2: the chain 800 less
    // Jan 1–15 as billed, at x1 (the empty window's multiplier passed on), 400: 400. January: 800.
    t.deepEqual(
      (await billed(s)).map((b) => b[1]),
      ["400", "400"],
    );
  });
}
