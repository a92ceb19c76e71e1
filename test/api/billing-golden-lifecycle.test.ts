/**
 * The golden table, continued: the invoice lifecycle (DESIGN §8) — drafts for the environment's
 * grace period, late usage landing on a draft, late usage of a finalized period billed as an
 * adjustment line on the next invoice (or a final adjustment invoice once the subscription has
 * ended), grace 0, finalizing early and voiding. Driven only through the public API on test
 * clocks, on MariaDB and SQLite. Amounts are in cents (USD); a line is [description, quantity,
 * unit price, amount]; an invoice [status, total, lines].
 *
 * Every case that bills usage also checks the invariant: for each period, the usage the API
 * shows (a pricing-metric summary) equals the quantity billed for that period, across the
 * draft window, late events and adjustments.
 */
import test, { type ExecutionContext } from "ava";
import { seats, simple, usd } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const HOUR = 3600;
const JAN = "(period 2026-01-15T00:00:00Z to 2026-02-15T00:00:00Z)";
const FEB = "(period 2026-02-15T00:00:00Z to 2026-03-15T00:00:00Z)";

/** The subject's only subscription. */
async function subscription(s: Scenario): Promise<Json> {
  return (await s.subscriptions())[0] as Json;
}

/**
 * The invariant for one metric and one period [start, end): the summary's value equals the
 * quantity billed for it — the usage line of the invoice whose usage period it is, plus every
 * adjustment line naming that period. Simple flat rates without included units only.
 */
async function invariant(t: ExecutionContext, s: Scenario, metric: string, start: string, end: string, rateName = "API calls"): Promise<void> {
  const summary = await s.call("POST", `/pricing-metrics/${metric}/summary`, { subject_id: s.subjectId, period: { start, end } });
  const shown = String(summary[0]?.value ?? "0");
  const label = `(period ${start} to ${end})`;
  let billed = 0;
  for (const inv of await s.invoices()) {
    for (const l of inv.line_items as Json[]) {
      const own = l.kind === "usage" && l.description === rateName && inv.usage_period_start === start && inv.usage_period_end === end;
      const adjusted = l.kind === "adjustment" && String(l.description).endsWith(label);
      if (own || adjusted) billed += Number(l.quantity);
    }
  }
  t.is(String(billed), shown, `usage shown for ${label} equals the quantity billed for it`);
}

type Case = [string, { grace?: number }, (s: Scenario, t: ExecutionContext) => Promise<unknown>, unknown];

const cases: Case[] = [
  [
    "a cycle's invoice is a draft for the grace period, then finalized and charged",
    { grace: HOUR },
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [simple(m, usd("0.5"), 100)] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
      await s.events([["2026-01-20T00:00:00Z", "150"]]);
      await s.advance("2026-02-15T00:00:00Z");
      const draft = (await s.invoices())[1] as Json;
      await s.advance("2026-02-15T00:59:59Z");
      const still = (await s.invoices())[1].status;
      await s.advance("2026-02-15T01:00:00Z");
      const final = (await s.invoices())[1] as Json;
      return [draft.status, draft.finalizes_at, draft.finalized_at, still, final.status, final.finalizes_at, typeof final.finalized_at, await s.bills()];
    },
    [
      "draft",
      "2026-02-15T01:00:00Z",
      null,
      "draft",
      "paid",
      null,
      "string",
      [
        ["paid", "1000", [["Seats", "1", "1000", "1000"]]],
        [
          "paid",
          "1025",
          [
            ["Seats", "1", "1000", "1000"],
            ["API calls", "50", "0.5", "25"],
          ],
        ],
      ],
    ],
  ],
  [
    "a late event during the grace period lands on the draft (its preview recomputes)",
    { grace: HOUR },
    async (s, t) => {
      const m = await s.metric();
      const card = await s.card({ usage_based_rates: [simple(m, usd(2))] });
      await s.subscribe({ rate_card_id: card });
      await s.events([["2026-01-20T00:00:00Z", "10"]]);
      await s.advance("2026-02-15T00:10:00Z");
      const before = await s.bills();
      await s.events([["2026-02-14T23:00:00Z", "5"]]);
      const preview = await s.bills();
      await s.advance("2026-02-15T01:00:00Z");
      await invariant(t, s, m, "2026-01-15T00:00:00Z", "2026-02-15T00:00:00Z");
      return [before, preview, await s.bills()];
    },
    [[["draft", "20", [["API calls", "10", "2", "20"]]]], [["draft", "30", [["API calls", "15", "2", "30"]]]], [["open", "30", [["API calls", "15", "2", "30"]]]]],
  ],
  [
    "a late event after finalization is billed as an adjustment line on the next invoice",
    { grace: HOUR },
    async (s, t) => {
      const m = await s.metric();
      const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [simple(m, usd("0.5"))] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
      await s.events([["2026-01-20T00:00:00Z", "40"]]);
      await s.advance("2026-02-15T02:00:00Z");
      await s.events([["2026-02-10T00:00:00Z", "30"]]);
      await s.advance("2026-03-15T01:00:00Z");
      await invariant(t, s, m, "2026-01-15T00:00:00Z", "2026-02-15T00:00:00Z");
      await invariant(t, s, m, "2026-02-15T00:00:00Z", "2026-03-15T00:00:00Z");
      const kinds = ((await s.invoices())[2].line_items as Json[]).map((l) => l.kind);
      return [kinds, await s.bills()];
    },
    [
      ["fixed", "adjustment"],
      [
        ["paid", "1000", [["Seats", "1", "1000", "1000"]]],
        [
          "paid",
          "1020",
          [
            ["Seats", "1", "1000", "1000"],
            ["API calls", "40", "0.5", "20"],
          ],
        ],
        [
          "paid",
          "1015",
          [
            ["Seats", "1", "1000", "1000"],
            [`Late usage adjustment: API calls ${JAN}`, "30", "0.5", "15"],
          ],
        ],
      ],
    ],
  ],
  [
    "late usage that stays within the included units adjusts nothing; past them, only the excess",
    { grace: HOUR },
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ usage_based_rates: [simple(m, usd(1), 100)] });
      await s.subscribe({ rate_card_id: card });
      await s.events([["2026-01-20T00:00:00Z", "50"]]);
      await s.advance("2026-02-15T02:00:00Z");
      await s.events([["2026-01-21T00:00:00Z", "30"]]);
      await s.advance("2026-03-15T02:00:00Z");
      const within = await s.bills();
      await s.events([["2026-01-22T00:00:00Z", "40"]]);
      await s.advance("2026-04-15T02:00:00Z");
      return [within, await s.bills()];
    },
    [
      [
        ["paid", "0", []],
        ["paid", "0", []],
      ],
      [
        ["paid", "0", []],
        ["paid", "0", []],
        ["open", "20", [[`Late usage adjustment: API calls ${JAN}`, "20", "1", "20"]]],
      ],
    ],
  ],
  [
    "grace 0: invoices are final at once, and late usage goes to the next invoice",
    { grace: 0 },
    async (s, t) => {
      const m = await s.metric();
      const card = await s.card({ usage_based_rates: [simple(m, usd(3))] });
      await s.subscribe({ rate_card_id: card });
      await s.events([["2026-01-20T00:00:00Z", "2"]]);
      await s.advance("2026-02-15T00:00:00Z");
      const first = await s.bills();
      await s.events([["2026-02-14T23:59:59.999Z", "1"]]);
      await s.advance("2026-03-15T00:00:00Z");
      await invariant(t, s, m, "2026-01-15T00:00:00Z", "2026-02-15T00:00:00Z");
      return [first, await s.bills()];
    },
    [
      [["open", "6", [["API calls", "2", "3", "6"]]]],
      [
        ["open", "6", [["API calls", "2", "3", "6"]]],
        ["open", "3", [[`Late usage adjustment: API calls ${JAN}`, "1", "3", "3"]]],
      ],
    ],
  ],
  [
    "an operator finalizes a draft early; a second finalize is refused; later late usage is adjusted",
    { grace: 24 * HOUR },
    async (s, t) => {
      const m = await s.metric();
      const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [simple(m, usd(1))] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
      await s.events([["2026-01-20T00:00:00Z", "7"]]);
      await s.advance("2026-02-15T00:00:00Z");
      const draft = (await s.invoices())[1] as Json;
      const finalized = await s.call("POST", `/invoices/${draft.id}/finalize`, {});
      const again = await s.raw("POST", `/invoices/${draft.id}/finalize`, {});
      await s.events([["2026-02-01T00:00:00Z", "3"]]);
      await s.advance("2026-03-15T00:00:00Z");
      await s.call("POST", `/invoices/${(await s.invoices())[2].id}/finalize`, {});
      await invariant(t, s, m, "2026-01-15T00:00:00Z", "2026-02-15T00:00:00Z");
      return [draft.status, finalized.status, again.status, again.body.code, await s.bills()];
    },
    [
      "draft",
      "paid",
      400,
      "failed_precondition",
      [
        ["paid", "1000", [["Seats", "1", "1000", "1000"]]],
        [
          "paid",
          "1007",
          [
            ["Seats", "1", "1000", "1000"],
            ["API calls", "7", "1", "7"],
          ],
        ],
        [
          "paid",
          "1003",
          [
            ["Seats", "1", "1000", "1000"],
            [`Late usage adjustment: API calls ${JAN}`, "3", "1", "3"],
          ],
        ],
      ],
    ],
  ],
  [
    "voiding: a draft cannot be voided; a voided invoice's late usage bills only the late part",
    { grace: HOUR },
    async (s, t) => {
      const m = await s.metric();
      const card = await s.card({ usage_based_rates: [simple(m, usd(1))] });
      await s.subscribe({ rate_card_id: card });
      await s.events([["2026-01-20T00:00:00Z", "10"]]);
      await s.advance("2026-02-15T00:00:00Z");
      const id = (await s.invoices())[0].id;
      const draftVoid = await s.raw("POST", `/invoices/${id}/void`, {});
      await s.advance("2026-02-15T01:00:00Z");
      const voided = await s.call("POST", `/invoices/${id}/void`, {});
      await s.events([["2026-01-25T00:00:00Z", "4"]]);
      await s.advance("2026-03-15T01:00:00Z");
      await invariant(t, s, m, "2026-01-15T00:00:00Z", "2026-02-15T00:00:00Z");
      return [draftVoid.status, voided.status, await s.bills()];
    },
    [
      400,
      "void",
      [
        ["void", "10", [["API calls", "10", "1", "10"]]],
        ["open", "4", [[`Late usage adjustment: API calls ${JAN}`, "4", "1", "4"]]],
      ],
    ],
  ],
  [
    "a subscription that ended: late usage is billed on a final adjustment invoice, once",
    { grace: HOUR },
    async (s, t) => {
      const m = await s.metric();
      const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [simple(m, usd("0.5"))] });
      const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription;
      await s.events([["2026-01-20T00:00:00Z", "100"]]);
      await s.advance("2026-01-25T00:00:00Z");
      await s.call("POST", `/subscriptions/${sub.id}/cancel`, {});
      const draft = (await s.bills())[1];
      await s.events([["2026-01-24T00:00:00Z", "20"]]);
      await s.advance("2026-01-25T01:00:00Z");
      await s.events([["2026-01-24T12:00:00Z", "10"]]);
      await s.advance("2026-01-26T00:00:00Z");
      await s.advance("2026-02-26T00:00:00Z");
      await invariant(t, s, m, "2026-01-15T00:00:00Z", "2026-01-25T00:00:00Z");
      return [draft, (await subscription(s)).status, await s.bills()];
    },
    [
      ["draft", "50", [["API calls", "100", "0.5", "50"]]],
      "cancelled",
      [
        ["paid", "1000", [["Seats", "1", "1000", "1000"]]],
        ["paid", "60", [["API calls", "120", "0.5", "60"]]],
        ["paid", "5", [["Late usage adjustment: API calls (period 2026-01-15T00:00:00Z to 2026-01-25T00:00:00Z)", "10", "0.5", "5"]]],
      ],
    ],
  ],
  [
    "cancel at the end of the cycle, then late usage of the last period: a final adjustment invoice",
    { grace: HOUR },
    async (s, t) => {
      const m = await s.metric();
      const card = await s.card({ usage_based_rates: [simple(m, usd(2))] });
      const sub = (await s.subscribe({ rate_card_id: card })).subscription;
      await s.call("POST", `/subscriptions/${sub.id}/cancel`, { cancel_at_end_of_cycle: true });
      await s.events([["2026-02-01T00:00:00Z", "3"]]);
      await s.advance("2026-02-16T00:00:00Z");
      await s.events([["2026-02-14T00:00:00Z", "2"]]);
      await s.advance("2026-02-17T00:00:00Z");
      await invariant(t, s, m, "2026-01-15T00:00:00Z", "2026-02-15T00:00:00Z");
      return [(await subscription(s)).status, await s.bills()];
    },
    [
      "cancelled",
      [
        ["open", "6", [["API calls", "3", "2", "6"]]],
        ["open", "4", [[`Late usage adjustment: API calls ${JAN}`, "2", "2", "4"]]],
      ],
    ],
  ],
  [
    "package price: late usage is adjusted in whole packages",
    { grace: HOUR },
    async (s) => {
      const m = await s.metric();
      const pkg = { ...usd(100), package_units: 1000, rounding_behavior: "round_up" };
      const card = await s.card({ usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: m, included_units: 0, price: pkg }] });
      await s.subscribe({ rate_card_id: card });
      await s.events([["2026-01-20T00:00:00Z", "999"]]);
      await s.advance("2026-02-15T01:00:00Z");
      await s.events([["2026-01-21T00:00:00Z", "2"]]);
      await s.advance("2026-03-15T01:00:00Z");
      return s.bills();
    },
    [
      ["open", "100", [["API calls (1 × 1000 units)", "1", "100", "100"]]],
      ["open", "100", [[`Late usage adjustment: API calls (2 × 1000 units) ${JAN}`, "1", "100", "100"]]],
    ],
  ],
  [
    "dimensional rate: late usage of one cell adjusts that cell",
    { grace: HOUR },
    async (s) => {
      const m = await s.metric({ aggregation_type: "sum", value_field: "n" }, ["region"]);
      const cell = (region: string, value: number) => ({ dimension_coordinates: { region }, price: usd(value) });
      const rate = {
        usage_based_rate_type: "dimensional",
        code: "compute",
        name: "Compute",
        pricing_metric_id: m,
        included_units: 0,
        dimensions: [{ key: "region", values: ["eu", "us"] }],
        pricing_matrix: { cells: [cell("eu", 3), cell("us", 2)] },
      };
      const card = await s.card({ usage_based_rates: [rate] });
      await s.subscribe({ rate_card_id: card });
      await s.events([
        ["2026-01-20T00:00:00Z", "5", { region: "eu" }],
        ["2026-01-20T00:00:00Z", "5", { region: "us" }],
      ]);
      await s.advance("2026-02-15T01:00:00Z");
      await s.events([["2026-01-22T00:00:00Z", "4", { region: "us" }]]);
      await s.advance("2026-03-15T01:00:00Z");
      return s.bills();
    },
    [
      [
        "open",
        "25",
        [
          ["Compute (region=eu)", "5", "3", "15"],
          ["Compute (region=us)", "5", "2", "10"],
        ],
      ],
      ["open", "8", [[`Late usage adjustment: Compute (region=us) ${JAN}`, "4", "2", "8"]]],
    ],
  ],
  [
    "late usage of two finalized periods: one adjustment line each, on the next invoice; a duplicate is not billed",
    { grace: HOUR },
    async (s, t) => {
      const m = await s.metric();
      const card = await s.card({ usage_based_rates: [simple(m, usd(1))] });
      await s.subscribe({ rate_card_id: card });
      await s.events([
        ["2026-01-20T00:00:00Z", "1"],
        ["2026-02-20T00:00:00Z", "2"],
      ]);
      await s.advance("2026-03-15T01:00:00Z");
      await s.events([
        ["2026-01-30T00:00:00Z", "10"],
        ["2026-03-01T00:00:00Z", "20"],
      ]);
      const dup = await s.call("POST", "/usage-events", { idempotency_key: "e2", subject_id: s.subjectId, event_name: "usage", timestamp: "2026-01-30T00:00:00Z", data: { n: "10" } });
      await s.advance("2026-04-15T01:00:00Z");
      await invariant(t, s, m, "2026-01-15T00:00:00Z", "2026-02-15T00:00:00Z");
      await invariant(t, s, m, "2026-02-15T00:00:00Z", "2026-03-15T00:00:00Z");
      return [dup.status, await s.bills()];
    },
    [
      "duplicate",
      [
        ["open", "1", [["API calls", "1", "1", "1"]]],
        ["open", "2", [["API calls", "2", "1", "2"]]],
        [
          "open",
          "30",
          [
            [`Late usage adjustment: API calls ${JAN}`, "10", "1", "10"],
            [`Late usage adjustment: API calls ${FEB}`, "20", "1", "20"],
          ],
        ],
      ],
    ],
  ],
  [
    "after a rate-card change, late usage of the old card's window is priced by the old card",
    { grace: HOUR },
    async (s) => {
      const m = await s.metric();
      const cheap = await s.card({ usage_based_rates: [simple(m, usd(1))] });
      const dear = await s.card({ usage_based_rates: [simple(m, usd(5))] });
      const sub = (await s.subscribe({ rate_card_id: cheap })).subscription;
      await s.events([["2026-01-16T00:00:00Z", "2"]]);
      await s.advance("2026-01-20T00:00:00Z");
      await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: dear });
      await s.advance("2026-01-20T01:00:00Z");
      await s.events([["2026-01-17T00:00:00Z", "3"]]);
      await s.advance("2026-02-15T01:00:00Z");
      return s.bills();
    },
    [
      ["open", "2", [["API calls", "2", "1", "2"]]],
      ["open", "3", [["Late usage adjustment: API calls (period 2026-01-15T00:00:00Z to 2026-01-20T00:00:00Z)", "3", "1", "3"]]],
    ],
  ],
  [
    // A cycle close reads the usage windows of a whole batch of subscriptions at once: each one's
    // late usage must still be adjusted on its own invoice, by its own amount.
    "two subscriptions closed in the same run: each one's late usage is adjusted on its own next invoice",
    { grace: 0 },
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ usage_based_rates: [simple(m, usd(2))] });
      const first = s.subjectId;
      await s.subscribe({ rate_card_id: card });
      await s.events([["2026-01-20T00:00:00Z", "10"]]);
      const second = (await s.call("POST", "/subjects", { name: "Second", test_clock_id: s.clockId })).id;
      s.subjectId = second;
      await s.subscribe({ rate_card_id: card });
      await s.events([["2026-01-20T00:00:00Z", "20"]]);
      await s.advance("2026-02-15T00:00:00Z");
      await s.events([["2026-01-21T00:00:00Z", "3"]]);
      s.subjectId = first;
      await s.events([["2026-01-21T00:00:00Z", "1"]]);
      await s.advance("2026-03-15T00:00:00Z");
      const billsOfFirst = await s.bills();
      s.subjectId = second;
      return [billsOfFirst, await s.bills()];
    },
    [
      [
        ["open", "20", [["API calls", "10", "2", "20"]]],
        ["open", "2", [[`Late usage adjustment: API calls ${JAN}`, "1", "2", "2"]]],
      ],
      [
        ["open", "40", [["API calls", "20", "2", "40"]]],
        ["open", "6", [[`Late usage adjustment: API calls ${JAN}`, "3", "2", "6"]]],
      ],
    ],
  ],
];

for (const store of STORES) {
  const server = useServer(store);
  for (const [title, opts, run, expected] of cases) {
    test(`${store}: ${title}`, async (t) => {
      const s = await Scenario.start(server, "2026-01-15T00:00:00Z", { invoiceGraceSeconds: opts.grace ?? 0 });
      t.deepEqual(await run(s, t), expected);
    });
  }
}
