/**
 * The golden table for DESIGN §13, written from the contract (common.proto Price and PriceTier,
 * rate_card.proto, invoice.proto's line kinds, subscription_service.proto's UpdateSubscription and
 * ResumeSubscription): tiered prices (graduated and volume, on seats and usage, simple and
 * dimensional cells, included units taken off first), percentage prices with a fee per event,
 * minimum and maximum per period, unique_count metrics, seat and multiplier changes mid-cycle with
 * prorations, resume's credit for unused time, ISO 4217 currencies, and archiving. Driven only
 * through the public API on test clocks, on MariaDB and SQLite; every number is worked out by hand
 * in the comment beside it.
 *
 * Amounts are in the currency's smallest unit (cents for USD). A line is [rate, kind, quantity,
 * unit price, amount] (rate: its description, or the rate name it contains); an invoice [status, total,
 * lines]. Scenarios start on 2026-01-15T00:00:00Z: the periods are Jan 15 → Feb 15 (31 days),
 * Feb 15 → Mar 15 (28 days: Mar 1 is half-way), Mar 15 → Apr 15 (31 days), Apr 15 → May 15.
 * A plan without a fixed rate of non-zero price is free: no card on file, so its invoices with a
 * total above 0 stay "open"; a paid plan's card pays them ("paid"); a total of 0 is paid at once.
 * Line descriptions are pinned (EXACT) where they read well for a finance person, else matched on
 * the rate's name only. GOLDEN_LOG=1 logs each case's descriptions and result.
 */
import test from "ava";
import { violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { dailyValues, descriptions, due, EXACT, fixedRate, flat, graduated, hostedPage, money, patch, percentage, priced, tier, usageAndBilled, usageRate, volume } from "../helpers/price-bodies.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const JAN = "2026-01-15T00:00:00Z";
const FEB = "2026-02-15T00:00:00Z";
const MAR = "2026-03-15T00:00:00Z";
const APR = "2026-04-15T00:00:00Z";
const MAY = "2026-05-15T00:00:00Z";
/** Half-way through Feb 15 → Mar 15 (14 of 28 days left). */
const MID_FEB_CYCLE = "2026-03-01T00:00:00Z";

const byName = (name: string) => (l: Json) => String(l.description).includes(name);

/** The subject's only subscription's id. */
async function subId(s: Scenario): Promise<string> {
  return (await s.subscriptions())[0].id;
}

type Case = [string, (s: Scenario, t: import("ava").ExecutionContext) => Promise<unknown>, unknown];

const tieredUsage: Case[] = [
  [
    "graduated on usage: 1,500 calls over two tiers",
    async (s) => {
      const m = await s.metric();
      await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, graduated(tier(1000, 2), tier(null, 1)))] }) });
      await s.events([["2026-01-20T00:00:00Z", "1500"]]);
      await s.advance(FEB);
      return [await priced(s, EXACT), await usageAndBilled(s, m, JAN, FEB, byName("API calls"))];
    },
    // tier 1: 1,000 × 2 = 2,000; tier 2: 500 × 1 = 500; total 2,500. Billed 1,000 + 500 = 1,500 = used.
    [
      [
        [
          "open",
          "2500",
          [
            ["API calls (tier 1: 1 – 1,000)", "usage", "1000", "2", "2000"],
            ["API calls (tier 2: 1,001 and above)", "usage", "500", "1", "500"],
          ],
        ],
      ],
      ["1500", "1500"],
    ],
  ],
  [
    "graduated boundaries: exactly up_to, one over, zero, and a half cent in the last tier",
    async (s) => {
      const m = await s.metric();
      await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, graduated(tier(1000, 2), tier(5000, 1), tier(null, "0.5")))] }) });
      await s.events([
        ["2026-01-20T00:00:00Z", "1000"],
        ["2026-02-20T00:00:00Z", "1001"],
        ["2026-04-20T00:00:00Z", "5001"],
      ]);
      await s.advance(MAY);
      return [await priced(s, EXACT), await usageAndBilled(s, m, APR, MAY, byName("API calls"))];
    },
    [
      [
        // 1,000 = up_to of tier 1: 1,000 × 2 = 2,000, tier 2 untouched.
        ["open", "2000", [["API calls (tier 1: 1 – 1,000)", "usage", "1000", "2", "2000"]]],
        // 1,001: 1,000 × 2 = 2,000; 1 × 1 = 1; total 2,001.
        [
          "open",
          "2001",
          [
            ["API calls (tier 1: 1 – 1,000)", "usage", "1000", "2", "2000"],
            ["API calls (tier 2: 1,001 – 5,000)", "usage", "1", "1", "1"],
          ],
        ],
        // 0: no tier touched, no line.
        ["paid", "0", []],
        // 5,001: 1,000 × 2 = 2,000; 4,000 × 1 = 4,000; 1 × 0.5 = 0.5 → 1 (half-up, per line); total 6,001.
        [
          "open",
          "6001",
          [
            ["API calls (tier 1: 1 – 1,000)", "usage", "1000", "2", "2000"],
            ["API calls (tier 2: 1,001 – 5,000)", "usage", "4000", "1", "4000"],
            ["API calls (tier 3: 5,001 and above)", "usage", "1", "0.5", "1"],
          ],
        ],
      ],
      // 1,000 + 4,000 + 1 = 5,001 = used.
      ["5001", "5001"],
    ],
  ],
  [
    "volume boundaries: every unit at the tier the whole quantity reaches",
    async (s) => {
      const m = await s.metric();
      await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, volume(tier(1000, 2), tier(5000, 1), tier(null, "0.5")))] }) });
      await s.events([
        ["2026-01-20T00:00:00Z", "1000"],
        ["2026-02-20T00:00:00Z", "1001"],
        ["2026-04-20T00:00:00Z", "5001"],
      ]);
      await s.advance(MAY);
      return [await priced(s, EXACT), await usageAndBilled(s, m, FEB, MAR, byName("API calls"))];
    },
    [
      [
        // 1,000 reaches tier 1 only: 1,000 × 2 = 2,000.
        ["open", "2000", [["API calls (tier 1: 1 – 1,000)", "usage", "1000", "2", "2000"]]],
        // 1,001 reaches tier 2: 1,001 × 1 = 1,001 (cheaper than 1,000 units: that is volume pricing).
        ["open", "1001", [["API calls (tier 2: 1,001 – 5,000)", "usage", "1001", "1", "1001"]]],
        // 0: no tier.
        ["paid", "0", []],
        // 5,001 reaches tier 3: 5,001 × 0.5 = 2,500.5 → 2,501 (half-up).
        ["open", "2501", [["API calls (tier 3: 5,001 and above)", "usage", "5001", "0.5", "2501"]]],
      ],
      ["1001", "1001"],
    ],
  ],
  [
    "graduated flat fees: each touched tier's flat amount once; 0 units touch no tier",
    async (s) => {
      const m = await s.metric();
      await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, graduated(tier(100, 0, 500), tier(null, 3, 1000)))] }) });
      await s.events([
        ["2026-01-20T00:00:00Z", "150"],
        ["2026-02-20T00:00:00Z", "100"],
      ]);
      await s.advance(APR);
      return priced(s, EXACT);
    },
    [
      // 150: tier 1 100 × 0 = 0 + flat 500; tier 2 50 × 3 = 150 + flat 1,000; total 1,650.
      [
        "open",
        "1650",
        [
          ["API calls (tier 1: 1 – 100)", "usage", "100", "0", "0"],
          ["API calls (tier 1: flat fee)", "usage", "1", "500", "500"],
          ["API calls (tier 2: 101 and above)", "usage", "50", "3", "150"],
          ["API calls (tier 2: flat fee)", "usage", "1", "1000", "1000"],
        ],
      ],
      // 100 = up_to of tier 1: 100 × 0 + flat 500 = 500; tier 2 untouched (no flat 1,000).
      [
        "open",
        "500",
        [
          ["API calls (tier 1: 1 – 100)", "usage", "100", "0", "0"],
          ["API calls (tier 1: flat fee)", "usage", "1", "500", "500"],
        ],
      ],
      // 0: no tier touched, so no flat fee either.
      ["paid", "0", []],
    ],
  ],
  [
    "volume flat fee: the reached tier's flat amount only",
    async (s) => {
      const m = await s.metric();
      await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, volume(tier(100, 2, 500), tier(null, 3, 1000)))] }) });
      await s.events([
        ["2026-01-20T00:00:00Z", "150"],
        ["2026-02-20T00:00:00Z", "100"],
      ]);
      await s.advance(APR);
      return priced(s, EXACT);
    },
    [
      // 150 reaches tier 2: 150 × 3 = 450 + flat 1,000 = 1,450 (tier 1's flat 500 not charged).
      [
        "open",
        "1450",
        [
          ["API calls (tier 2: 101 and above)", "usage", "150", "3", "450"],
          ["API calls (tier 2: flat fee)", "usage", "1", "1000", "1000"],
        ],
      ],
      // 100 reaches tier 1: 100 × 2 = 200 + flat 500 = 700.
      [
        "open",
        "700",
        [
          ["API calls (tier 1: 1 – 100)", "usage", "100", "2", "200"],
          ["API calls (tier 1: flat fee)", "usage", "1", "500", "500"],
        ],
      ],
      ["paid", "0", []],
    ],
  ],
  [
    "tiers in dimensional cells: each cell's usage priced by its own tiers",
    async (s) => {
      const m = await s.metric({ aggregation_type: "sum", value_field: "n" }, ["region"]);
      const card = await s.card({
        usage_based_rates: [
          {
            usage_based_rate_type: "dimensional",
            code: "cpu",
            name: "CPU",
            pricing_metric_id: m,
            dimensions: [{ key: "region", values: ["eu", "us"] }],
            pricing_matrix: {
              cells: [
                { dimension_coordinates: { region: "eu" }, price: graduated(tier(10, 2), tier(null, 1)) },
                { dimension_coordinates: { region: "us" }, price: volume(tier(10, 3), tier(null, 2)) },
              ],
            },
          },
        ],
      });
      await s.subscribe({ rate_card_id: card });
      await s.events([
        ["2026-01-20T00:00:00Z", "15", { region: "eu" }],
        ["2026-01-21T00:00:00Z", "12", { region: "us" }],
      ]);
      await s.advance(FEB);
      return [await priced(s, EXACT), await usageAndBilled(s, m, JAN, FEB, byName("CPU"))];
    },
    [
      [
        [
          "open",
          // eu graduated 15: 10 × 2 = 20; 5 × 1 = 5. us volume 12 reaches tier 2: 12 × 2 = 24. Total 49.
          "49",
          [
            ["CPU (region=eu, tier 1: 1 – 10)", "usage", "10", "2", "20"],
            ["CPU (region=eu, tier 2: 11 and above)", "usage", "5", "1", "5"],
            ["CPU (region=us, tier 2: 11 and above)", "usage", "12", "2", "24"],
          ],
        ],
      ],
      // 10 + 5 + 12 = 27 = 15 + 12 used.
      ["27", "27"],
    ],
  ],
  [
    "included units are taken off first; graduated tiers price what is left",
    async (s) => {
      const m = await s.metric();
      await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, graduated(tier(1000, 2), tier(null, 1)), { included: 100 })] }) });
      await s.events([["2026-01-20T00:00:00Z", "1500"]]);
      await s.advance(FEB);
      return [await priced(s, EXACT), await usageAndBilled(s, m, JAN, FEB, byName("API calls"), "100")];
    },
    // 1,500 − 100 included = 1,400 billable: tier 1 1,000 × 2 = 2,000; tier 2 400 × 1 = 400; total 2,400.
    [
      [
        [
          "open",
          "2400",
          [
            ["API calls (tier 1: 1 – 1,000)", "usage", "1000", "2", "2000"],
            ["API calls (tier 2: 1,001 and above)", "usage", "400", "1", "400"],
          ],
        ],
      ],
      // 1,000 + 400 billed + 100 included = 1,500 used.
      ["1500", "1500"],
    ],
  ],
  [
    "included units spanning a tier: what is left starts at tier 1",
    async (s) => {
      const m = await s.metric();
      await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, graduated(tier(1000, 2), tier(null, 1)), { included: 1200 })] }) });
      await s.events([
        ["2026-01-20T00:00:00Z", "1500"],
        ["2026-02-20T00:00:00Z", "900"],
      ]);
      await s.advance(MAR);
      return [await priced(s, EXACT), await usageAndBilled(s, m, JAN, FEB, byName("API calls"), "1200"), await usageAndBilled(s, m, FEB, MAR, byName("API calls"), "1200")];
    },
    [
      [
        // 1,500 − 1,200 = 300 left, all in tier 1 (units 1…1,000 of what is left): 300 × 2 = 600.
        ["open", "600", [["API calls (tier 1: 1 – 1,000)", "usage", "300", "2", "600"]]],
        // 900 < 1,200 included: nothing billed.
        ["paid", "0", []],
      ],
      // 300 billed + 1,200 included = 1,500.
      ["1500", "1500"],
      // 0 billed + min(1,200, 900) included = 900.
      ["900", "900"],
    ],
  ],
  [
    "included units before volume tiers: what is left chooses the tier",
    async (s) => {
      const m = await s.metric();
      await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, volume(tier(1000, 2), tier(null, 1)), { included: 100 })] }) });
      await s.events([["2026-01-20T00:00:00Z", "1050"]]);
      await s.advance(FEB);
      return [await priced(s, EXACT), await usageAndBilled(s, m, JAN, FEB, byName("API calls"), "100")];
    },
    // 1,050 − 100 = 950 left reaches tier 1 only: 950 × 2 = 1,900.
    [[["open", "1900", [["API calls (tier 1: 1 – 1,000)", "usage", "950", "2", "1900"]]]], ["1050", "1050"]],
  ],
  [
    "a multiplier scales a tiered rate's unit and flat amounts",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ usage_based_rates: [usageRate(m, graduated(tier(1000, 2), tier(null, 1, 400)))] });
      await s.subscribe({ rate_card_id: card, rate_price_multipliers: { api: "0.5" } });
      await s.events([["2026-01-20T00:00:00Z", "1500"]]);
      await s.advance(FEB);
      return priced(s, EXACT);
    },
    // × 0.5: tier 1 1,000 × 1 = 1,000; tier 2 500 × 0.5 = 250 + flat 400 × 0.5 = 200; total 1,450.
    [
      [
        "open",
        "1450",
        [
          ["API calls (tier 1: 1 – 1,000)", "usage", "1000", "1", "1000"],
          ["API calls (tier 2: 1,001 and above)", "usage", "500", "0.5", "250"],
          ["API calls (tier 2: flat fee)", "usage", "1", "200", "200"],
        ],
      ],
    ],
  ],
];

const tieredSeats: Case[] = [
  [
    "graduated on seats: 12 seats over three tiers, in advance",
    async (s) => {
      const card = await s.card({ fixed_rates: [fixedRate(graduated(tier(5, 1000), tier(10, 800), tier(null, 500)))] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 12 } });
      await s.advance(FEB);
      return priced(s, EXACT);
    },
    // 5 × 1,000 = 5,000; 5 × 800 = 4,000; 2 × 500 = 1,000; total 10,000, at each cycle start.
    [
      [
        "paid",
        "10000",
        [
          ["Seats (tier 1: 1 – 5)", "fixed", "5", "1000", "5000"],
          ["Seats (tier 2: 6 – 10)", "fixed", "5", "800", "4000"],
          ["Seats (tier 3: 11 and above)", "fixed", "2", "500", "1000"],
        ],
      ],
      [
        "paid",
        "10000",
        [
          ["Seats (tier 1: 1 – 5)", "fixed", "5", "1000", "5000"],
          ["Seats (tier 2: 6 – 10)", "fixed", "5", "800", "4000"],
          ["Seats (tier 3: 11 and above)", "fixed", "2", "500", "1000"],
        ],
      ],
    ],
  ],
  [
    "volume on seats: 5 seats (exactly up_to) and 12 seats with the reached tier's flat fee",
    async (s) => {
      const card = await s.card({ fixed_rates: [fixedRate(volume(tier(5, 1000), tier(10, 800), tier(null, 500, 2000)))] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 5 } });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 12 } });
      return priced(s, EXACT);
    },
    [
      // 5 seats: tier 1, 5 × 1,000 = 5,000.
      ["paid", "5000", [["Seats (tier 1: 1 – 5)", "fixed", "5", "1000", "5000"]]],
      // 12 seats reach tier 3: 12 × 500 = 6,000 + flat 2,000 = 8,000.
      [
        "paid",
        "8000",
        [
          ["Seats (tier 3: 11 and above)", "fixed", "12", "500", "6000"],
          ["Seats (tier 3: flat fee)", "fixed", "1", "2000", "2000"],
        ],
      ],
    ],
  ],
];

const percentageCases: Case[] = [
  [
    "percentage of the period's sum, rounded half-up once",
    async (s) => {
      const m = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "payment");
      const card = await s.card({ fixed_rates: [fixedRate(flat(0), "base", "Base")], usage_based_rates: [usageRate(m, percentage("2.9"), { code: "fees", name: "Fees" })] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { base: 1 } });
      await s.events(
        [
          ["2026-01-20T00:00:00Z", "10000"],
          ["2026-01-21T00:00:00Z", "500"],
          ["2026-02-20T00:00:00Z", "1050"],
        ],
        "payment",
      );
      await s.advance(MAR);
      return [await priced(s, ["Base", "Fees"]), await usageAndBilled(s, m, JAN, FEB, byName("Fees"))];
    },
    [
      [
        ["paid", "0", [["Base", "fixed", "1", "0", "0"]]],
        // 10,000 + 500 = 10,500 × 2.9% = 304.5 → 305 (half-up).
        [
          "open",
          "305",
          [
            ["Base", "fixed", "1", "0", "0"],
            ["Fees", "usage", "10500", "0.029", "305"],
          ],
        ],
        // 1,050 × 2.9% = 30.45 → 30.
        [
          "open",
          "30",
          [
            ["Base", "fixed", "1", "0", "0"],
            ["Fees", "usage", "1050", "0.029", "30"],
          ],
        ],
      ],
      // The percentage line's quantity is the period's sum: 10,500.
      ["10500", "10500"],
    ],
  ],
  [
    "percentage plus a fixed amount per counted event",
    async (s) => {
      const m = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "payment");
      const card = await s.card({ usage_based_rates: [usageRate(m, percentage("2.9", 30), { code: "fees", name: "Fees" })] });
      await s.subscribe({ rate_card_id: card });
      await s.events(
        [
          ["2026-01-20T00:00:00Z", "10000"],
          ["2026-01-21T00:00:00Z", "500"],
          ["2026-02-20T00:00:00Z", "0"],
        ],
        "payment",
      );
      await s.advance(MAR);
      const bills = await priced(s, ["Fees"]);
      return [
        bills.map(([st, total, lines]) => [st, total, sumAmounts(lines)]),
        bills[0]?.[2].find((l) => l[3] === "0.029"),
        bills[0]?.[2].find((l) => l[3] === "30"),
        await usageAndBilled(s, m, JAN, FEB, (l) => byName("Fees")(l) && l.price_in_unit_amount.value !== "30"),
        (await s.invoices())[0]?.total_amount.currency_code,
      ];
    },
    [
      [
        // 10,500 × 2.9% = 304.5 → 305; 2 events × 30 = 60; total 365.
        ["open", "365", "365"],
        // A payment of 0 is still a counted event: 0 × 2.9% = 0; 1 × 30 = 30.
        ["open", "30", "30"],
      ],
      ["Fees", "usage", "10500", "0.029", "305"],
      ["Fees", "usage", "2", "30", "60"],
      ["10500", "10500"],
      // Without another price on the card, the fee's currency is the card's.
      "USD",
    ],
  ],
];

const minMax: Case[] = [
  [
    "minimum per period raises a low period; a period above it is untouched",
    async (s) => {
      const m = await s.metric();
      await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, flat(100), { min: 5000 })] }) });
      await s.events([
        ["2026-01-20T00:00:00Z", "20"],
        ["2026-02-20T00:00:00Z", "70"],
      ]);
      await s.advance(MAR);
      return [await priced(s, EXACT), await usageAndBilled(s, m, JAN, FEB, byName("API calls"))];
    },
    [
      [
        // 20 × 100 = 2,000 < 5,000: a minimum line of 5,000 − 2,000 = 3,000; total 5,000.
        [
          "open",
          "5000",
          [
            ["API calls", "usage", "20", "100", "2000"],
            ["API calls (minimum per period)", "minimum", "1", "3000", "3000"],
          ],
        ],
        // 70 × 100 = 7,000 ≥ 5,000: no minimum line.
        ["open", "7000", [["API calls", "usage", "70", "100", "7000"]]],
      ],
      // The minimum line is not usage: 20 billed = 20 used.
      ["20", "20"],
    ],
  ],
  [
    "minimum per period with zero usage: the whole minimum",
    async (s) => {
      const m = await s.metric();
      await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, flat(100), { min: 5000 })] }) });
      await s.advance(FEB);
      return priced(s, EXACT);
    },
    // 0 × 100 = 0: no usage line; minimum 5,000 − 0 = 5,000.
    [["open", "5000", [["API calls (minimum per period)", "minimum", "1", "5000", "5000"]]]],
  ],
  [
    "minimum with a multiplier: the rate's amount after the multiplier is raised to the minimum as written",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ usage_based_rates: [usageRate(m, flat(100), { min: 5000 })] });
      await s.subscribe({ rate_card_id: card, rate_price_multipliers: { api: "0.5" } });
      await s.events([["2026-01-20T00:00:00Z", "60"]]);
      await s.advance(FEB);
      return priced(s, EXACT);
    },
    // 60 × 100 × 0.5 = 3,000 < 5,000 (the minimum is not multiplied): minimum line 2,000; total 5,000.
    [
      [
        "open",
        "5000",
        [
          ["API calls", "usage", "60", "50", "3000"],
          ["API calls (minimum per period)", "minimum", "1", "2000", "2000"],
        ],
      ],
    ],
  ],
  [
    "maximum per period caps a high period with a negative line",
    async (s) => {
      const m = await s.metric();
      await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, flat(100), { max: 5000 })] }) });
      await s.events([
        ["2026-01-20T00:00:00Z", "80"],
        ["2026-02-20T00:00:00Z", "30"],
      ]);
      await s.advance(MAR);
      return [await priced(s, EXACT), await usageAndBilled(s, m, JAN, FEB, byName("API calls"))];
    },
    [
      [
        // 80 × 100 = 8,000 > 5,000: a maximum line of −(8,000 − 5,000) = −3,000; total 5,000.
        [
          "open",
          "5000",
          [
            ["API calls", "usage", "80", "100", "8000"],
            ["API calls (maximum per period)", "maximum", "1", "-3000", "-3000"],
          ],
        ],
        // 30 × 100 = 3,000 ≤ 5,000: untouched.
        ["open", "3000", [["API calls", "usage", "30", "100", "3000"]]],
      ],
      // The usage line still bills all 80 units used.
      ["80", "80"],
    ],
  ],
  [
    "maximum on a graduated rate: every line of the rate counts toward it",
    async (s) => {
      const m = await s.metric();
      await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, graduated(tier(1000, 2), tier(null, 1)), { max: 2200 })] }) });
      await s.events([["2026-01-20T00:00:00Z", "1500"]]);
      await s.advance(FEB);
      return priced(s, EXACT);
    },
    // 1,000 × 2 + 500 × 1 = 2,500 > 2,200: maximum −300; total 2,200.
    [
      [
        "open",
        "2200",
        [
          ["API calls (tier 1: 1 – 1,000)", "usage", "1000", "2", "2000"],
          ["API calls (tier 2: 1,001 and above)", "usage", "500", "1", "500"],
          ["API calls (maximum per period)", "maximum", "1", "-300", "-300"],
        ],
      ],
    ],
  ],
  [
    "late usage under a minimum: the minimum absorbs it, the adjustments net to 0",
    async (s) => {
      const m = await s.metric();
      await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, flat(100), { min: 5000 })] }) });
      await s.events([["2026-01-20T00:00:00Z", "20"]]);
      await s.advance(FEB);
      await s.events([["2026-02-10T00:00:00Z", "10"]]);
      await s.advance(MAR);
      const bills = await priced(s);
      return bills.map(([st, total, lines]) => [st, total, lines.map((l) => [l[1], l[4]]).sort()]);
    },
    [
      // Jan 15 → Feb 15 as finalized: 20 × 100 = 2,000; minimum 3,000; total 5,000.
      [
        "open",
        "5000",
        [
          ["minimum", "3000"],
          ["usage", "2000"],
        ],
      ],
      // The late 10 units: that window now costs 30 × 100 = 3,000 + minimum 2,000 = 5,000, as billed:
      // adjustments +1,000 (usage) and −1,000 (minimum). Feb 15 → Mar 15 has no usage: minimum 5,000.
      [
        "open",
        "5000",
        [
          ["adjustment", "-1000"],
          ["adjustment", "1000"],
          ["minimum", "5000"],
        ],
      ],
    ],
  ],
  [
    "minimum prorated when a cancellation ends the window mid-cycle",
    async (s) => {
      const m = await s.metric();
      await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, flat(100), { min: 3100 })] }) });
      await s.events([["2026-01-16T00:00:00Z", "2"]]);
      await s.advance("2026-01-25T00:00:00Z");
      await s.call("POST", `/subscriptions/${await subId(s)}/cancel`, {});
      await s.advance(MAR);
      return priced(s, EXACT);
    },
    // Window Jan 15 → Jan 25 = 10 of 31 days: minimum 3,100 × 10/31 = 1,000. Usage 2 × 100 = 200;
    // minimum line 1,000 − 200 = 800; total 1,000.
    [
      [
        "open",
        "1000",
        [
          ["API calls", "usage", "2", "100", "200"],
          ["API calls (minimum per period, prorated)", "minimum", "1", "800", "800"],
        ],
      ],
    ],
  ],
];

const uniqueCount: Case[] = [
  [
    "unique_count: a user active on both sides of a boundary counts in both periods; a period is not a sum of days",
    async (s) => {
      const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, [], "active");
      await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, flat(500), { code: "mau", name: "Active users" })] }) });
      await s.events(
        [
          ["2026-01-20T00:00:00Z", "1", { user: "ann" }],
          ["2026-01-21T00:00:00Z", "1", { user: "bob" }],
          ["2026-01-22T00:00:00Z", "1", { user: "ann" }],
          ["2026-02-14T23:00:00Z", "1", { user: "ann" }],
          ["2026-02-15T01:00:00Z", "1", { user: "ann" }],
          ["2026-02-20T00:00:00Z", "1", { user: "cyd" }],
          ["2026-02-21T00:00:00Z", "1", { user: "cyd" }],
        ],
        "active",
      );
      await s.advance(MAR);
      return [
        await priced(s, ["Active users"]),
        await dailyValues(s, m, JAN, FEB),
        await usageAndBilled(s, m, JAN, FEB, byName("Active users")),
        await usageAndBilled(s, m, FEB, MAR, byName("Active users")),
      ];
    },
    [
      [
        // Jan 15 → Feb 15: ann, bob = 2 × 500 = 1,000.
        ["open", "1000", [["Active users", "usage", "2", "500", "1000"]]],
        // Feb 15 → Mar 15: ann (again), cyd = 2 × 500 = 1,000.
        ["open", "1000", [["Active users", "usage", "2", "500", "1000"]]],
      ],
      // By day: Jan 20 ann, Jan 21 bob, Jan 22 ann, Feb 14 ann: 1 each, summing to 4 — not the period's 2.
      ["1", "1", "1", "1"],
      ["2", "2"],
      ["2", "2"],
    ],
  ],
  [
    "unique_count in billing state: used_units is the distinct count of the current period",
    async (s) => {
      const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, [], "active");
      await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, flat(500), { code: "mau", name: "Active users", included: 1 })] }) });
      await s.events(
        [
          ["2026-01-20T00:00:00Z", "1", { user: "ann" }],
          ["2026-01-21T00:00:00Z", "1", { user: "bob" }],
          ["2026-02-16T00:00:00Z", "1", { user: "ann" }],
          ["2026-02-17T00:00:00Z", "1", { user: "ann" }],
        ],
        "active",
      );
      await s.advance("2026-02-18T00:00:00Z");
      const state = await s.call("GET", `/customer-access/${s.subjectId}/billing-state`);
      return [state.usage_data.map((u: Json) => [u.rate_name, u.used_units, u.included_units]), state.has_overage_for_usage, await priced(s, ["Active users"])];
    },
    [
      // Feb 15 → now: ann twice = 1 distinct user (not 2), within the 1 included.
      [["Active users", "1", 1]],
      false,
      // Jan 15 → Feb 15: ann, bob = 2 − 1 included = 1 × 500 = 500.
      [["open", "500", [["Active users", "usage", "1", "500", "500"]]]],
    ],
  ],
];

const changes: Case[] = [
  [
    "seat increase mid-cycle: the remaining fraction is invoiced at once",
    async (s) => {
      await s.subscribe({ rate_card_id: await s.card({ fixed_rates: [fixedRate(flat(1000))] }), fixed_rate_quantities: { seats: 2 } });
      await s.advance(MID_FEB_CYCLE);
      const r = await patch(s, await subId(s), { fixed_rate_quantities: { seats: "5" } });
      await s.advance(MAR);
      return [r.subscription.fixed_rate_quantities, r.proration_invoice?.total_amount.value, await priced(s, EXACT)];
    },
    [
      { seats: "5" },
      "1500",
      [
        ["paid", "2000", [["Seats", "fixed", "2", "1000", "2000"]]],
        ["paid", "2000", [["Seats", "fixed", "2", "1000", "2000"]]],
        // Mar 1: 14 of 28 days left; +3 seats × 1,000 × 14/28 = 1,500, charged now (one line: 1 × 1,500).
        ["paid", "1500", [["Seats: 2 → 5 (remaining 14 of 28 days)", "proration", "1", "1500", "1500"]]],
        // Mar 15: 5 × 1,000 = 5,000.
        ["paid", "5000", [["Seats", "fixed", "5", "1000", "5000"]]],
      ],
    ],
  ],
  [
    "seat decrease mid-cycle: the credit goes to the subject's balance and pays the next invoice",
    async (s) => {
      await s.subscribe({ rate_card_id: await s.card({ fixed_rates: [fixedRate(flat(1000))] }), fixed_rate_quantities: { seats: 5 } });
      await s.advance(MID_FEB_CYCLE);
      const r = await patch(s, await subId(s), { fixed_rate_quantities: { seats: 2 } });
      const count = (await s.invoices()).length;
      await s.advance(MAR);
      const ledger = (await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`)).entries.map((e: Json) => [e.entry_type, e.amount.value]);
      return [r.proration_invoice ?? null, count, await priced(s, EXACT), await due(s), ledger];
    },
    [
      null,
      2,
      [
        ["paid", "5000", [["Seats", "fixed", "5", "1000", "5000"]]],
        ["paid", "5000", [["Seats", "fixed", "5", "1000", "5000"]]],
        // Mar 15: 2 × 1,000 = 2,000.
        ["paid", "2000", [["Seats", "fixed", "2", "1000", "2000"]]],
      ],
      // The decrease: −3 seats × 1,000 × 14/28 = 1,500 of credit (DESIGN §13: to the balance);
      // Mar 15's 2,000 takes all of it: 2,000 − 1,500 = 500 due.
      [
        ["5000", []],
        ["5000", []],
        ["500", ["1500"]],
      ],
      [
        ["proration", "1500"],
        ["application", "-1500"],
      ],
    ],
  ],
  [
    "a decrease larger than the next invoice is spent over several: no invoice is negative",
    async (s) => {
      await s.subscribe({ rate_card_id: await s.card({ fixed_rates: [fixedRate(flat(1000))] }), fixed_rate_quantities: { seats: 10 } });
      await s.advance(MID_FEB_CYCLE);
      await patch(s, await subId(s), { fixed_rate_quantities: { seats: 1 } });
      await s.advance("2026-07-15T00:00:00Z");
      const bills = await priced(s);
      const dues = await due(s);
      return [bills.map(([st, total, lines]) => [st, total, lines.map((l) => [l[1], l[4]])]), dues, String(dues.reduce((acc, [d]) => acc + BigInt(d), 0n))];
    },
    // Credit: 9 seats × 1,000 × 14/28 = 4,500 on the balance, 1,000 (one seat) spent per invoice:
    // Mar 15 1,000 − 1,000 = 0 due (3,500 left); Apr 15 0 (2,500 left); May 15 0 (1,500 left);
    // Jun 15 0 (500 left); Jul 15 1,000 − 500 = 500.
    [
      [
        ["paid", "10000", [["fixed", "10000"]]],
        ["paid", "10000", [["fixed", "10000"]]],
        ["paid", "1000", [["fixed", "1000"]]],
        ["paid", "1000", [["fixed", "1000"]]],
        ["paid", "1000", [["fixed", "1000"]]],
        ["paid", "1000", [["fixed", "1000"]]],
        ["paid", "1000", [["fixed", "1000"]]],
      ],
      [
        ["10000", []],
        ["10000", []],
        ["0", ["1000"]],
        ["0", ["1000"]],
        ["0", ["1000"]],
        ["0", ["1000"]],
        ["500", ["500"]],
      ],
      // Everything charged: 10,000 + 10,000 + 5 × 1,000 − 4,500 credited = 20,500.
      "20500",
    ],
  ],
  [
    "proration_behavior none: the new quantity applies from the next cycle, nothing now",
    async (s) => {
      await s.subscribe({ rate_card_id: await s.card({ fixed_rates: [fixedRate(flat(1000))] }), fixed_rate_quantities: { seats: 2 } });
      await s.advance(MID_FEB_CYCLE);
      const up = await patch(s, await subId(s), { fixed_rate_quantities: { seats: 5 }, proration_behavior: "none" });
      await s.advance("2026-04-01T00:00:00Z");
      const down = await patch(s, await subId(s), { fixed_rate_quantities: { seats: 3 }, proration_behavior: "none" });
      await s.advance(APR);
      return [up.proration_invoice ?? null, down.proration_invoice ?? null, await priced(s)];
    },
    [
      null,
      null,
      [
        ["paid", "2000", [["Seats", "fixed", "2", "1000", "2000"]]],
        ["paid", "2000", [["Seats", "fixed", "2", "1000", "2000"]]],
        // Mar 15: 5 × 1,000, no proration line.
        ["paid", "5000", [["Seats", "fixed", "5", "1000", "5000"]]],
        // Apr 15: 3 × 1,000, no credit.
        ["paid", "3000", [["Seats", "fixed", "3", "1000", "3000"]]],
      ],
    ],
  ],
  [
    "multiplier change mid-cycle: the difference for the remaining fraction",
    async (s) => {
      await s.subscribe({ rate_card_id: await s.card({ fixed_rates: [fixedRate(flat(1000))] }), fixed_rate_quantities: { seats: 2 } });
      await s.advance(MID_FEB_CYCLE);
      const r = await patch(s, await subId(s), { rate_price_multipliers: { seats: "1.5" } });
      await s.advance(MAR);
      const bills = await priced(s, EXACT);
      return [r.subscription.rate_price_multipliers, bills.map(([st, total, lines]) => [st, total, lines.map((l) => [l[0], l[1], l[4]])]), bills.at(-1)];
    },
    [
      { seats: "1.5" },
      [
        ["paid", "2000", [["Seats", "fixed", "2000"]]],
        ["paid", "2000", [["Seats", "fixed", "2000"]]],
        // 2 seats × 1,000 × (1.5 − 1) × 14/28 = 500, charged now.
        ["paid", "500", [["Seats: multiplier 1 → 1.5 (remaining 14 of 28 days)", "proration", "500"]]],
        // Mar 15: 2 × 1,000 × 1.5 = 3,000.
        ["paid", "3000", [["Seats", "fixed", "3000"]]],
      ],
      ["paid", "3000", [["Seats", "fixed", "2", "1500", "3000"]]],
    ],
  ],
  [
    "multiplier lowered mid-cycle: a credit that pays part of the next invoice",
    async (s) => {
      await s.subscribe({ rate_card_id: await s.card({ fixed_rates: [fixedRate(flat(1000))] }), fixed_rate_quantities: { seats: 2 } });
      await s.advance(MID_FEB_CYCLE);
      const r = await patch(s, await subId(s), { rate_price_multipliers: { seats: "0.5" } });
      await s.advance(MAR);
      return [r.proration_invoice ?? null, (await priced(s, EXACT)).at(-1), (await due(s)).at(-1)];
    },
    // 2 seats × 1,000 × (1 − 0.5) × 14/28 = 500 of credit; Mar 15: 2 × 1,000 × 0.5 = 1,000, less 500 = 500 due.
    [null, ["paid", "1000", [["Seats", "fixed", "2", "500", "1000"]]], ["500", ["500"]]],
  ],
  [
    'UpdateSubscription\'s metadata: keys set, "" removes one, others kept; nothing billed',
    async (s) => {
      await s.subscribe({ rate_card_id: await s.card({ fixed_rates: [fixedRate(flat(1000))] }), fixed_rate_quantities: { seats: 2 }, metadata: { a: "1", b: "2" } });
      await s.advance(MID_FEB_CYCLE);
      const r = await patch(s, await subId(s), { metadata: { a: "", c: "3" } });
      return [r.subscription.metadata, r.subscription.fixed_rate_quantities, r.proration_invoice ?? null, (await s.invoices()).length];
    },
    [{ b: "2", c: "3" }, { seats: "2" }, null, 2],
  ],
  [
    "UpdateSubscription of a paused or cancelled subscription is a failed precondition",
    async (s) => {
      const card = await s.card({ fixed_rates: [fixedRate(flat(1000))] });
      const a = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 2 } })).subscription.id;
      const b = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 2 } })).subscription.id;
      await s.call("POST", `/subscriptions/${a}/pause`, {});
      await s.call("POST", `/subscriptions/${b}/cancel`, {});
      const paused = await s.raw("PATCH", `/subscriptions/${a}`, { fixed_rate_quantities: { seats: 3 } });
      const cancelled = await s.raw("PATCH", `/subscriptions/${b}`, { fixed_rate_quantities: { seats: 3 } });
      return [paused.status, paused.body.code, cancelled.status, cancelled.body.code, (await s.invoices()).length];
    },
    [400, "failed_precondition", 400, "failed_precondition", 2],
  ],
  [
    "seat increase on graduated seats: the tiered difference, prorated",
    async (s) => {
      await s.subscribe({ rate_card_id: await s.card({ fixed_rates: [fixedRate(graduated(tier(5, 1000), tier(null, 500)))] }), fixed_rate_quantities: { seats: 4 } });
      await s.advance(MID_FEB_CYCLE);
      const r = await patch(s, await subId(s), { fixed_rate_quantities: { seats: 6 } });
      await s.advance(MAR);
      return [r.proration_invoice?.total_amount.value, (await priced(s)).map(([, total]) => total)];
    },
    // 4 seats: 4 × 1,000 = 4,000. 6 seats: 5 × 1,000 + 1 × 500 = 5,500. Difference 1,500 × 14/28 = 750.
    ["750", ["4000", "4000", "750", "5500"]],
  ],
  [
    "UpdateSubscription's bad input: 400 naming the field, nothing changed",
    async (s) => {
      await s.subscribe({ rate_card_id: await s.card({ fixed_rates: [fixedRate(flat(1000))] }), fixed_rate_quantities: { seats: 2 } });
      const id = await subId(s);
      const unknown = await s.raw("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { chairs: 1 } });
      const negative = await s.raw("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { seats: -1 } });
      const behavior = await s.raw("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { seats: 3 }, proration_behavior: "sometimes" });
      return [
        [unknown.status, violatedFields(unknown.body)],
        [negative.status, violatedFields(negative.body)],
        [behavior.status, violatedFields(behavior.body)],
        (await s.subscriptions())[0].fixed_rate_quantities,
        (await s.invoices()).length,
      ];
    },
    [[400, ["fixed_rate_quantities.chairs"]], [400, ["fixed_rate_quantities.seats"]], [400, ["proration_behavior"]], { seats: "2" }, 1],
  ],
  [
    "resume credits the unused fixed time paid before the pause",
    async (s) => {
      await s.subscribe({ rate_card_id: await s.card({ fixed_rates: [fixedRate(flat(3100))] }), fixed_rate_quantities: { seats: 1 } });
      await s.advance("2026-01-25T00:00:00Z");
      const id = await subId(s);
      await s.call("POST", `/subscriptions/${id}/pause`, {});
      await s.advance(MID_FEB_CYCLE);
      await s.call("POST", `/subscriptions/${id}/resume`, {});
      await s.advance("2026-04-01T00:00:00Z");
      return priced(s, EXACT);
    },
    [
      ["paid", "3100", [["Seats", "fixed", "1", "3100", "3100"]]],
      // Paused Jan 25: 21 of 31 days unused; 3,100 × 21/31 = 2,100 credited (1 × −2,100). Mar 1: 3,100 − 2,100 = 1,000.
      [
        "paid",
        "1000",
        [
          ["Seats", "fixed", "1", "3100", "3100"],
          ["Seats × 1: unused time of the cycle paused at 2026-01-25T00:00:00Z (remaining 21 of 31 days)", "proration", "1", "-2100", "-2100"],
        ],
      ],
      // Apr 1: the new cycle's anchor, 3,100.
      ["paid", "3100", [["Seats", "fixed", "1", "3100", "3100"]]],
    ],
  ],
  [
    "resume with proration_behavior none credits nothing",
    async (s) => {
      await s.subscribe({ rate_card_id: await s.card({ fixed_rates: [fixedRate(flat(3100))] }), fixed_rate_quantities: { seats: 1 } });
      await s.advance("2026-01-25T00:00:00Z");
      const id = await subId(s);
      await s.call("POST", `/subscriptions/${id}/pause`, {});
      await s.advance(MID_FEB_CYCLE);
      await s.call("POST", `/subscriptions/${id}/resume`, { proration_behavior: "none" });
      const bad = await s.raw("POST", `/subscriptions/${id}/resume`, { proration_behavior: "sometimes" });
      return [await priced(s), bad.status];
    },
    [
      [
        ["paid", "3100", [["Seats", "fixed", "1", "3100", "3100"]]],
        ["paid", "3100", [["Seats", "fixed", "1", "3100", "3100"]]],
      ],
      400,
    ],
  ],
];

const currencies: Case[] = [
  [
    "JPY (exponent 0): amounts in yen, rounded to whole yen, shown without decimals",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ fixed_rates: [fixedRate(flat(1500, "JPY"))], usage_based_rates: [usageRate(m, flat("0.5", "JPY"))] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
      await s.events([["2026-01-20T00:00:00Z", "3"]]);
      await s.advance(FEB);
      const invoices = await s.invoices();
      const page = await hostedPage(s, invoices[1]);
      return [invoices.map((i) => i.total_amount), await priced(s), /JPY\s?1,?502(?![.\d])/.test(page), /15\.02/.test(page)];
    },
    [
      [money("1500", "JPY"), money("1502", "JPY")],
      [
        ["paid", "1500", [["Seats", "fixed", "1", "1500", "1500"]]],
        // 1 × 1,500 = 1,500; 3 × 0.5 = 1.5 → 2 yen (half-up); total 1,502 yen.
        [
          "paid",
          "1502",
          [
            ["Seats", "fixed", "1", "1500", "1500"],
            ["API calls", "usage", "3", "0.5", "2"],
          ],
        ],
      ],
      true,
      false,
    ],
  ],
  [
    "KWD (exponent 3): amounts in fils, shown with three decimals",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ fixed_rates: [fixedRate(flat(1250, "KWD"))], usage_based_rates: [usageRate(m, flat("0.3335", "KWD"))] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
      await s.events([["2026-01-20T00:00:00Z", "3"]]);
      await s.advance(FEB);
      const invoices = await s.invoices();
      const page = await hostedPage(s, invoices[1]);
      return [invoices.map((i) => i.total_amount), await priced(s), /KWD\s?1\.251(?!\d)/.test(page), /12\.51/.test(page)];
    },
    [
      [money("1250", "KWD"), money("1251", "KWD")],
      [
        ["paid", "1250", [["Seats", "fixed", "1", "1250", "1250"]]],
        // 1,250 fils; 3 × 0.3335 = 1.0005 → 1 fils; total 1,251 fils = KWD 1.251.
        [
          "paid",
          "1251",
          [
            ["Seats", "fixed", "1", "1250", "1250"],
            ["API calls", "usage", "3", "0.3335", "1"],
          ],
        ],
      ],
      true,
      false,
    ],
  ],
  [
    "an unknown currency (XYZ) is refused with 400 naming the field; nothing written",
    async (s) => {
      const fixed = await s.raw("POST", "/rate-cards", { billing_interval: "monthly", name: "Plan", fixed_rates: [fixedRate(flat(100, "XYZ"))] });
      const m = await s.metric();
      const inTier = await s.raw("POST", "/rate-cards", {
        billing_interval: "monthly",
        name: "Plan",
        usage_based_rates: [usageRate(m, graduated(tier(10, 1), tier(null, 2, undefined, "XYZ")))],
      });
      const cards = await s.call("GET", "/rate-cards?limit=100");
      return [fixed.status, violatedFields(fixed.body), inTier.status, violatedFields(inTier.body), cards.rate_cards.length];
    },
    [400, ["fixed_rates[0].price.amount.currency_code"], 400, ["usage_based_rates[0].price.tiers[1].unit_amount.currency_code"], 0],
  ],
];

const archiving: Case[] = [
  [
    "an archived rate card refuses new subscriptions; an existing one renews",
    async (s) => {
      const card = await s.card({ fixed_rates: [fixedRate(flat(1000))] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
      const archived = await s.call("POST", `/rate-cards/${card}/archive`, {});
      const again = await s.call("POST", `/rate-cards/${card}/archive`, {});
      const refused = await s.raw("POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
      await s.advance(FEB);
      return [archived.archived, again.archived_at === archived.archived_at, refused.status, (await s.subscriptions()).length, await priced(s)];
    },
    [
      true,
      true,
      400,
      1,
      [
        ["paid", "1000", [["Seats", "fixed", "1", "1000", "1000"]]],
        ["paid", "1000", [["Seats", "fixed", "1", "1000", "1000"]]],
      ],
    ],
  ],
  [
    "an archived pricing metric refuses new rates; a rate already on it keeps billing",
    async (s) => {
      const m = await s.metric();
      await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, flat(2))] }) });
      const archived = await s.call("POST", `/pricing-metrics/${m}/archive`, {});
      const refused = await s.raw("POST", "/rate-cards", { billing_interval: "monthly", name: "Plan", usage_based_rates: [usageRate(m, flat(2))] });
      await s.events([["2026-01-20T00:00:00Z", "7"]]);
      await s.advance(FEB);
      return [archived.archived, refused.status, violatedFields(refused.body), await priced(s)];
    },
    // 7 × 2 = 14.
    [true, 400, ["usage_based_rates[0].pricing_metric_id"], [["open", "14", [["API calls", "usage", "7", "2", "14"]]]]],
  ],
  [
    "tiers that do not increase, or whose last up_to is not null, are refused naming the tier",
    async (s) => {
      const m = await s.metric();
      const post = (price: Json) => s.raw("POST", "/rate-cards", { billing_interval: "monthly", name: "Plan", usage_based_rates: [usageRate(m, price)] });
      const down = await post(graduated(tier(1000, 2), tier(500, 1), tier(null, 1)));
      const bounded = await post(volume(tier(1000, 2), tier(2000, 1)));
      return [
        [down.status, violatedFields(down.body)],
        [bounded.status, violatedFields(bounded.body)],
      ];
    },
    [
      [400, ["usage_based_rates[0].price.tiers[1].up_to"]],
      [400, ["usage_based_rates[0].price.tiers[1].up_to"]],
    ],
  ],
];

/** The exact sum of the amounts of some lines. */
function sumAmounts(lines: readonly (readonly string[])[]): string {
  let total = 0n;
  for (const l of lines) total += BigInt(l[4] as string);
  return String(total);
}

const cases: Case[] = [...tieredUsage, ...tieredSeats, ...percentageCases, ...minMax, ...uniqueCount, ...changes, ...currencies, ...archiving];

for (const store of STORES) {
  const server = useServer(store);
  for (const [title, run, expected] of cases) {
    test(`${store}: ${title}`, async (t) => {
      const s = await Scenario.start(server, JAN);
      const got = await run(s, t);
      if (process.env.GOLDEN_LOG) t.log(JSON.stringify(await descriptions(s)), JSON.stringify(got));
      t.deepEqual(got, expected);
    });
  }
}
