/**
 * The golden table: billing scenarios driven only through the public API on test clocks, on
 * MariaDB and SQLite, each asserting exact invoice lines and totals. Amounts are in cents (USD).
 * A line is [description, quantity, unit price, amount]; an invoice [status, total, lines].
 */
import test from "ava";
import { seats, simple, usd } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { CARD_DECLINED, CARD_FAILS_LATER, CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";

type Case = [string, (s: Scenario, t: import("ava").ExecutionContext) => Promise<unknown>, unknown];

const cases: Case[] = [
  [
    "monthly: fixed charges in advance at each cycle start",
    async (s) => {
      const card = await s.card({ fixed_rates: [seats()] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 2 } });
      await s.advance("2026-02-15T00:00:00Z");
      await s.advance("2026-03-14T00:00:00Z");
      return s.bills();
    },
    [
      ["paid", "2000", [["Seats", "2", "1000", "2000"]]],
      ["paid", "2000", [["Seats", "2", "1000", "2000"]]],
    ],
  ],
  [
    "yearly: one cycle a year",
    async (s) => {
      const card = await s.card({ billing_interval: "yearly", fixed_rates: [seats(120000, "platform", "Platform")] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { platform: 1 } });
      await s.advance("2027-01-14T00:00:00Z");
      const before = (await s.bills()).length;
      await s.advance("2027-01-15T00:00:00Z");
      const sub = (await s.subscriptions())[0];
      return [before, await s.bills(), sub.current_period.start, sub.current_period.end];
    },
    [
      1,
      [
        ["paid", "120000", [["Platform", "1", "120000", "120000"]]],
        ["paid", "120000", [["Platform", "1", "120000", "120000"]]],
      ],
      "2027-01-15T00:00:00Z",
      "2028-01-15T00:00:00Z",
    ],
  ],
  [
    "a start mid-month keeps its day and time",
    async (s) => {
      await s.advance("2026-01-15T10:30:00Z");
      const card = await s.card({ fixed_rates: [seats()] });
      const r = await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
      const sub = r.subscription;
      return [sub.effective_at, sub.current_period.start, sub.current_period.end, sub.cycles_next_at];
    },
    ["2026-01-15T10:30:00Z", "2026-01-15T10:30:00Z", "2026-02-15T10:30:00Z", "2026-02-15T10:30:00Z"],
  ],
  [
    "Jan 31 clamps to Feb 28 and comes back to Mar 31",
    async (s) => {
      await s.advance("2026-01-31T00:00:00Z");
      const card = await s.card({ fixed_rates: [seats()] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
      await s.advance("2026-04-30T00:00:00Z");
      return (await s.invoices()).map((i) => i.created_at);
    },
    ["2026-01-31T00:00:00Z", "2026-02-28T00:00:00Z", "2026-03-31T00:00:00Z", "2026-04-30T00:00:00Z"],
  ],
  [
    "leap year: Jan 31 → Feb 29; a yearly Feb 29 anchor → Feb 28",
    async (s) => {
      await s.advance("2028-01-31T00:00:00Z");
      const monthly = await s.card({ fixed_rates: [seats()] });
      await s.subscribe({ rate_card_id: monthly, fixed_rate_quantities: { seats: 1 } });
      await s.advance("2028-02-29T00:00:00Z");
      const yearly = await s.card({ billing_interval: "yearly", fixed_rates: [seats(5000, "fee", "Fee")] });
      const r = await s.subscribe({ rate_card_id: yearly, fixed_rate_quantities: { fee: 1 } });
      return [(await s.invoices()).map((i) => i.created_at), r.subscription.current_period.end];
    },
    [["2028-01-31T00:00:00Z", "2028-02-29T00:00:00Z", "2028-02-29T00:00:00Z"], "2029-02-28T00:00:00Z"],
  ],
  [
    "cancel now: a final invoice for the usage so far, no new fixed charges",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [simple(m, usd("0.5"), 100)] });
      const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription;
      await s.events([["2026-01-20T00:00:00Z", "150"]]);
      await s.advance("2026-01-25T00:00:00Z");
      const cancelled = await s.call("POST", `/subscriptions/${sub.id}/cancel`, {});
      await s.advance("2026-04-01T00:00:00Z");
      return [cancelled.status, cancelled.current_period ?? null, await s.bills()];
    },
    [
      "cancelled",
      null,
      [
        ["paid", "1000", [["Seats", "1", "1000", "1000"]]],
        ["paid", "25", [["API calls", "50", "0.5", "25"]]],
      ],
    ],
  ],
  [
    "cancel at the end of the cycle: active until then, then a final usage invoice",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [simple(m, usd("0.5"), 100)] });
      const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription;
      const flagged = await s.call("POST", `/subscriptions/${sub.id}/cancel`, { cancel_at_end_of_cycle: true, reason: "user_requested" });
      await s.events([["2026-02-01T00:00:00Z", "150"]]);
      await s.advance("2026-02-14T23:59:59Z");
      const still = (await s.subscriptions())[0].status;
      await s.advance("2026-04-01T00:00:00Z");
      const end = (await s.subscriptions())[0];
      return [flagged.status, flagged.cancels_at_end_of_cycle, still, end.status, await s.bills()];
    },
    [
      "active",
      true,
      "active",
      "cancelled",
      [
        ["paid", "1000", [["Seats", "1", "1000", "1000"]]],
        ["paid", "25", [["API calls", "50", "0.5", "25"]]],
      ],
    ],
  ],
  [
    "change up with prorate: the difference for the rest of the period",
    async (s) => {
      // Period Jan 15 → Feb 15 (31 days); the change on Jan 31 leaves 15 days: Basic's credit −1000 × 15/31 =
      // −483.87 → −484, Pro's charge 3000 × 15/31 = 1451.61 → 1452; 968 in all.
      const a = await s.card({ name: "Basic", fixed_rates: [seats(1000)] });
      const b = await s.card({ name: "Pro", fixed_rates: [seats(3000)] });
      const sub = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 } })).subscription;
      await s.advance("2026-01-31T00:00:00Z");
      const r = await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: b, upgrade_behavior: "prorate" });
      await s.advance("2026-02-15T00:00:00Z");
      const bills = await s.bills();
      return [r.result.type, r.result.subscription.rate_card_id === b, bills.map(([st, total, lines]) => [st, total, lines.map((l) => [l[0], l[3]])])];
    },
    [
      "success",
      true,
      [
        ["paid", "1000", [["Seats", "1000"]]],
        [
          "paid",
          "968",
          [
            ["Unused time on Basic (prorated: 48.39% of the period left)", "-484"],
            ["Remaining time on Pro (prorated: 48.39% of the period left)", "1452"],
          ],
        ],
        ["paid", "3000", [["Seats", "3000"]]],
      ],
    ],
  ],
  [
    "change up with rate_difference: the whole difference",
    async (s) => {
      const a = await s.card({ name: "Basic", fixed_rates: [seats(1000)] });
      const b = await s.card({ name: "Pro", fixed_rates: [seats(3000)] });
      const sub = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 2 } })).subscription;
      await s.advance("2026-01-20T00:00:00Z");
      await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: b, upgrade_behavior: "rate_difference" });
      return s.bills();
    },
    [
      ["paid", "2000", [["Seats", "2", "1000", "2000"]]],
      // Basic's 2 × 1000 = 2000 credited, Pro's 2 × 3000 = 6000 charged: 4000.
      [
        "paid",
        "4000",
        [
          ["Rate difference: credit for Basic", "1", "-2000", "-2000"],
          ["Rate difference: charge for Pro", "1", "6000", "6000"],
        ],
      ],
    ],
  ],
  [
    "change down: nothing is charged; the next cycle uses the new card",
    async (s) => {
      const a = await s.card({ name: "Pro", fixed_rates: [seats(3000)] });
      const b = await s.card({ name: "Basic", fixed_rates: [seats(1000)] });
      const sub = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 } })).subscription;
      await s.advance("2026-01-20T00:00:00Z");
      await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: b });
      await s.advance("2026-02-15T00:00:00Z");
      return s.bills();
    },
    [
      ["paid", "3000", [["Seats", "1", "3000", "3000"]]],
      ["paid", "1000", [["Seats", "1", "1000", "1000"]]],
    ],
  ],
  [
    "usage of the old card is invoiced at the change, the new card's after it",
    async (s) => {
      const m = await s.metric();
      const a = await s.card({ name: "A", usage_based_rates: [simple(m, usd("2"))] });
      const b = await s.card({ name: "B", usage_based_rates: [simple(m, usd("3"))] });
      const sub = (await s.subscribe({ rate_card_id: a })).subscription;
      await s.events([["2026-01-16T00:00:00Z", "10"]]);
      await s.advance("2026-01-20T00:00:00Z");
      await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: b });
      await s.events([["2026-01-21T00:00:00Z", "4"]]);
      await s.advance("2026-02-15T00:00:00Z");
      return s.bills();
    },
    [
      ["open", "20", [["API calls", "10", "2", "20"]]],
      ["open", "12", [["API calls", "4", "3", "12"]]],
    ],
  ],
  [
    "zero usage leaves the usage line out",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [simple(m, usd("0.5"))] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
      await s.advance("2026-02-15T00:00:00Z");
      return s.bills();
    },
    [
      ["paid", "1000", [["Seats", "1", "1000", "1000"]]],
      ["paid", "1000", [["Seats", "1", "1000", "1000"]]],
    ],
  ],
  [
    "usage exactly at the included amount is free; one unit over is billed",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ usage_based_rates: [simple(m, usd("0.5"), 100)] });
      await s.subscribe({ rate_card_id: card });
      await s.events([["2026-01-20T00:00:00Z", "100"]]);
      await s.advance("2026-02-15T00:00:00Z");
      await s.events([["2026-02-20T00:00:00Z", "101"]]);
      await s.advance("2026-03-15T00:00:00Z");
      return s.bills();
    },
    // The first period's usage is all included: a $0 invoice records it (late usage of it would be adjusted).
    [
      ["paid", "0", []],
      ["open", "1", [["API calls", "1", "0.5", "1"]]],
    ],
  ],
  [
    "package, round_up: 999, 1000 and 1001 units of 1000-unit packages",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ usage_based_rates: [simple(m, { ...usd(10), package_units: 1000, rounding_behavior: "round_up" }, 0, "tok", "Tokens")] });
      await s.subscribe({ rate_card_id: card });
      await s.events([["2026-01-20T00:00:00Z", "999"]]);
      await s.advance("2026-02-15T00:00:00Z");
      await s.events([["2026-02-20T00:00:00Z", "1000"]]);
      await s.advance("2026-03-15T00:00:00Z");
      await s.events([["2026-03-20T00:00:00Z", "1001"]]);
      await s.advance("2026-04-15T00:00:00Z");
      return s.bills();
    },
    [
      ["open", "10", [["Tokens (1 × 1000 units)", "1", "10", "10"]]],
      ["open", "10", [["Tokens (1 × 1000 units)", "1", "10", "10"]]],
      ["open", "20", [["Tokens (2 × 1000 units)", "2", "10", "20"]]],
    ],
  ],
  [
    "package, round_down: 999, 1000, 1999 and 2000 units",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ usage_based_rates: [simple(m, { ...usd(10), package_units: 1000, rounding_behavior: "round_down" }, 0, "tok", "Tokens")] });
      await s.subscribe({ rate_card_id: card });
      const months = ["01", "02", "03", "04"];
      const units = ["999", "1000", "1999", "2000"];
      for (let i = 0; i < 4; i++) {
        await s.events([[`2026-${months[i]}-20T00:00:00Z`, units[i] as string]]);
        await s.advance(`2026-${String(i + 2).padStart(2, "0")}-15T00:00:00Z`);
      }
      return s.bills();
    },
    [
      ["paid", "0", []],
      ["open", "10", [["Tokens (1 × 1000 units)", "1", "10", "10"]]],
      ["open", "10", [["Tokens (1 × 1000 units)", "1", "10", "10"]]],
      ["open", "20", [["Tokens (2 × 1000 units)", "2", "10", "20"]]],
    ],
  ],
  [
    "a fixed package price charges whole packages",
    async (s) => {
      const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { ...usd(5000), package_units: 10, rounding_behavior: "round_up" } }] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 11 } });
      return s.bills();
    },
    [["paid", "10000", [["Seats (2 × 10)", "2", "5000", "10000"]]]],
  ],
  [
    "multiplier 0.5 halves fixed and usage amounts, rounded half-up",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [simple(m, usd("0.5"), 100)] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 3 }, rate_price_multipliers: { seats: "0.5", api: 0.5 } });
      await s.events([["2026-01-20T00:00:00Z", "150"]]);
      await s.advance("2026-02-15T00:00:00Z");
      return s.bills();
    },
    [
      ["paid", "1500", [["Seats", "3", "500", "1500"]]],
      [
        "paid",
        "1513",
        [
          ["Seats", "3", "500", "1500"],
          ["API calls", "50", "0.25", "13"],
        ],
      ],
    ],
  ],
  [
    "multiplier 0 makes a zero line; a zero total is paid at once",
    async (s) => {
      const card = await s.card({ fixed_rates: [seats()] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 2 }, rate_price_multipliers: { seats: "0" } });
      return s.bills();
    },
    [["paid", "0", [["Seats", "2", "0", "0"]]]],
  ],
  [
    "a zero quantity leaves the fixed line out",
    async (s) => {
      const card = await s.card({ fixed_rates: [seats(), seats(700, "addon", "Add-on")] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: "1", addon: "0" } });
      return s.bills();
    },
    [["paid", "1000", [["Seats", "1", "1000", "1000"]]]],
  ],
  [
    "dimensional: usage of a combination without a cell is billed at zero and named",
    async (s) => {
      const m = await s.metric({ aggregation_type: "sum", value_field: "n" }, ["region"]);
      const card = await s.card({
        usage_based_rates: [
          {
            usage_based_rate_type: "dimensional",
            code: "cpu",
            name: "CPU",
            pricing_metric_id: m,
            dimensions: [{ key: "region", values: ["eu", "us", "ap"] }],
            pricing_matrix: {
              cells: [
                { dimension_coordinates: { region: "eu" }, price: usd(2) },
                { dimension_coordinates: { region: "us" }, price: usd(1) },
              ],
            },
          },
        ],
      });
      await s.subscribe({ rate_card_id: card });
      await s.events([
        ["2026-01-20T00:00:00Z", "10", { region: "eu" }],
        ["2026-01-21T00:00:00Z", "5", { region: "us" }],
        ["2026-01-22T00:00:00Z", "7", { region: "ap" }],
      ]);
      await s.advance("2026-02-15T00:00:00Z");
      return s.bills();
    },
    [
      [
        "open",
        "25",
        [
          ["CPU (region=eu)", "10", "2", "20"],
          ["CPU (region=us)", "5", "1", "5"],
          ["CPU (region=ap: no price for this combination)", "7", "0", "0"],
        ],
      ],
    ],
  ],
  [
    "dimensional: included units are consumed by the most expensive cells first",
    async (s) => {
      const m = await s.metric({ aggregation_type: "sum", value_field: "n" }, ["region"]);
      const card = await s.card({
        usage_based_rates: [
          {
            usage_based_rate_type: "dimensional",
            code: "cpu",
            name: "CPU",
            pricing_metric_id: m,
            included_units: 12,
            dimensions: [{ key: "region", values: ["eu", "us"] }],
            pricing_matrix: {
              cells: [
                { dimension_coordinates: { region: "us" }, price: usd(1) },
                { dimension_coordinates: { region: "eu" }, price: usd(2) },
              ],
            },
          },
        ],
      });
      await s.subscribe({ rate_card_id: card });
      await s.events([
        ["2026-01-20T00:00:00Z", "10", { region: "eu" }],
        ["2026-01-21T00:00:00Z", "5", { region: "us" }],
      ]);
      await s.advance("2026-02-15T00:00:00Z");
      return s.bills();
    },
    [["open", "3", [["CPU (region=us)", "3", "1", "3"]]]],
  ],
  [
    "a paid plan with a declined card: nothing starts; a good card then starts it",
    async (s, t) => {
      const card = await s.card({ fixed_rates: [seats()] });
      const r = await s.call("POST", "/subscriptions", {
        subject_id: s.subjectId,
        rate_card_id: card,
        fixed_rate_quantities: { seats: 1 },
        checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" },
      });
      const declined = await s.payCheckout(r.result.action.checkout_url, CARD_DECLINED);
      t.regex(declined.text, /role="alert"[^>]*>Your card was declined/);
      const before = [await s.subscriptions(), await s.invoices()].map((x) => x.length);
      const ok = await s.payCheckout(r.result.action.checkout_url, CARD_OK);
      const again = await s.payCheckout(r.result.action.checkout_url, CARD_OK);
      return [declined.status, before, ok.status, ok.location, again.status, await s.bills()];
    },
    [402, [0, 0], 303, "https://app.example/ok", 410, [["paid", "1000", [["Seats", "1", "1000", "1000"]]]]],
  ],
  [
    "a free plan starts without a checkout; its usage invoice stays open without a card",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ fixed_rates: [seats(0, "base", "Base")], usage_based_rates: [simple(m, usd("0.5"), 100)] });
      const r = await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { base: 1 } }, null);
      await s.events([["2026-01-20T00:00:00Z", "150"]]);
      await s.advance("2026-02-15T00:00:00Z");
      return [r.result_type, await s.bills()];
    },
    [
      "success",
      [
        ["paid", "0", [["Base", "1", "0", "0"]]],
        [
          "open",
          "25",
          [
            ["Base", "1", "0", "0"],
            ["API calls", "50", "0.5", "25"],
          ],
        ],
      ],
    ],
  ],
  [
    "with a card on file a paid plan starts at once; create_checkout_session always still asks",
    async (s) => {
      const card = await s.card({ fixed_rates: [seats()] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
      const second = await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 2 } }, null);
      const always = await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 3 }, create_checkout_session: "always" }, null);
      return [second.result_type, always.result_type, always.action.requires_action_type, (await s.bills()).map((b) => b[1])];
    },
    ["success", "requires_action", "checkout", ["1000", "2000"]],
  ],
  [
    "rounding is half-up, once per line",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ usage_based_rates: [simple(m, usd("0.125"))] });
      await s.subscribe({ rate_card_id: card });
      await s.events([["2026-01-20T00:00:00Z", "4"]]);
      await s.advance("2026-02-15T00:00:00Z");
      await s.events([["2026-02-20T00:00:00Z", "11"]]);
      await s.advance("2026-03-15T00:00:00Z");
      return s.bills();
    },
    [
      ["open", "1", [["API calls", "4", "0.125", "1"]]],
      ["open", "1", [["API calls", "11", "0.125", "1"]]],
    ],
  ],
  [
    "a card whose charges fail: the invoice stays open and can be voided",
    async (s) => {
      const card = await s.card({ fixed_rates: [seats()] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, CARD_FAILS_LATER);
      const [inv] = await s.invoices();
      const voided = await s.call("POST", `/invoices/${inv.id}/void`, {});
      const again = await s.raw("POST", `/invoices/${inv.id}/void`, {});
      return [inv.status, voided.status, again.status, again.body.code];
    },
    ["open", "void", 400, "failed_precondition"],
  ],
  [
    "an open invoice can be marked uncollectible; a paid one cannot",
    async (s) => {
      const card = await s.card({ fixed_rates: [seats()] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, CARD_FAILS_LATER);
      await s.advance("2026-02-15T00:00:00Z");
      const [a, b] = await s.invoices();
      const marked = await s.call("POST", `/invoices/${b.id}/mark_uncollectible`, {});
      return [a.status, marked.status];
    },
    ["open", "uncollectible"],
  ],
  [
    "events at the cycle boundary belong to the cycle that starts there",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ usage_based_rates: [simple(m, usd(1))] });
      await s.subscribe({ rate_card_id: card });
      await s.events([
        ["2026-02-14T23:59:59.999Z", "3"],
        ["2026-02-15T00:00:00Z", "5"],
      ]);
      await s.advance("2026-03-15T00:00:00Z");
      return s.bills();
    },
    [
      ["open", "3", [["API calls", "3", "1", "3"]]],
      ["open", "5", [["API calls", "5", "1", "5"]]],
    ],
  ],
  [
    "catalog add-ons are charged when given a quantity of at least 1",
    async (s) => {
      const cat = (await s.call("POST", "/rate-catalogs", { name: "Add-ons", description: "" })).id;
      await s.call("POST", `/rate-catalogs/${cat}/add_rates`, { billing_interval: "monthly", fixed_rates: [seats(500, "support", "Support")] });
      const card = await s.card({ rate_catalog_id: cat, fixed_rates: [seats()] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1, support: 1 } });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1, support: 0 } });
      return s.bills();
    },
    [
      [
        "paid",
        "1500",
        [
          ["Seats", "1", "1000", "1000"],
          ["Support", "1", "500", "500"],
        ],
      ],
      ["paid", "1000", [["Seats", "1", "1000", "1000"]]],
    ],
  ],
  [
    "a max metric bills the peak over the included units",
    async (s) => {
      const m = await s.metric({ aggregation_type: "max", value_field: "n" }, [], "storage");
      const card = await s.card({ usage_based_rates: [simple(m, usd(100), 10, "gb", "Storage GB")] });
      await s.subscribe({ rate_card_id: card });
      await s.events(
        [
          ["2026-01-16T00:00:00Z", "5"],
          ["2026-01-17T00:00:00Z", "12"],
          ["2026-01-18T00:00:00Z", "7"],
        ],
        "storage",
      );
      await s.advance("2026-02-15T00:00:00Z");
      return s.bills();
    },
    [["open", "200", [["Storage GB", "2", "100", "200"]]]],
  ],
  [
    "a count metric bills the number of events; a last metric the latest value",
    async (s) => {
      const count = await s.metric({ aggregation_type: "count" }, [], "call");
      const last = await s.metric({ aggregation_type: "last", value_field: "n" }, [], "seat_count");
      const card = await s.card({ usage_based_rates: [simple(count, usd(10), 0, "calls", "Calls"), simple(last, usd(1000), 0, "seats", "Active seats")] });
      await s.subscribe({ rate_card_id: card });
      await s.events(
        [
          ["2026-01-16T00:00:00Z", "1"],
          ["2026-01-17T00:00:00Z", "1"],
          ["2026-01-18T00:00:00Z", "1"],
        ],
        "call",
      );
      await s.events(
        [
          ["2026-01-16T00:00:00Z", "3"],
          ["2026-01-25T00:00:00Z", "4"],
          ["2026-01-20T00:00:00Z", "5"],
        ],
        "seat_count",
      );
      await s.advance("2026-02-15T00:00:00Z");
      return s.bills();
    },
    [
      [
        "open",
        "4030",
        [
          ["Calls", "3", "10", "30"],
          ["Active seats", "4", "1000", "4000"],
        ],
      ],
    ],
  ],
  [
    "a jump of three months closes three cycles, in order",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [simple(m, usd(1))] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
      await s.events([
        ["2026-01-20T00:00:00Z", "1"],
        ["2026-02-20T00:00:00Z", "2"],
        ["2026-03-20T00:00:00Z", "3"],
      ]);
      await s.advance("2026-04-20T00:00:00Z");
      return (await s.bills()).map(([, total]) => total);
    },
    ["1000", "1001", "1002", "1003"],
  ],
];

for (const store of STORES) {
  const server = useServer(store);
  for (const [title, run, expected] of cases) {
    test(`${store}: ${title}`, async (t) => {
      const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
      t.deepEqual(await run(s, t), expected);
    });
  }
}
