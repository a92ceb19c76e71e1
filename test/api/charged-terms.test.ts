/**
 * A change of seats with proration_behavior none applies from the next cycle's charges (DESIGN
 * §13): the current period stays billed at the terms it was charged, and a later prorated change,
 * a pause's unused time and a change of rate card are computed from those, not from the
 * subscription's new terms. Golden cases through the public API on test clocks, on MariaDB and
 * SQLite. Amounts in cents (USD); 1,000 a seat, monthly from February 15: the period [Feb 15,
 * Mar 15) is 28 days, and March 1 leaves 14 of them. An invoice is [status, total, lines (each
 * [description, quantity, unit price, amount]), credits applied, amount due], oldest first.
 */
import test from "ava";
import { seats } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

type Case = [string, (s: Scenario) => Promise<unknown>, unknown];

/** Subscribes the scenario's subject on February 15 to a card of seats at 1,000 (or `price`); the subscription's ID. */
async function subscribed(s: Scenario, quantity: number): Promise<string> {
  const card = await s.card({ name: "Team", fixed_rates: [seats()] });
  return (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: quantity } })).subscription.id;
}

const patch = async (s: Scenario, id: string, quantity: number, behavior: string): Promise<unknown> =>
  (await s.call("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { seats: quantity }, proration_behavior: behavior })).proration_invoice;

async function due(s: Scenario): Promise<unknown[]> {
  return (await s.invoices())
    .filter((i) => i.line_items.length > 0)
    .map((i) => [
      i.status,
      i.total_amount.value,
      i.line_items.map((l: Json) => [l.description, l.quantity, l.price_in_unit_amount.value, l.amount.value]),
      (i.credits_applied as Json[]).map((c) => c.amount.value),
      i.amount_due.value,
    ]);
}

const cases: Case[] = [
  [
    "(a) paid 2 seats, 2 → 5 with none, paused and resumed: the unused time credited is of the 2 seats paid, not the 5",
    async (s) => {
      const id = await subscribed(s, 2);
      await s.advance("2026-03-01T00:00:00Z");
      const none = await patch(s, id, 5, "none");
      await s.call("POST", `/subscriptions/${id}/pause`, {});
      await s.advance("2026-03-10T00:00:00Z");
      const resumed = await s.call("POST", `/subscriptions/${id}/resume`, {});
      return [none, resumed.fixed_rate_quantities, await due(s)];
    },
    [
      null,
      { seats: "5" },
      [
        // 2 × 1,000 paid on February 15
        ["paid", "2000", [["Seats", "2", "1000", "2000"]], [], "2000"],
        // The resume's cycle at the new terms, 5 × 1,000 = 5,000, less the unused time of what was paid:
        // 2 × 1,000 × 14/28 = 1,000 (the old code credited 5 × 1,000 × 14/28 = 2,500, more than the 2,000 paid
        // for the whole period); 5,000 − 1,000 = 4,000
        [
          "paid",
          "4000",
          [
            ["Seats", "5", "1000", "5000"],
            ["Seats × 2: unused time of the cycle paused at 2026-03-01T00:00:00Z (remaining 14 of 28 days)", "1", "-1000", "-1000"],
          ],
          [],
          "4000",
        ],
      ],
    ],
  ],
  [
    "(b) paid 2 seats, 2 → 5 with none, then 5 → 2 prorated: nothing credited, the period was billed for 2",
    async (s) => {
      const id = await subscribed(s, 2);
      await s.advance("2026-03-01T00:00:00Z");
      const up = await patch(s, id, 5, "none");
      const down = await patch(s, id, 2, "create_prorations");
      await s.advance("2026-03-15T00:00:00Z");
      return [up, down, await due(s)];
    },
    [
      null,
      // From the 2 seats paid to 2: (2 − 2) × 1,000 × 14/28 = 0, no line (the old code credited
      // (2 − 5) × 1,000 × 14/28 = −1,500 for seats never billed, and again every cycle it was done)
      null,
      [
        ["paid", "2000", [["Seats", "2", "1000", "2000"]], [], "2000"],
        // March 15: 2 × 1,000, no credit applied: 2,000 due (the old code: 2,000 − 1,500 = 500)
        ["paid", "2000", [["Seats", "2", "1000", "2000"]], [], "2000"],
      ],
    ],
  ],
  [
    "(c) paid 5 seats, 5 → 2 with none, then 2 → 5 prorated: nothing charged, the period was billed for 5",
    async (s) => {
      const id = await subscribed(s, 5);
      await s.advance("2026-03-01T00:00:00Z");
      const down = await patch(s, id, 2, "none");
      const up = await patch(s, id, 5, "create_prorations");
      await s.advance("2026-03-15T00:00:00Z");
      return [down, up, await due(s)];
    },
    [
      null,
      // From the 5 seats paid to 5: (5 − 5) × 1,000 × 14/28 = 0, no invoice (the old code charged
      // (5 − 2) × 1,000 × 14/28 = 1,500 for seats already paid)
      null,
      [
        ["paid", "5000", [["Seats", "5", "1000", "5000"]], [], "5000"],
        ["paid", "5000", [["Seats", "5", "1000", "5000"]], [], "5000"],
      ],
    ],
  ],
  [
    "paid 2 seats, 2 → 3 with none, then 3 → 4 prorated: the change charged is from the 2 paid",
    async (s) => {
      const id = await subscribed(s, 2);
      await s.advance("2026-03-01T00:00:00Z");
      await patch(s, id, 3, "none");
      await patch(s, id, 4, "create_prorations");
      await s.advance("2026-03-15T00:00:00Z");
      return await due(s);
    },
    [
      ["paid", "2000", [["Seats", "2", "1000", "2000"]], [], "2000"],
      // (4 − 2) × 1,000 × 14/28 = 1,000 (the old code: (4 − 3) × 1,000 × 14/28 = 500)
      ["paid", "1000", [["Seats: 2 → 4 (remaining 14 of 28 days)", "1", "1000", "1000"]], [], "1000"],
      ["paid", "4000", [["Seats", "4", "1000", "4000"]], [], "4000"],
    ],
  ],
  [
    "paid 2 seats, 2 → 5 with none, then a prorated change of rate card: the upgrade is from the 2 paid",
    async (s) => {
      const id = await subscribed(s, 2);
      const dear = await s.card({ name: "Dear", fixed_rates: [seats(1500)] });
      await s.advance("2026-03-01T00:00:00Z");
      await patch(s, id, 5, "none");
      await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: dear, upgrade_behavior: "prorate" });
      await s.advance("2026-03-15T00:00:00Z");
      return await due(s);
    },
    [
      ["paid", "2000", [["Seats", "2", "1000", "2000"]], [], "2000"],
      // Dear at the carried 5 seats: 5 × 1,500 = 7,500 a cycle, less the 2 × 1,000 = 2,000 paid: the credit
      // −2,000 × 14/28 = −1,000 and the charge 7,500 × 14/28 = 3,750, 2,750 in all
      // (the old code: 7,500 − 5 × 1,000 = 2,500 × 14/28 = 1,250)
      [
        "paid",
        "2750",
        [
          ["Unused time on Team (prorated: 50% of the period left)", "1", "-1000", "-1000"],
          ["Remaining time on Dear (prorated: 50% of the period left)", "1", "3750", "3750"],
        ],
        [],
        "2750",
      ],
      ["paid", "7500", [["Seats", "5", "1500", "7500"]], [], "7500"],
    ],
  ],
];

for (const store of STORES) {
  const server = useServer(store);
  for (const [title, run, expected] of cases) {
    test(`${store}: ${title}`, async (t) => {
      const s = await Scenario.start(server, "2026-02-15T00:00:00Z");
      t.deepEqual(await run(s), expected);
    });
  }
}
