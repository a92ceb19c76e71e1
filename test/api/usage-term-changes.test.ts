/**
 * A mid-cycle `PATCH /subscriptions/{id}` that changes a usage rate's terms (its multiplier, or a
 * usage-based catalog add-on taken or dropped) prices the usage before the change at the terms it
 * was used under, with either proration_behavior, and keeps the period's usage window whole: the
 * close prices the whole period at the new terms (one allowance of included units), and the PATCH
 * settles the difference for the part before the change: billed at once (a multiplier lowered, an
 * add-on dropped) or, raised or taken, as a negative adjustment line of the invoice that bills the
 * window (no credit to the balance: the ledger gets nothing), so a change undone later nets out
 * (DESIGN §13, docs/guides/pricing.md). Driven only through the public API on a test clock, on
 * MariaDB and SQLite; every figure is worked out beside it. Monthly cards from 2026-01-01: the
 * change is on Jan 30, the cycle closes on Feb 1; invoices are final at once and paid by card.
 *
 * An invoice reads [status, total, lines, credits applied, amount due], oldest first; a line
 * [description, kind, quantity, unit price, amount].
 */
import test from "ava";
import { seats, usd } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { EXACT, flat, lineOf, money, patch, usageRate } from "../helpers/price-bodies.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const JAN = "2026-01-01T00:00:00Z";
const CHANGE = "2026-01-30T00:00:00Z";
const FEB = "2026-02-01T00:00:00Z";
const BEFORE = `(${JAN} to ${CHANGE})`;

async function bills(s: Scenario): Promise<unknown[]> {
  return (await s.invoices()).map((i) => [
    i.status,
    i.total_amount.value,
    (i.line_items as Json[]).map((l) => lineOf(l, EXACT)),
    (i.credits_applied as Json[]).map((c) => c.amount.value),
    i.amount_due.value,
  ]);
}

/** The credits granted to the subject by changes (ledger entries `proration`) as [kind, description, amount], oldest first. */
async function ledger(s: Scenario): Promise<unknown[]> {
  const page = await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`);
  return (page.entries as Json[])
    .filter((e) => e.entry_type === "proration")
    .reverse()
    .map((e) => [e.entry_type, e.description, e.amount.value]);
}

/** A card with usage rate `api` (2 per unit of a sum metric, `included` units), fixed seats at 1,000 and a catalog offering usage add-on `gpu` (100 per unit, event "gpu"). */
async function plan(s: Scenario, quantities: Record<string, number>, included = 0, extra: Json = {}): Promise<string> {
  const api = await s.metric();
  const g = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "gpu");
  const cat = (await s.call("POST", "/rate-catalogs", { name: "Add-ons", description: "" })).id;
  const gpu = { usage_based_rate_type: "simple", code: "gpu", name: "GPU hours", pricing_metric_id: g, included_units: 0, price: usd(100) };
  await s.call("POST", `/rate-catalogs/${cat}/add_rates`, { billing_interval: "monthly", usage_based_rates: [gpu] });
  const card = await s.card({ rate_catalog_id: cat, fixed_rates: [seats()], usage_based_rates: [usageRate(api, flat(2), { included })] });
  return (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: quantities, ...extra })).subscription.id;
}

type Case = [string, (s: Scenario) => Promise<unknown>, unknown];

const SEATS: [string, string, string, string, string] = ["Seats", "fixed", "1", "1000", "1000"];

const cases: Case[] = [
  [
    "(1) api multiplier lowered to 0.5 (proration_behavior none): the usage before the change stays at ×1",
    async (s) => {
      const id = await plan(s, { seats: 1 });
      await s.events([
        ["2026-01-10T00:00:00Z", "4000"],
        ["2026-01-29T00:00:00Z", "6000"],
      ]);
      await s.advance(CHANGE);
      const r = await patch(s, id, { rate_price_multipliers: { api: "0.5" }, proration_behavior: "none" });
      await s.events([["2026-01-31T00:00:00Z", "1000"]]);
      await s.advance(FEB);
      return [r.subscription.rate_price_multipliers, r.proration_invoice, await bills(s)];
    },
    [
      { api: "0.5" },
      null,
      [
        ["paid", "1000", [SEATS], [], "1000"],
        // Jan 30: 10,000 units before the change: 10,000 × 2 = 20,000 at ×1, less 10,000 × 2 × 0.5 = 10,000
        // that the close bills for them at ×0.5: 10,000 (the old code billed nothing here).
        ["paid", "10000", [[`API calls: usage before the change (multiplier 1 → 0.5) at the old terms ${BEFORE}`, "adjustment", "1", "10000", "10000"]], [], "10000"],
        // Feb 1: 1 seat 1,000; the whole period at ×0.5: 11,000 × 2 × 0.5 = 11,000.
        // API calls in all: 10,000 + 11,000 = 21,000 = 20,000 (before, ×1) + 1,000 (1,000 after × 2 × 0.5).
        ["paid", "12000", [SEATS, ["API calls", "usage", "11000", "1", "11000"]], [], "12000"],
      ],
    ],
  ],
  [
    "(2) the same with 1,000 units included: one allowance over the whole period",
    async (s) => {
      const id = await plan(s, { seats: 1 }, 1000);
      await s.events([
        ["2026-01-10T00:00:00Z", "4000"],
        ["2026-01-29T00:00:00Z", "6000"],
      ]);
      await s.advance(CHANGE);
      await patch(s, id, { rate_price_multipliers: { api: "0.5" } });
      await s.events([["2026-01-31T00:00:00Z", "1000"]]);
      await s.advance(FEB);
      return bills(s);
    },
    [
      ["paid", "1000", [SEATS], [], "1000"],
      // Jan 30: (10,000 − 1,000) × 2 = 18,000 at ×1, less (10,000 − 1,000) × 1 = 9,000 at ×0.5: 9,000.
      ["paid", "9000", [[`API calls: usage before the change (multiplier 1 → 0.5) at the old terms ${BEFORE}`, "adjustment", "1", "9000", "9000"]], [], "9000"],
      // Feb 1: the whole period, one allowance: (11,000 − 1,000) × 2 × 0.5 = 10,000.
      // API calls in all: 9,000 + 10,000 = 19,000 = 18,000 (before, ×1) + 1,000 (1,000 after × 1).
      ["paid", "11000", [SEATS, ["API calls", "usage", "10000", "1", "10000"]], [], "11000"],
    ],
  ],
  [
    "(3) the gpu add-on dropped: its usage before the change billed at once; api keeps one allowance",
    async (s) => {
      const id = await plan(s, { seats: 1, gpu: 1 }, 1000);
      await s.events(
        [
          ["2026-01-05T00:00:00Z", "200"],
          ["2026-01-29T00:00:00Z", "300"],
        ],
        "gpu",
      );
      await s.events([["2026-01-10T00:00:00Z", "6000"]]);
      await s.advance(CHANGE);
      const r = await patch(s, id, { fixed_rate_quantities: { gpu: 0 } });
      await s.events([["2026-01-31T00:00:00Z", "50"]], "gpu");
      await s.events([["2026-01-31T00:00:00Z", "4000"]]);
      await s.advance(FEB);
      return [r.subscription.fixed_rate_quantities, r.proration_invoice, await bills(s)];
    },
    [
      { seats: "1", gpu: "0" },
      null,
      [
        ["paid", "1000", [SEATS], [], "1000"],
        // Jan 30: gpu (200 + 300) × 100 = 50,000, less 0 (not charged after): 50,000 (the old code never billed it).
        ["paid", "50000", [[`GPU hours: usage before the change (dropped) at the old terms ${BEFORE}`, "adjustment", "1", "50000", "50000"]], [], "50000"],
        // Feb 1: 1 seat 1,000; api (6,000 + 4,000 − 1,000) × 2 = 18,000, one allowance for the period; no gpu (its 50 of Jan 31 not billed).
        ["paid", "19000", [SEATS, ["API calls", "usage", "9000", "2", "18000"]], [], "19000"],
      ],
    ],
  ],
  [
    "(4) the gpu add-on taken: the close bills its usage since the period's start less its usage before the change",
    async (s) => {
      const id = await plan(s, { seats: 1 });
      await s.events([["2026-01-15T00:00:00Z", "500"]], "gpu");
      await s.advance(CHANGE);
      const r = await patch(s, id, { fixed_rate_quantities: { gpu: 1 } });
      await s.events([["2026-01-31T00:00:00Z", "20"]], "gpu");
      await s.advance(FEB);
      return [r.subscription.fixed_rate_quantities, r.proration_invoice, await ledger(s), await bills(s)];
    },
    [
      { seats: "1", gpu: "1" },
      null,
      // Jan 30: its 500 units before the change cost 0 at the old terms (not taken) and 500 × 100 = 50,000 at the new
      // ones, which the close bills: −50,000 kept for the close's invoice; nothing granted to the balance.
      [],
      [
        ["paid", "1000", [SEATS], [], "1000"],
        // Feb 1: 1 seat 1,000; gpu for the period (500 + 20) × 100 = 52,000, less 50,000 for the usage before the
        // change: 3,000 = 1,000 + 20 × 100, the 20 units used with the add-on.
        [
          "paid",
          "3000",
          [SEATS, ["GPU hours", "usage", "520", "100", "52000"], [`GPU hours: usage before the change (taken) at the old terms ${BEFORE}`, "adjustment", "1", "-50000", "-50000"]],
          [],
          "3000",
        ],
      ],
    ],
  ],
  [
    "(5) api multiplier raised to 3: the close takes the usage before the change back to ×1",
    async (s) => {
      const id = await plan(s, { seats: 1 });
      await s.events([["2026-01-20T00:00:00Z", "10000"]]);
      await s.advance(CHANGE);
      await patch(s, id, { rate_price_multipliers: { api: "3" } });
      await s.events([["2026-01-31T00:00:00Z", "1000"]]);
      await s.advance(FEB);
      return [await ledger(s), await bills(s)];
    },
    [
      // Jan 30: 10,000 units before the change: 10,000 × 2 = 20,000 at ×1, 60,000 at ×3: −40,000 for the close.
      [],
      [
        ["paid", "1000", [SEATS], [], "1000"],
        // Feb 1: 1 seat 1,000; the period at ×3: 11,000 × 2 × 3 = 66,000, less 40,000 for the usage before the change: 27,000.
        // API calls in all: 66,000 − 40,000 = 26,000 = 20,000 (before, ×1) + 6,000 (1,000 after × 2 × 3).
        [
          "paid",
          "27000",
          [SEATS, ["API calls", "usage", "11000", "6", "66000"], [`API calls: usage before the change (multiplier 1 → 3) at the old terms ${BEFORE}`, "adjustment", "1", "-40000", "-40000"]],
          [],
          "27000",
        ],
      ],
    ],
  ],
  [
    "(5a) raised to 3, then lowered to 0.5 in the same period: each part of the usage at its own multiplier",
    async (s) => {
      const id = await plan(s, { seats: 1 });
      await s.events([["2026-01-10T00:00:00Z", "1000"]]);
      await s.advance("2026-01-15T00:00:00Z");
      await patch(s, id, { rate_price_multipliers: { api: "3" } });
      await s.events([["2026-01-20T00:00:00Z", "1000"]]);
      await s.advance(CHANGE);
      await patch(s, id, { rate_price_multipliers: { api: "0.5" } });
      await s.events([["2026-01-31T00:00:00Z", "1000"]]);
      await s.advance(FEB);
      return [await ledger(s), (await bills(s)).slice(1)];
    },
    [
      // Jan 15: 1,000 units: 2,000 at ×1, 6,000 at ×3: −4,000 kept for the window (priced for a close at ×3).
      [],
      [
        // Jan 30: 2,000 units: 12,000 at ×3, 2,000 at ×0.5: 10,000, net of the −4,000 kept (the close no longer bills ×3): 6,000.
        ["paid", "6000", [[`API calls: usage before the change (multiplier 3 → 0.5) at the old terms ${BEFORE}, net of earlier changes' USD -40.00`, "adjustment", "1", "6000", "6000"]], [], "6000"],
        // Feb 1: 1 seat 1,000; 3,000 × 2 × 0.5 = 3,000, nothing kept to take off.
        // API calls in all: 6,000 + 3,000 = 9,000 = 2,000 (×1) + 6,000 (×3) + 1,000 (×0.5).
        ["paid", "4000", [SEATS, ["API calls", "usage", "3000", "1", "3000"]], [], "4000"],
      ],
    ],
  ],
  [
    "(5e) raised to 3, then usage dated before the change sent after it: priced at ×1 as the rest before it",
    async (s) => {
      const id = await plan(s, { seats: 1 });
      await s.events([["2026-01-20T00:00:00Z", "10000"]]);
      await s.advance(CHANGE);
      await patch(s, id, { rate_price_multipliers: { api: "3" } });
      await s.advance("2026-01-31T00:00:00Z");
      await s.events([["2026-01-25T00:00:00Z", "1000"]]);
      await s.advance(FEB);
      return (await bills(s)).slice(1);
    },
    [
      // Feb 1: 1 seat 1,000; the period at ×3: 11,000 × 2 × 3 = 66,000, less the 11,000 units before the change at
      // ×3 − ×1: 44,000 (priced at the close, the late 1,000 included): 22,000 = 11,000 × 2, all used at ×1
      // (the old code kept −40,000 from the change: 26,000, 4,000 too much).
      [
        "paid",
        "23000",
        [SEATS, ["API calls", "usage", "11000", "6", "66000"], [`API calls: usage before the change (multiplier 1 → 3) at the old terms ${BEFORE}`, "adjustment", "1", "-44000", "-44000"]],
        [],
        "23000",
      ],
    ],
  ],
  [
    "(5f) raised to 3, then a negative correction dated before the change: the adjustment shrinks with it",
    async (s) => {
      const id = await plan(s, { seats: 1 });
      await s.events([["2026-01-20T00:00:00Z", "10000"]]);
      await s.advance(CHANGE);
      await patch(s, id, { rate_price_multipliers: { api: "3" } });
      await s.advance("2026-01-31T00:00:00Z");
      await s.events([
        ["2026-01-20T00:00:00Z", "-8000"],
        ["2026-01-31T00:00:00Z", "1000"],
      ]);
      await s.advance(FEB);
      return (await bills(s)).slice(1);
    },
    [
      // Feb 1: 1 seat 1,000; 3,000 × 2 × 3 = 18,000, less the 2,000 units before the change at ×3 − ×1: 8,000:
      // 10,000 = 2,000 × 2 (×1) + 1,000 × 6 (×3) (the old code kept −40,000, capped at the 18,000: 0 for API calls).
      [
        "paid",
        "11000",
        [SEATS, ["API calls", "usage", "3000", "6", "18000"], [`API calls: usage before the change (multiplier 1 → 3) at the old terms ${BEFORE}`, "adjustment", "1", "-8000", "-8000"]],
        [],
        "11000",
      ],
    ],
  ],
  [
    "(5g) raised to 3, lowered to 1, raised to 3, with late usage before the first: each part at its own multiplier",
    async (s) => {
      const id = await plan(s, { seats: 1 });
      await s.events([["2026-01-10T00:00:00Z", "1000"]]);
      await s.advance("2026-01-15T00:00:00Z");
      await patch(s, id, { rate_price_multipliers: { api: "3" } });
      await s.events([["2026-01-20T00:00:00Z", "1000"]]);
      await s.advance("2026-01-25T00:00:00Z");
      await patch(s, id, { rate_price_multipliers: { api: "1" } });
      await s.events([["2026-01-27T00:00:00Z", "1000"]]);
      await s.advance(CHANGE);
      await patch(s, id, { rate_price_multipliers: { api: "3" } });
      await s.advance("2026-01-31T00:00:00Z");
      await s.events([
        ["2026-01-12T00:00:00Z", "1000"],
        ["2026-01-31T00:00:00Z", "1000"],
      ]);
      await s.advance(FEB);
      return (await bills(s)).slice(1).map((b) => (b as unknown[]).slice(1, 3));
    },
    [
      // Jan 25: 2,000 units: 12,000 at ×3, 4,000 at ×1: 8,000, net of the Jan 15 change's (1 − 3) × 2 × 1,000 = −4,000: 4,000.
      [
        "4000",
        [
          [
            "API calls: usage before the change (multiplier 3 → 1) at the old terms (2026-01-01T00:00:00Z to 2026-01-25T00:00:00Z), net of earlier changes' USD -40.00",
            "adjustment",
            "1",
            "4000",
            "4000",
          ],
        ],
      ],
      // Feb 1: 1 seat 1,000; 5,000 × 6 = 30,000, less the 4,000 units before Jan 30 (the late 1,000 of Jan 12 included) at
      // ×3 − ×1: 16,000: 14,000. API calls in all: 4,000 + 14,000 = 18,000 = 3,000 × 2 (×1: Jan 10, 12, 27) + 2,000 × 6
      // (×3: Jan 20, 31) (the old code kept −12,000: 22,000).
      ["15000", [SEATS, ["API calls", "usage", "5000", "6", "30000"], [`API calls: usage before the change (multiplier 1 → 3) at the old terms ${BEFORE}`, "adjustment", "1", "-16000", "-16000"]]],
    ],
  ],
  [
    "(5h) raised to 3, lowered to 2 with no usage since: still negative, both kept for the close",
    async (s) => {
      const id = await plan(s, { seats: 1 });
      await s.events([["2026-01-10T00:00:00Z", "1000"]]);
      await s.advance("2026-01-15T00:00:00Z");
      await patch(s, id, { rate_price_multipliers: { api: "3" } });
      await s.advance(CHANGE);
      await patch(s, id, { rate_price_multipliers: { api: "2" } });
      await s.events([["2026-01-31T00:00:00Z", "1000"]]);
      await s.advance(FEB);
      return (await bills(s)).slice(1).map((b) => (b as unknown[]).slice(1, 3));
    },
    [
      // Feb 1: 1 seat 1,000; 2,000 × 4 = 8,000, + (3 − 2) × 2 × 1,000 = 2,000 (Jan 30) − (3 − 1) × 2 × 1,000 = 4,000 (Jan 15):
      // 6,000 = 1,000 × 2 (×1) + 1,000 × 4 (×2).
      [
        "7000",
        [
          SEATS,
          ["API calls", "usage", "2000", "4", "8000"],
          [`API calls: usage before the change (multiplier 3 → 2) at the old terms ${BEFORE}`, "adjustment", "1", "2000", "2000"],
          ["API calls: usage before the change (multiplier 1 → 3) at the old terms (2026-01-01T00:00:00Z to 2026-01-15T00:00:00Z)", "adjustment", "1", "-4000", "-4000"],
        ],
      ],
    ],
  ],
  [
    "(5c) lowered to 0.5, then back to 1: the settlement of the first change is credited back by the second",
    async (s) => {
      const id = await plan(s, { seats: 1 });
      await s.events([["2026-01-10T00:00:00Z", "10000"]]);
      await s.advance("2026-01-20T00:00:00Z");
      await patch(s, id, { rate_price_multipliers: { api: "0.5" } });
      await s.advance("2026-01-25T00:00:00Z");
      await patch(s, id, { rate_price_multipliers: { api: "1" } });
      await s.advance(FEB);
      return [await ledger(s), (await bills(s)).slice(1).map((b) => (b as unknown[]).slice(1))];
    },
    [
      // Jan 25: 10,000 units: 10,000 at ×0.5, 20,000 at ×1: −10,000 for the close.
      [],
      [
        // Jan 20: 20,000 at ×1 less 10,000 at ×0.5: 10,000.
        ["10000", [["API calls: usage before the change (multiplier 1 → 0.5) at the old terms (2026-01-01T00:00:00Z to 2026-01-20T00:00:00Z)", "adjustment", "1", "10000", "10000"]], [], "10000"],
        // Feb 1: 1 seat 1,000 + 10,000 × 2 = 20,000, less 10,000 for the usage before the change: 11,000.
        // API calls in all: 10,000 + 20,000 − 10,000 = 20,000, every unit at ×1 (the old code billed 30,000).
        [
          "11000",
          [
            SEATS,
            ["API calls", "usage", "10000", "2", "20000"],
            ["API calls: usage before the change (multiplier 0.5 → 1) at the old terms (2026-01-01T00:00:00Z to 2026-01-25T00:00:00Z)", "adjustment", "1", "-10000", "-10000"],
          ],
          [],
          "11000",
        ],
      ],
    ],
  ],
  [
    "(3b) the gpu add-on dropped, then taken again: its usage billed once",
    async (s) => {
      const id = await plan(s, { seats: 1, gpu: 1 });
      await s.events([["2026-01-05T00:00:00Z", "500"]], "gpu");
      await s.advance("2026-01-15T00:00:00Z");
      await patch(s, id, { fixed_rate_quantities: { gpu: 0 } });
      await s.advance("2026-01-20T00:00:00Z");
      await patch(s, id, { fixed_rate_quantities: { gpu: 1 } });
      await s.advance(FEB);
      return [await ledger(s), (await bills(s)).slice(1).map((b) => (b as unknown[]).slice(1))];
    },
    [
      // Jan 20: 500 × 100 = 50,000 at the new terms, 0 at the old (not taken): −50,000 for the close.
      [],
      [
        // Jan 15: 500 × 100 = 50,000 (dropped).
        ["50000", [["GPU hours: usage before the change (dropped) at the old terms (2026-01-01T00:00:00Z to 2026-01-15T00:00:00Z)", "adjustment", "1", "50000", "50000"]], [], "50000"],
        // Feb 1: 1 seat 1,000 + gpu 500 × 100 = 50,000, less 50,000 for the usage before the change: 1,000.
        // GPU hours in all: 50,000 + 50,000 − 50,000 = 50,000 (the old code billed 100,000).
        [
          "1000",
          [
            SEATS,
            ["GPU hours", "usage", "500", "100", "50000"],
            ["GPU hours: usage before the change (taken) at the old terms (2026-01-01T00:00:00Z to 2026-01-20T00:00:00Z)", "adjustment", "1", "-50000", "-50000"],
          ],
          [],
          "1000",
        ],
      ],
    ],
  ],
  [
    "(5b) a multiplier lowered on a volume-tiered rate: nothing settled (its charge does not add up with usage)",
    async (s) => {
      const m = await s.metric();
      const volume = {
        price_type: "tiered",
        tiers_mode: "volume",
        tiers: [
          { up_to: "10000", unit_amount: { currency_code: "USD", value: "2" } },
          { up_to: null, unit_amount: { currency_code: "USD", value: "1" } },
        ],
      };
      const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [usageRate(m, volume)] });
      const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription.id;
      await s.events([["2026-01-10T00:00:00Z", "10000"]]);
      await s.advance(CHANGE);
      await patch(s, id, { rate_price_multipliers: { api: "0.5" } });
      await s.events([["2026-01-31T00:00:00Z", "1000"]]);
      await s.advance(FEB);
      return (await s.invoices()).map((i) => i.total_amount.value);
    },
    // No invoice on Jan 30; Feb 1: 1,000 + 11,000 units all at the 1 tier × 0.5 = 5,500: 6,500.
    ["1000", "6500"],
  ],
  [
    "(6) a minimum commitment counts the settlement of the usage before the change in the period's charges",
    async (s) => {
      const id = await plan(s, { seats: 1 }, 0, { minimum_commitment: money(30000) });
      await s.events([["2026-01-10T00:00:00Z", "10000"]]);
      await s.advance(CHANGE);
      await patch(s, id, { rate_price_multipliers: { api: "0.5" } });
      await s.events([["2026-01-31T00:00:00Z", "1000"]]);
      await s.advance(FEB);
      const close = (await s.invoices()).at(-1) as Json;
      return (close.line_items as Json[]).filter((l) => l.kind === "commitment_true_up").map((l) => l.amount.value);
    },
    // The period's charges: seats 1,000 (Jan 1) + 10,000 settled on Jan 30 + API calls 11,000 × 2 × 0.5 = 11,000 at the
    // close = 22,000; true-up 30,000 − 22,000 = 8,000 (not 18,000, as if the settlement were not the period's).
    ["8000"],
  ],
  [
    "(6b) a minimum commitment counts the adjustment of a raised multiplier less in the period's charges",
    async (s) => {
      const id = await plan(s, { seats: 1 }, 0, { minimum_commitment: money(100000) });
      await s.events([["2026-01-10T00:00:00Z", "10000"]]);
      await s.advance(CHANGE);
      await patch(s, id, { rate_price_multipliers: { api: "3" } });
      await s.events([["2026-01-31T00:00:00Z", "1000"]]);
      await s.advance(FEB);
      const close = (await s.invoices()).at(-1) as Json;
      return [(close.line_items as Json[]).filter((l) => l.kind === "commitment_true_up").map((l) => l.amount.value), close.amount_due.value];
    },
    // January's charges: seats 1,000 + API calls 11,000 × 2 × 3 = 66,000 − 40,000 adjusted at the close
    // (10,000 × 2 × (3 − 1)) = 27,000; true-up 100,000 − 27,000 = 73,000 (the old code: 33,000, as if 67,000 were
    // charged). Due: seats 1,000 (February's) + 66,000 − 40,000 + 73,000 = 100,000: January costs
    // 1,000 + 66,000 − 40,000 + 73,000 = 100,000, the commitment.
    [["73000"], "100000"],
  ],
];

for (const store of STORES) {
  const server = useServer(store);
  for (const [title, run, expected] of cases) {
    test(`${store}: ${title}`, async (t) => {
      const s = await Scenario.start(server, JAN);
      const got = await run(s);
      if (process.env.GOLDEN_LOG) t.log(JSON.stringify(got));
      t.deepEqual(got, expected);
    });
  }

  test(`${store}: (5d) raised to 3 with a grace period: the draft keeps the adjustment once at finalization, and late usage adjusts only the usage`, async (t) => {
    const s = await Scenario.start(server, JAN, { invoiceGraceSeconds: 3600 });
    const id = await plan(s, { seats: 1 });
    await s.events([["2026-01-20T00:00:00Z", "10000"]]);
    await s.advance(CHANGE);
    await patch(s, id, { rate_price_multipliers: { api: "3" } });
    await s.advance(FEB);
    // A late event of the period within the grace period (lands on the draft), then one after it (an adjustment next period).
    await s.events([["2026-01-31T00:00:00Z", "1000"]]);
    await s.advance("2026-02-01T02:00:00Z");
    await s.events([["2026-01-31T12:00:00Z", "500"]]);
    await s.advance("2026-03-01T02:00:00Z");
    const all = await bills(s);
    t.deepEqual(all.slice(1), [
      // Feb 1: 1,000 + 11,000 × 2 × 3 = 66,000 − 40,000 (10,000 × 2 × 2, once) = 27,000.
      [
        "paid",
        "27000",
        [SEATS, ["API calls", "usage", "11000", "6", "66000"], [`API calls: usage before the change (multiplier 1 → 3) at the old terms ${BEFORE}`, "adjustment", "1", "-40000", "-40000"]],
        [],
        "27000",
      ],
      // Mar 1: 1,000 (no usage in February) + the 500 late units at ×3: 3,000; the −40,000 is not adjusted again.
      ["paid", "4000", [SEATS, ["Late usage adjustment: API calls (period 2026-01-01T00:00:00Z to 2026-02-01T00:00:00Z)", "adjustment", "500", "6", "3000"]], [], "4000"],
    ]);
  });
}
