/**
 * Minimum commitment and late usage (DESIGN §14), golden cases through the public API on test
 * clocks, on MariaDB and SQLite: late usage of a period that a commitment trued up costs
 * max(commitment, new charges) − max(commitment, old charges), so the invoice that bills the
 * late usage also takes back as much of the period's true-up as it now covers (a negative
 * commitment_true_up line tied to that period), at a cycle close and on an ended subscription's
 * final adjustment invoice; a later run takes back only what is left. A period of several
 * windows (a change of rate card on Feb 1 bills [Jan 15, Feb 1), the close [Feb 1, Feb 15)) has one
 * true-up, on its closing invoice: late usage of any of its windows is taken back from it, up to it; so too
 * when that invoice bills no window (a change to a card without usage rates: the close, cancellation or
 * pause that ended the period carries the true-up). Amounts in cents (USD):
 * API calls at 1.00 (100 cents) each, no fixed fee; a line is [kind, description, quantity, unit,
 * amount]; an invoice [status, total, lines]. Invoices are drafts for an hour. The clock starts
 * on 2026-01-15: the first cycle is [Jan 15, Feb 15).
 */
import test from "ava";
import { seats, simple, usd } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { money } from "../helpers/price-bodies.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

type Case = [string, (s: Scenario) => Promise<unknown>, unknown];

const JAN = "(period 2026-01-15T00:00:00Z to 2026-02-15T00:00:00Z)";
const FEB = "(period 2026-02-15T00:00:00Z to 2026-03-15T00:00:00Z)";
/** The two windows of January's period when card A is changed to B on Feb 1. */
const JAN_A = "(period 2026-01-15T00:00:00Z to 2026-02-01T00:00:00Z)";
const JAN_B = "(period 2026-02-01T00:00:00Z to 2026-02-15T00:00:00Z)";

/** Each case's subscription (cases run concurrently). */
const subscriptionOf = new WeakMap<Scenario, string>();

/**
 * The subscription on a card of API calls at 100 cents each with `commitment`, started at once:
 * a first subscription's checkout saved a card on file (the case reads only this subscription's
 * invoices, see bills). Its ID.
 */
async function committed(s: Scenario, commitment: number): Promise<string> {
  const m = await s.metric();
  return committedOn(s, await s.card({ usage_based_rates: [simple(m, usd(100))] }), commitment);
}

/** The subscription on `card` with `commitment`, started at once (see committed). Its ID. */
async function committedOn(s: Scenario, card: string, commitment: number): Promise<string> {
  const first = await s.subscribe({ rate_card_id: card, create_checkout_session: "always" });
  await s.call("POST", `/subscriptions/${first.subscription.id}/cancel`, {});
  const r = await s.call("POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: card, minimum_commitment: money(commitment) });
  if (r.result.result_type !== "success") throw new Error("expected to start at once (card on file)");
  subscriptionOf.set(s, r.result.subscription.id);
  return r.result.subscription.id;
}

/**
 * As committed, the subscription on card A (API calls at 100 cents each), with a card B pricing
 * the same metric alike (100 cents a call, no fixed fee), to change to. Its ID and B's.
 */
async function committedWithB(s: Scenario, commitment: number): Promise<{ id: string; b: string }> {
  const m = await s.metric();
  const a = await s.card({ usage_based_rates: [simple(m, usd(100))] });
  const b = await s.card({ usage_based_rates: [simple(m, usd(100))] });
  return { id: await committedOn(s, a, commitment), b };
}

/**
 * As committed, the subscription on card A (API calls at 100 cents each), with a card B of fixed
 * rates only (seats at `seatPrice` cents, no usage rate) to change to. Its ID and B's.
 */
async function committedWithFixedB(s: Scenario, commitment: number, seatPrice: number): Promise<{ id: string; b: string }> {
  const m = await s.metric();
  const a = await s.card({ usage_based_rates: [simple(m, usd(100))] });
  const b = await s.card({ fixed_rates: [seats(seatPrice)] });
  return { id: await committedOn(s, a, commitment), b };
}

/** The invoices of the case's subscription as [status, total, lines], oldest first (the empty one that opened the first period is internal: not listed). */
async function bills(s: Scenario): Promise<[string, string, string[][]][]> {
  return (await s.invoices())
    .filter((i) => i.subscription_id === subscriptionOf.get(s))
    .map((i) => [i.status, i.total_amount.value, i.line_items.map((l: Json) => [l.kind, l.description, l.quantity, l.price_in_unit_amount.value, l.amount.value])]);
}

/** January's invoice, closed Feb 15 (a draft until 01:00): 60 × 100 = 6000 below 10000, true-up 10000 − 6000 = 4000. */
const january: [string, string, string[][]] = [
  "paid",
  "10000",
  [
    ["usage", "API calls", "60", "100", "6000"],
    ["commitment_true_up", "Minimum commitment USD 100.00: charges of the period USD 60.00", "1", "4000", "4000"],
  ],
];

const cases: Case[] = [
  [
    "late usage below the true-up: the true-up takes it back; a later run takes back only what is left, then nothing",
    async (s) => {
      await committed(s, 10000);
      await s.events([["2026-01-20T00:00:00Z", "60"]]);
      await s.advance("2026-02-16T00:00:00Z");
      // January's late 30; February's 100 (10000, the commitment: no true-up)
      await s.events([
        ["2026-01-20T00:00:00Z", "30"],
        ["2026-02-16T00:00:00Z", "100"],
      ]);
      await s.advance("2026-03-16T00:00:00Z");
      // January's late 20 more; March's 100
      await s.events([
        ["2026-01-25T00:00:00Z", "20"],
        ["2026-03-16T00:00:00Z", "100"],
      ]);
      await s.advance("2026-04-16T00:00:00Z");
      // February's late 10 (checks every window of the metric again, January's too); April's 100
      await s.events([
        ["2026-02-20T00:00:00Z", "10"],
        ["2026-04-16T00:00:00Z", "100"],
      ]);
      await s.advance("2026-05-15T02:00:00Z");
      return await bills(s);
    },
    [
      january,
      // late 30 × 100 = 3000 ≤ the true-up 4000: all of it taken back; January costs 6000 + 4000 +
      // 3000 − 3000 = 10000 = max(90 × 100, 10000) (13000 when the true-up stayed); total 10000 + 3000 − 3000 = 10000
      [
        "paid",
        "10000",
        [
          ["usage", "API calls", "100", "100", "10000"],
          ["adjustment", `Late usage adjustment: API calls ${JAN}`, "30", "100", "3000"],
          ["commitment_true_up", `Minimum commitment true-up, less late usage ${JAN}`, "1", "-3000", "-3000"],
        ],
      ],
      // late 20 × 100 = 2000, of the true-up 4000 − 3000 = 1000 left: −1000; January costs 10000 +
      // 2000 − 1000 = 11000 = max(110 × 100, 10000); total 10000 + 2000 − 1000 = 11000
      [
        "paid",
        "11000",
        [
          ["usage", "API calls", "100", "100", "10000"],
          ["adjustment", `Late usage adjustment: API calls ${JAN}`, "20", "100", "2000"],
          ["commitment_true_up", `Minimum commitment true-up, less late usage ${JAN}`, "1", "-1000", "-1000"],
        ],
      ],
      // February's late 10 × 100 = 1000 (no true-up there); January looked at again: nothing more; total 10000 + 1000 = 11000
      [
        "paid",
        "11000",
        [
          ["usage", "API calls", "100", "100", "10000"],
          ["adjustment", `Late usage adjustment: API calls ${FEB}`, "10", "100", "1000"],
        ],
      ],
    ],
  ],
  [
    "late usage above the true-up: all of the true-up taken back, the rest billed",
    async (s) => {
      await committed(s, 10000);
      await s.events([["2026-01-20T00:00:00Z", "60"]]);
      await s.advance("2026-02-16T00:00:00Z");
      await s.events([
        ["2026-01-20T00:00:00Z", "50"],
        ["2026-02-16T00:00:00Z", "100"],
      ]);
      await s.advance("2026-03-15T02:00:00Z");
      return await bills(s);
    },
    [
      january,
      // late 50 × 100 = 5000 > the true-up 4000: −4000, net +1000; January costs 6000 + 4000 + 5000 −
      // 4000 = 11000 = max(110 × 100, 10000); total 10000 + 5000 − 4000 = 11000
      [
        "paid",
        "11000",
        [
          ["usage", "API calls", "100", "100", "10000"],
          ["adjustment", `Late usage adjustment: API calls ${JAN}`, "50", "100", "5000"],
          ["commitment_true_up", `Minimum commitment true-up, less late usage ${JAN}`, "1", "-4000", "-4000"],
        ],
      ],
    ],
  ],
  [
    "an immediate cancellation's prorated true-up: the final adjustment invoice takes it back",
    async (s) => {
      const id = await committed(s, 6200);
      await s.events([["2026-01-20T00:00:00Z", "10"]]);
      await s.advance("2026-01-30T00:00:00Z");
      await s.call("POST", `/subscriptions/${id}/cancel`, {});
      await s.advance("2026-01-30T02:00:00Z");
      await s.events([["2026-01-25T00:00:00Z", "25"]]);
      await s.advance("2026-01-30T03:00:00Z");
      await s.events([["2026-01-26T00:00:00Z", "5"]]);
      await s.advance("2026-01-30T04:00:00Z");
      const [final, ...adjustments] = await bills(s);
      // the final invoice's amounts (commitments.test.ts has its lines)
      return [final?.[0], final?.[1], final?.[2].map((l) => [l[0], l[4]]), adjustments];
    },
    [
      // Jan 15 → Jan 30 is 15 of the period's 31 days: 6200 × 15/31 = 3000; 10 × 100 = 1000: true-up 2000
      "paid",
      "3000",
      [
        ["usage", "1000"],
        ["commitment_true_up", "2000"],
      ],
      [
        // late 25 × 100 = 2500 > the true-up 2000: −2000; the period costs 1000 + 2000 + 2500 − 2000 =
        // 3500 = max(35 × 100, 3000) (5500 when the true-up stayed); total 2500 − 2000 = 500
        [
          "paid",
          "500",
          [
            ["adjustment", "Late usage adjustment: API calls (period 2026-01-15T00:00:00Z to 2026-01-30T00:00:00Z)", "25", "100", "2500"],
            ["commitment_true_up", "Minimum commitment true-up, less late usage (period 2026-01-15T00:00:00Z to 2026-01-30T00:00:00Z)", "1", "-2000", "-2000"],
          ],
        ],
        // late 5 × 100 = 500, nothing of the true-up left: 500
        ["paid", "500", [["adjustment", "Late usage adjustment: API calls (period 2026-01-15T00:00:00Z to 2026-01-30T00:00:00Z)", "5", "100", "500"]]],
      ],
    ],
  ],
  [
    "a period of two windows (a change of rate card): late usage of the first window takes back the true-up the second's invoice carries",
    async (s) => {
      const { id, b } = await committedWithB(s, 10000);
      await s.events([["2026-01-20T00:00:00Z", "30"]]);
      await s.advance("2026-02-01T00:00:00Z");
      await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: b });
      await s.events([["2026-02-10T00:00:00Z", "30"]]);
      await s.advance("2026-02-16T00:00:00Z");
      // the first window's late 30 (both of the period's invoices final); February's 100 (10000, the commitment: no true-up)
      await s.events([
        ["2026-01-20T00:00:00Z", "30"],
        ["2026-02-16T00:00:00Z", "100"],
      ]);
      await s.advance("2026-03-15T02:00:00Z");
      return await bills(s);
    },
    [
      // Feb 1: the change bills the window [Jan 15, Feb 1), 30 × 100 = 3000
      ["paid", "3000", [["usage", "API calls", "30", "100", "3000"]]],
      // Feb 15: the window [Feb 1, Feb 15), 30 × 100 = 3000; the period's charges 3000 + 3000 = 6000: true-up 10000 − 6000 = 4000; total 7000
      [
        "paid",
        "7000",
        [
          ["usage", "API calls", "30", "100", "3000"],
          ["commitment_true_up", "Minimum commitment USD 100.00: charges of the period USD 60.00", "1", "4000", "4000"],
        ],
      ],
      // late 30 × 100 = 3000 of the first window ≤ the true-up 4000: all of it taken back; January costs
      // 3000 + 7000 + 3000 − 3000 = 10000 = max(90 × 100, 10000) (13000 when the true-up stayed); total 10000 + 3000 − 3000 = 10000
      [
        "paid",
        "10000",
        [
          ["usage", "API calls", "100", "100", "10000"],
          ["adjustment", `Late usage adjustment: API calls ${JAN_A}`, "30", "100", "3000"],
          ["commitment_true_up", `Minimum commitment true-up, less late usage ${JAN}`, "1", "-3000", "-3000"],
        ],
      ],
    ],
  ],
  [
    "a period of two windows: late usage of both is taken back up to the period's true-up, not each window's",
    async (s) => {
      const { id, b } = await committedWithB(s, 10000);
      await s.events([["2026-01-20T00:00:00Z", "30"]]);
      await s.advance("2026-02-01T00:00:00Z");
      await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: b });
      await s.events([["2026-02-10T00:00:00Z", "30"]]);
      await s.advance("2026-02-16T00:00:00Z");
      // late 20 in each window of the period
      await s.events([
        ["2026-01-20T00:00:00Z", "20"],
        ["2026-02-10T00:00:00Z", "20"],
        ["2026-02-16T00:00:00Z", "100"],
      ]);
      await s.advance("2026-03-15T02:00:00Z");
      return (await bills(s)).slice(2);
    },
    [
      // (Feb 1: 3000; Feb 15: 3000 + true-up 4000, as above) late 20 × 100 = 2000 in each window, 4000 in
      // all ≤ the true-up 4000: −4000; January costs 3000 + 7000 + 2000 + 2000 − 4000 = 10000 = max(100 × 100,
      // 10000) (12000 when each window took back only its own: −2000 on the second); total 10000 + 4000 − 4000 = 10000
      [
        "paid",
        "10000",
        [
          ["usage", "API calls", "100", "100", "10000"],
          ["adjustment", `Late usage adjustment: API calls ${JAN_A}`, "20", "100", "2000"],
          ["adjustment", `Late usage adjustment: API calls ${JAN_B}`, "20", "100", "2000"],
          ["commitment_true_up", `Minimum commitment true-up, less late usage ${JAN}`, "1", "-4000", "-4000"],
        ],
      ],
    ],
  ],
  [
    "a period of two windows: late usage the true-up was sized on (billed at its close) is not taken back again",
    async (s) => {
      const { id, b } = await committedWithB(s, 10000);
      await s.events([["2026-01-20T00:00:00Z", "30"]]);
      await s.advance("2026-02-01T00:00:00Z");
      await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: b });
      await s.advance("2026-02-05T00:00:00Z");
      // the first window's late 10, after its invoice finalized (Feb 1 01:00), before the period's close
      await s.events([
        ["2026-01-20T00:00:00Z", "10"],
        ["2026-02-10T00:00:00Z", "30"],
      ]);
      await s.advance("2026-02-16T00:00:00Z");
      // 10 more late of the first window
      await s.events([
        ["2026-01-20T00:00:00Z", "10"],
        ["2026-02-16T00:00:00Z", "100"],
      ]);
      await s.advance("2026-03-15T02:00:00Z");
      return (await bills(s)).slice(1);
    },
    [
      // (Feb 1: 30 × 100 = 3000) Feb 15: 30 × 100 = 3000 and the first window's late 10 × 100 = 1000; the
      // period's charges 3000 + 1000 + 3000 = 7000: true-up 10000 − 7000 = 3000; total 3000 + 1000 + 3000 = 7000
      [
        "paid",
        "7000",
        [
          ["usage", "API calls", "30", "100", "3000"],
          ["commitment_true_up", "Minimum commitment USD 100.00: charges of the period USD 70.00", "1", "3000", "3000"],
          ["adjustment", `Late usage adjustment: API calls ${JAN_A}`, "10", "100", "1000"],
        ],
      ],
      // late 10 × 100 = 1000 more (the 1000 before was in the true-up's sizing): −1000; January costs 3000 + 7000 +
      // 1000 − 1000 = 10000 = max(80 × 100, 10000) (9000 when the 1000 before counted again); total 10000 + 1000 − 1000 = 10000
      [
        "paid",
        "10000",
        [
          ["usage", "API calls", "100", "100", "10000"],
          ["adjustment", `Late usage adjustment: API calls ${JAN_A}`, "10", "100", "1000"],
          ["commitment_true_up", `Minimum commitment true-up, less late usage ${JAN}`, "1", "-1000", "-1000"],
        ],
      ],
    ],
  ],
  [
    "a change to a card without usage rates: late usage of the change's window takes back the true-up of the period's close, which bills no window",
    async (s) => {
      const { id, b } = await committedWithFixedB(s, 10000, 3100);
      await s.events([["2026-01-20T00:00:00Z", "30"]]);
      await s.advance("2026-02-01T00:00:00Z");
      await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: b });
      await s.advance("2026-02-16T00:00:00Z");
      // the change window's late 30 (both of the period's invoices final)
      await s.events([["2026-01-20T00:00:00Z", "30"]]);
      await s.advance("2026-03-15T02:00:00Z");
      // 10 more late: nothing of the true-up left to take back
      await s.events([["2026-01-21T00:00:00Z", "10"]]);
      await s.advance("2026-04-15T02:00:00Z");
      return await bills(s);
    },
    [
      // Feb 1: the change bills the window [Jan 15, Feb 1), 30 × 100 = 3000, and B's seats for the 14 of the
      // period's 31 days left, 3100 × 14/31 = 1400; total 4400
      [
        "paid",
        "4400",
        [
          ["usage", "API calls", "30", "100", "3000"],
          ["proration", "Remaining time on Plan (prorated: 45.16% of the period left)", "1", "1400", "1400"],
        ],
      ],
      // Feb 15: B's seats for [Feb 15, Mar 15), 3100 (February's); no window (B has no usage rates); January's
      // charges 3000 + 1400 = 4400: true-up 10000 − 4400 = 5600; total 3100 + 5600 = 8700
      [
        "paid",
        "8700",
        [
          ["fixed", "Seats", "1", "3100", "3100"],
          ["commitment_true_up", "Minimum commitment USD 100.00: charges of the period USD 44.00", "1", "5600", "5600"],
        ],
      ],
      // Mar 15: seats 3100 and February's true-up 10000 − 3100 = 6900; late 30 × 100 = 3000 of the change's window ≤
      // January's true-up 5600: all of it taken back (tied to the Feb 15 invoice); January costs 4400 + 5600 + 3000 −
      // 3000 = 10000 = max(7400, 10000) (13000 when the true-up stayed); total 3100 + 6900 + 3000 − 3000 = 10000
      [
        "paid",
        "10000",
        [
          ["fixed", "Seats", "1", "3100", "3100"],
          ["commitment_true_up", "Minimum commitment USD 100.00: charges of the period USD 31.00", "1", "6900", "6900"],
          ["adjustment", `Late usage adjustment: API calls ${JAN_A}`, "30", "100", "3000"],
          ["commitment_true_up", `Minimum commitment true-up, less late usage ${JAN}`, "1", "-3000", "-3000"],
        ],
      ],
      // Apr 15: seats 3100 and March's true-up 6900; late 10 × 100 = 1000, of January's true-up 5600 − 3000 = 2600 left:
      // −1000 (−4000 when the correction before was not counted); January costs 10000 + 1000 − 1000 = 10000 = max(8400,
      // 10000); total 3100 + 6900 + 1000 − 1000 = 10000
      [
        "paid",
        "10000",
        [
          ["fixed", "Seats", "1", "3100", "3100"],
          ["commitment_true_up", "Minimum commitment USD 100.00: charges of the period USD 31.00", "1", "6900", "6900"],
          ["adjustment", `Late usage adjustment: API calls ${JAN_A}`, "10", "100", "1000"],
          ["commitment_true_up", `Minimum commitment true-up, less late usage ${JAN}`, "1", "-1000", "-1000"],
        ],
      ],
    ],
  ],
  [
    "a change to a card without usage rates, then an immediate cancellation: the final adjustment invoice takes back the final invoice's true-up",
    async (s) => {
      const { id, b } = await committedWithFixedB(s, 12400, 3100);
      await s.events([["2026-01-16T00:00:00Z", "10"]]);
      await s.advance("2026-01-20T00:00:00Z");
      await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: b });
      await s.advance("2026-01-30T00:00:00Z");
      await s.call("POST", `/subscriptions/${id}/cancel`, {});
      await s.advance("2026-01-30T02:00:00Z");
      await s.events([["2026-01-16T00:00:00Z", "30"]]);
      await s.advance("2026-01-30T03:00:00Z");
      await s.events([["2026-01-17T00:00:00Z", "5"]]);
      await s.advance("2026-01-30T04:00:00Z");
      return await bills(s);
    },
    [
      // Jan 20: the change bills the window [Jan 15, Jan 20), 10 × 100 = 1000, and B's seats for the 26 of the
      // period's 31 days left, 3100 × 26/31 = 2600; total 3600
      [
        "paid",
        "3600",
        [
          ["usage", "API calls", "10", "100", "1000"],
          ["proration", "Remaining time on Plan (prorated: 83.87% of the period left)", "1", "2600", "2600"],
        ],
      ],
      // Jan 30: the final invoice, no window (B has no usage rates); Jan 15 → Jan 30 is 15 of the period's 31 days:
      // 12400 × 15/31 = 6000; the period's charges 1000 + 2600 = 3600: true-up 6000 − 3600 = 2400
      ["paid", "2400", [["commitment_true_up", "Minimum commitment USD 60.00 (prorated from USD 124.00): charges of the period USD 36.00", "1", "2400", "2400"]]],
      // late 30 × 100 = 3000 of the change's window > the true-up 2400: −2400 (tied to the final invoice); the period
      // costs 3600 + 2400 + 3000 − 2400 = 6600 = max(6600, 6000) (9000 when the true-up stayed); total 3000 − 2400 = 600
      [
        "paid",
        "600",
        [
          ["adjustment", "Late usage adjustment: API calls (period 2026-01-15T00:00:00Z to 2026-01-20T00:00:00Z)", "30", "100", "3000"],
          ["commitment_true_up", "Minimum commitment true-up, less late usage (period 2026-01-15T00:00:00Z to 2026-01-30T00:00:00Z)", "1", "-2400", "-2400"],
        ],
      ],
      // late 5 × 100 = 500, nothing of the true-up left: 500
      ["paid", "500", [["adjustment", "Late usage adjustment: API calls (period 2026-01-15T00:00:00Z to 2026-01-20T00:00:00Z)", "5", "100", "500"]]],
    ],
  ],
  [
    "a change to a card without usage rates, then a pause: the close after the resume takes back the pause's true-up",
    async (s) => {
      const { id, b } = await committedWithFixedB(s, 12400, 3100);
      await s.events([["2026-01-16T00:00:00Z", "10"]]);
      await s.advance("2026-01-20T00:00:00Z");
      await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: b });
      await s.advance("2026-01-30T00:00:00Z");
      await s.call("POST", `/subscriptions/${id}/pause`, {});
      await s.advance("2026-02-01T00:00:00Z");
      await s.call("POST", `/subscriptions/${id}/resume`, {});
      await s.events([["2026-01-16T00:00:00Z", "30"]]);
      await s.advance("2026-03-01T02:00:00Z");
      return await bills(s);
    },
    [
      // Jan 20: the change's window [Jan 15, Jan 20), 10 × 100 = 1000, and B's seats for 26 of 31 days, 3100 × 26/31 = 2600
      [
        "paid",
        "3600",
        [
          ["usage", "API calls", "10", "100", "1000"],
          ["proration", "Remaining time on Plan (prorated: 83.87% of the period left)", "1", "2600", "2600"],
        ],
      ],
      // Jan 30: the pause's invoice, no window (B has no usage rates); 12400 × 15/31 = 6000; charges 1000 + 2600 = 3600:
      // true-up 6000 − 3600 = 2400
      ["paid", "2400", [["commitment_true_up", "Minimum commitment USD 60.00 (prorated from USD 124.00): charges of the period USD 36.00", "1", "2400", "2400"]]],
      // Feb 1: the resume opens [Feb 1, Mar 1) with B's seats 3100 (nothing of the cut-short cycle's seats was paid as fixed)
      ["paid", "3100", [["fixed", "Seats", "1", "3100", "3100"]]],
      // Mar 1: seats 3100 and February's true-up 12400 − 3100 = 9300; late 30 × 100 = 3000 of the change's window > the
      // pause's true-up 2400: −2400 (tied to the pause's invoice); January costs 3600 + 2400 + 3000 − 2400 = 6600 =
      // max(6600, 6000) (9000 when the true-up stayed); total 3100 + 9300 + 3000 − 2400 = 13000
      [
        "paid",
        "13000",
        [
          ["fixed", "Seats", "1", "3100", "3100"],
          ["commitment_true_up", "Minimum commitment USD 124.00: charges of the period USD 31.00", "1", "9300", "9300"],
          ["adjustment", "Late usage adjustment: API calls (period 2026-01-15T00:00:00Z to 2026-01-20T00:00:00Z)", "30", "100", "3000"],
          ["commitment_true_up", "Minimum commitment true-up, less late usage (period 2026-01-15T00:00:00Z to 2026-01-30T00:00:00Z)", "1", "-2400", "-2400"],
        ],
      ],
    ],
  ],
];

for (const store of STORES) {
  const server = useServer(store);
  for (const [title, run, expected] of cases) {
    test(`${store}: ${title}`, async (t) => {
      const s = await Scenario.start(server, "2026-01-15T00:00:00Z", { invoiceGraceSeconds: 3600 });
      t.deepEqual(await run(s), expected);
    });
  }
}
