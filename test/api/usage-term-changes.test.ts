/**
 * A mid-cycle `PATCH /subscriptions/{id}` that prices usage differently (a usage rate's
 * multiplier, or a usage-based catalog add-on taken or dropped) closes the usage window at once:
 * the usage before the change is priced at the terms it was used under, with either
 * proration_behavior, and the new terms price the usage from the change on (DESIGN §13,
 * docs/guides/pricing.md). Driven only through the public API on a test clock, on MariaDB and
 * SQLite; every figure is worked out beside it. Monthly cards from 2026-01-01: the change is on
 * Jan 30, the cycle closes on Feb 1.
 *
 * A line is [description, kind, quantity, unit price, amount]; an invoice [status, total, lines],
 * oldest first. A free plan has no card on file: its invoices with a total above 0 stay "open".
 */
import test from "ava";
import { seats, usd } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { EXACT, flat, money, patch, priced, usageRate } from "../helpers/price-bodies.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";

const JAN = "2026-01-01T00:00:00Z";
const CHANGE = "2026-01-30T00:00:00Z";
const FEB = "2026-02-01T00:00:00Z";

/** A card with usage rate `api`, flat 2 per unit of a sum metric, no included units; the subscription's id. */
async function apiPlan(s: Scenario, extra: Record<string, unknown> = {}): Promise<string> {
  const m = await s.metric();
  const card = await s.card({ usage_based_rates: [usageRate(m, flat(2))] });
  return (await s.subscribe({ rate_card_id: card, ...extra })).subscription.id;
}

/** A card with seats (1,000 a month) whose catalog offers usage add-on `gpu` at 100 per unit (event "gpu"); subscribed with `quantities`. */
async function gpuPlan(s: Scenario, quantities: Record<string, number>): Promise<string> {
  const m = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "gpu");
  const cat = (await s.call("POST", "/rate-catalogs", { name: "Add-ons", description: "" })).id;
  const gpu = { usage_based_rate_type: "simple", code: "gpu", name: "GPU hours", pricing_metric_id: m, included_units: 0, price: usd(100) };
  await s.call("POST", `/rate-catalogs/${cat}/add_rates`, { billing_interval: "monthly", usage_based_rates: [gpu] });
  const card = await s.card({ rate_catalog_id: cat, fixed_rates: [seats()] });
  return (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: quantities })).subscription.id;
}

type Case = [string, (s: Scenario) => Promise<unknown>, unknown, { invoiceGraceSeconds?: number }?];

const cases: Case[] = [
  [
    "a usage multiplier lowered with proration_behavior none: the usage before the change at ×1",
    async (s) => {
      const id = await apiPlan(s);
      await s.events([
        ["2026-01-10T00:00:00Z", "4000"],
        ["2026-01-29T12:00:00Z", "6000"],
      ]);
      await s.advance(CHANGE);
      const r = await patch(s, id, { rate_price_multipliers: { api: "0.5" }, proration_behavior: "none" });
      // After the change: 1,000 units on Jan 31, and 100 of Jan 15 sent late (the window's invoice is final).
      await s.events([
        ["2026-01-31T00:00:00Z", "1000"],
        ["2026-01-15T00:00:00Z", "100"],
      ]);
      await s.advance(FEB);
      return [r.subscription.rate_price_multipliers, r.proration_invoice, await priced(s, EXACT)];
    },
    [
      { api: "0.5" },
      // proration_behavior none, and a usage rate has nothing to prorate: nothing charged by the change itself.
      null,
      [
        // Jan 30, the window Jan 1 → Jan 30 at ×1: 10,000 × 2 = 20,000 (the old code billed it ×0.5 on Feb 1: 10,000).
        ["open", "20000", [["API calls", "usage", "10000", "2", "20000"]]],
        // Feb 1: Jan 30 → Feb 1 at ×0.5: 1,000 × 2 × 0.5 = 1,000; the late 100 of Jan 15 at ×1: 100 × 2 = 200.
        [
          "open",
          "1200",
          [
            ["API calls", "usage", "1000", "1", "1000"],
            ["Late usage adjustment: API calls (period 2026-01-01T00:00:00Z to 2026-01-30T00:00:00Z)", "adjustment", "100", "2", "200"],
          ],
        ],
      ],
    ],
  ],
  [
    "a usage multiplier raised (prorated), late usage on the draft of the window: the usage before the change at ×1",
    async (s) => {
      const id = await apiPlan(s);
      await s.events([["2026-01-20T00:00:00Z", "10000"]]);
      await s.advance(CHANGE);
      await patch(s, id, { rate_price_multipliers: { api: "3" } });
      // Late, within the draft's grace period: it lands on the window before the change, at ×1.
      await s.events([
        ["2026-01-29T00:00:00Z", "500"],
        ["2026-01-31T00:00:00Z", "100"],
      ]);
      await s.advance(FEB);
      return priced(s, EXACT);
    },
    [
      // Jan 30, the window Jan 1 → Jan 30 at ×1, a draft until 01:00 that took the late 500 of Jan 29:
      // (10,000 + 500) × 2 = 21,000 (the old code: 10,600 × 2 × 3 = 63,600 on Feb 1).
      ["open", "21000", [["API calls", "usage", "10500", "2", "21000"]]],
      // Feb 1 (a draft for its grace hour): Jan 30 → Feb 1 at ×3: 100 × 2 × 3 = 600.
      ["draft", "600", [["API calls", "usage", "100", "6", "600"]]],
    ],
    { invoiceGraceSeconds: 3600 },
  ],
  [
    "a minimum commitment counts the window the change closed and the one the cycle closes",
    async (s) => {
      const id = await apiPlan(s, { minimum_commitment: money(30000) });
      await s.events([["2026-01-20T00:00:00Z", "10000"]]);
      await s.advance(CHANGE);
      await patch(s, id, { rate_price_multipliers: { api: "0.5" } });
      await s.events([["2026-01-31T00:00:00Z", "1000"]]);
      await s.advance(FEB);
      return (await priced(s, EXACT)).map(([status, total, lines]) => [status, total, lines.map((l) => [l[1], l[4]])]);
    },
    [
      // Jan 30: 10,000 × 2 at ×1 = 20,000.
      ["open", "20000", [["usage", "20000"]]],
      // Feb 1: 1,000 × 2 × 0.5 = 1,000; the period's charges 20,000 + 1,000 = 21,000 < 30,000: true-up 9,000.
      [
        "open",
        "10000",
        [
          ["usage", "1000"],
          ["commitment_true_up", "9000"],
        ],
      ],
    ],
  ],
  [
    "a usage-based add-on dropped: its usage before the change is billed",
    async (s) => {
      const id = await gpuPlan(s, { seats: 1, gpu: 1 });
      await s.events(
        [
          ["2026-01-05T00:00:00Z", "200"],
          ["2026-01-29T00:00:00Z", "300"],
        ],
        "gpu",
      );
      await s.advance(CHANGE);
      const r = await patch(s, id, { fixed_rate_quantities: { gpu: 0 } });
      await s.events([["2026-01-31T00:00:00Z", "50"]], "gpu");
      await s.advance(FEB);
      return [r.subscription.fixed_rate_quantities, r.proration_invoice, await priced(s, EXACT)];
    },
    [
      { seats: "1", gpu: "0" },
      // A usage add-on has no fixed charge to prorate.
      null,
      [
        // Jan 1: 1 seat × 1,000 in advance.
        ["paid", "1000", [["Seats", "fixed", "1", "1000", "1000"]]],
        // Jan 30, the window Jan 1 → Jan 30 with gpu taken: (200 + 300) × 100 = 50,000 (the old code never billed it).
        ["paid", "50000", [["GPU hours", "usage", "500", "100", "50000"]]],
        // Feb 1: 1 seat × 1,000; gpu dropped, its 50 units of Jan 31 are not billed.
        ["paid", "1000", [["Seats", "fixed", "1", "1000", "1000"]]],
      ],
    ],
  ],
  [
    "a usage-based add-on taken: only its usage from the change on is billed",
    async (s) => {
      const id = await gpuPlan(s, { seats: 1 });
      await s.events([["2026-01-15T00:00:00Z", "500"]], "gpu");
      await s.advance(CHANGE);
      const r = await patch(s, id, { fixed_rate_quantities: { gpu: 1 } });
      await s.events([["2026-01-31T00:00:00Z", "20"]], "gpu");
      await s.advance(FEB);
      return [r.subscription.fixed_rate_quantities, r.proration_invoice, await priced(s, EXACT)];
    },
    [
      { seats: "1", gpu: "1" },
      null,
      [
        // Jan 1: 1 seat × 1,000. Jan 30: the window Jan 1 → Jan 30 had no usage rate: no invoice.
        ["paid", "1000", [["Seats", "fixed", "1", "1000", "1000"]]],
        // Feb 1: 1 seat × 1,000; gpu Jan 30 → Feb 1: 20 × 100 = 2,000 (the old code: its 500 of Jan 15 too, 520 × 100 = 52,000).
        [
          "paid",
          "3000",
          [
            ["Seats", "fixed", "1", "1000", "1000"],
            ["GPU hours", "usage", "20", "100", "2000"],
          ],
        ],
      ],
    ],
  ],
];

for (const store of STORES) {
  const server = useServer(store);
  for (const [title, run, expected, opts] of cases) {
    test(`${store}: ${title}`, async (t) => {
      const s = await Scenario.start(server, JAN, opts);
      const got = await run(s);
      if (process.env.GOLDEN_LOG) t.log(JSON.stringify(got));
      t.deepEqual(got, expected);
    });
  }
}
