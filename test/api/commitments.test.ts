/**
 * Minimum commitment per billing period (DESIGN §14), golden cases through the public API on test
 * clocks, on MariaDB and SQLite: the commitment_true_up line at each cycle close, a PATCH that
 * takes effect from the next period, removal with "0", a draft whose true-up is sized again on
 * late usage, what a change of rate card or a seat increase billed during the period counting
 * towards it, coupons (the true-up is sized before discounts, and discounted like any line a
 * coupon covers), and bad input. Amounts in cents (USD); a line is [description, quantity, unit,
 * amount]; an invoice [status, total, lines]. The clock starts on 2026-01-15: the first cycle is
 * [Jan 15, Feb 15), the second [Feb 15, Mar 15).
 */
import test from "ava";
import { seats, simple, usd } from "../helpers/catalog-bodies.js";
import { coupon } from "../helpers/coupon-bodies.js";
import { violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { money } from "../helpers/price-bodies.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

type Case = [string, (s: Scenario) => Promise<unknown>, unknown];

/**
 * A card of 10.00 a seat and API calls at 0.01 (1 cent) each; the subscription at `seats`, with
 * `extra`, started at once: a first subscription's checkout saved a card on file (the case reads
 * only this subscription's invoices, see bills).
 */
async function subscribed(s: Scenario, quantity: number, extra: Json = {}): Promise<string> {
  const m = await s.metric();
  const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [simple(m, usd(1))] });
  const first = await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 }, create_checkout_session: "always" });
  await s.call("POST", `/subscriptions/${first.subscription.id}/cancel`, {});
  const r = await s.call("POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: card, fixed_rate_quantities: { seats: quantity }, ...extra });
  if (r.result.result_type !== "success") throw new Error("expected to start at once (card on file)");
  subscriptionOf.set(s, r.result.subscription.id);
  return r.result.subscription.id;
}

/**
 * Two cards of API calls at 1.00 (100 cents) each, no fixed fee, and the subscription on the first
 * with `extra`, started at once (a card on file, as subscribed); the second card's ID.
 */
async function usageOnly(s: Scenario, extra: Json): Promise<{ id: string; other: string }> {
  const m = await s.metric();
  const [card, other] = [await s.card({ usage_based_rates: [simple(m, usd(100))] }), await s.card({ usage_based_rates: [simple(m, usd(100))] })];
  const first = await s.subscribe({ rate_card_id: card, create_checkout_session: "always" });
  await s.call("POST", `/subscriptions/${first.subscription.id}/cancel`, {});
  const r = await s.call("POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: card, ...extra });
  if (r.result.result_type !== "success") throw new Error("expected to start at once (card on file)");
  subscriptionOf.set(s, r.result.subscription.id);
  return { id: r.result.subscription.id, other };
}

/** The case's invoices as [status, total, total discount], oldest first. */
async function discounted(s: Scenario): Promise<[string, string, string][]> {
  return (await s.invoices()).filter((i) => i.subscription_id === subscriptionOf.get(s)).map((i) => [i.status, i.total_amount.value, i.total_discount.value]);
}

/** Each case's subscription (cases run concurrently). */
const subscriptionOf = new WeakMap<Scenario, string>();

/** The invoices of the case's subscription as [status, total, lines], oldest first. */
async function bills(s: Scenario): Promise<[string, string, string[][]][]> {
  return (await s.invoices())
    .filter((i) => i.subscription_id === subscriptionOf.get(s))
    .map((i) => [i.status, i.total_amount.value, i.line_items.map((l: Json) => [l.description, l.quantity, l.price_in_unit_amount.value, l.amount.value])]);
}

const cases: Case[] = [
  [
    "charges below the commitment: the period's close bills the difference as commitment_true_up",
    async (s) => {
      const id = await subscribed(s, 1, { minimum_commitment: money(5000) });
      await s.events([["2026-01-20T00:00:00Z", "1500"]]);
      await s.advance("2026-02-15T00:00:00Z");
      return [(await s.call("GET", `/subscriptions/${id}`)).minimum_commitment, await bills(s)];
    },
    [
      { currency_code: "USD", value: "5000" },
      [
        ["paid", "1000", [["Seats", "1", "1000", "1000"]]],
        // period: seats 1000 + usage 1500 = 2500 < 5000: true-up 5000 − 2500 = 2500; total 1000 + 1500 + 2500 = 5000
        [
          "paid",
          "5000",
          [
            ["Seats", "1", "1000", "1000"],
            ["API calls", "1500", "1", "1500"],
            ["Minimum commitment USD 50.00: charges of the period USD 25.00", "1", "2500", "2500"],
          ],
        ],
      ],
    ],
  ],
  [
    "an immediate cancellation bills the true-up of the commitment prorated to the part of the period used",
    async (s) => {
      const id = await subscribed(s, 1, { minimum_commitment: money(6200) });
      await s.events([["2026-01-20T00:00:00Z", "500"]]);
      await s.advance("2026-01-30T00:00:00Z");
      await s.call("POST", `/subscriptions/${id}/cancel`, {});
      await s.advance("2026-01-30T02:00:00Z");
      return (await bills(s)).at(-1);
    },
    // Jan 15 → Jan 30 is 15 of the period's 31 days: commitment 6200 × 15/31 = 3000; the period's
    // charges: seats 1000 (paid in advance) + usage 500 = 1500; true-up 3000 − 1500 = 1500; the
    // final invoice: usage 500 + true-up 1500 = 2000
    [
      "paid",
      "2000",
      [
        ["API calls", "500", "1", "500"],
        ["Minimum commitment USD 30.00 (prorated from USD 62.00): charges of the period USD 15.00", "1", "1500", "1500"],
      ],
    ],
  ],
  [
    "a pause trues up the period it cuts short, prorated as an immediate cancellation is; the resume starts a new period",
    async (s) => {
      const id = await subscribed(s, 1, { minimum_commitment: money(5000) });
      await s.events([["2026-01-20T00:00:00Z", "1500"]]);
      await s.advance("2026-02-14T00:00:00Z");
      await s.call("POST", `/subscriptions/${id}/pause`, {});
      await s.advance("2026-02-14T00:00:01Z");
      await s.call("POST", `/subscriptions/${id}/resume`, {});
      return await bills(s);
    },
    [
      ["paid", "1000", [["Seats", "1", "1000", "1000"]]],
      // Jan 15 → Feb 14 is 30 of the period's 31 days: commitment 5000 × 30/31 = 4838.709…; the period's
      // charges: seats 1000 + usage 1500 = 2500; true-up 4838.709… − 2500 = 2338.709… → 2339 (rounded once,
      // half-up); the pause's invoice: usage 1500 + true-up 2339 = 3839 (the old code: 1500, no true-up,
      // and the resume's new cycle left the period Jan 15 → Feb 14 at 2500 for good)
      [
        "paid",
        "3839",
        [
          ["API calls", "1500", "1", "1500"],
          ["Minimum commitment USD 48.39 (prorated from USD 50.00): charges of the period USD 25.00", "1", "2339", "2339"],
        ],
      ],
      // The resume's new cycle: seats 1000, less the unused day paid for, 1000 × 1/31 = 32.26… → 32: 968
      [
        "paid",
        "968",
        [
          ["Seats", "1", "1000", "1000"],
          ["Seats × 1: unused time of the cycle paused at 2026-02-14T00:00:00Z (remaining 1 of 31 days)", "1", "-32", "-32"],
        ],
      ],
    ],
  ],
  [
    "a paused subscription cancelled: its period was trued up by the pause, the cancellation bills nothing more",
    async (s) => {
      const id = await subscribed(s, 1, { minimum_commitment: money(5000) });
      await s.events([["2026-01-20T00:00:00Z", "1500"]]);
      await s.advance("2026-02-14T00:00:00Z");
      await s.call("POST", `/subscriptions/${id}/pause`, {});
      await s.advance("2026-02-20T00:00:00Z");
      await s.call("POST", `/subscriptions/${id}/cancel`, {});
      await s.advance("2026-03-20T00:00:00Z");
      return [(await s.call("GET", `/subscriptions/${id}`)).status, await bills(s)];
    },
    [
      "cancelled",
      [
        ["paid", "1000", [["Seats", "1", "1000", "1000"]]],
        // As above: 5000 × 30/31 − (1000 + 1500) = 2338.709… → 2339, once (the old code: none, ever)
        [
          "paid",
          "3839",
          [
            ["API calls", "1500", "1", "1500"],
            ["Minimum commitment USD 48.39 (prorated from USD 50.00): charges of the period USD 25.00", "1", "2339", "2339"],
          ],
        ],
      ],
    ],
  ],
  [
    "a commitment changed for the next period applies from a resume, which starts a new period",
    async (s) => {
      const id = await subscribed(s, 1, { minimum_commitment: money(5000) });
      await s.events([["2026-01-20T00:00:00Z", "1500"]]);
      await s.advance("2026-02-01T00:00:00Z");
      await s.call("PATCH", `/subscriptions/${id}`, { minimum_commitment: money(3000) });
      await s.advance("2026-02-14T00:00:00Z");
      await s.call("POST", `/subscriptions/${id}/pause`, {});
      await s.advance("2026-02-14T00:00:01Z");
      await s.call("POST", `/subscriptions/${id}/resume`, {});
      await s.advance("2026-03-14T00:00:01Z");
      return (await bills(s)).slice(1).map(([status, amount, lines]) => [status, amount, lines.map((l) => [l[0], l[3]])]);
    },
    [
      // The period cut short keeps the 5000 it started with: 5000 × 30/31 − 2500 = 2339, as above
      [
        "paid",
        "3839",
        [
          ["API calls", "1500"],
          ["Minimum commitment USD 48.39 (prorated from USD 50.00): charges of the period USD 25.00", "2339"],
        ],
      ],
      [
        "paid",
        "968",
        [
          ["Seats", "1000"],
          ["Seats × 1: unused time of the cycle paused at 2026-02-14T00:00:00Z (remaining 1 of 31 days)", "-32"],
        ],
      ],
      // The resumed period Feb 14 00:00:01 → Mar 14 00:00:01 is on the new 3000: its charges are the seats
      // 1000 (the unused-time credit is a credit, not lower charges), no usage: true-up 3000 − 1000 = 2000;
      // total with the next period's seats 1000 + 2000 = 3000 (the old code kept 5000: 4000, 5000 in all)
      [
        "paid",
        "3000",
        [
          ["Seats", "1000"],
          ["Minimum commitment USD 30.00: charges of the period USD 10.00", "2000"],
        ],
      ],
    ],
  ],
  [
    "charges at or above the commitment: no true-up",
    async (s) => {
      await subscribed(s, 2, { minimum_commitment: money(3000) });
      await s.events([["2026-01-20T00:00:00Z", "1000"]]);
      await s.advance("2026-02-15T00:00:00Z");
      return (await bills(s)).at(-1);
    },
    // period: 2 × 1000 + 1000 = 3000 = commitment: nothing more
    [
      "paid",
      "3000",
      [
        ["Seats", "2", "1000", "2000"],
        ["API calls", "1000", "1", "1000"],
      ],
    ],
  ],
  [
    "a PATCH sets a commitment from the next period on; 0 removes it from the period after",
    async (s) => {
      const id = await subscribed(s, 1);
      await s.advance("2026-01-20T00:00:00Z");
      const set = await s.call("PATCH", `/subscriptions/${id}`, { minimum_commitment: money(4000) });
      await s.advance("2026-02-15T00:00:00Z");
      const removed = await s.call("PATCH", `/subscriptions/${id}`, { minimum_commitment: money(0) });
      await s.advance("2026-04-15T00:00:00Z");
      return [set.subscription.minimum_commitment, removed.subscription.minimum_commitment ?? null, (await bills(s)).map((b) => b[1])];
    },
    [
      { currency_code: "USD", value: "4000" },
      null,
      // Jan 15 (1000); Feb 15 closes [Jan 15, Feb 15) without a commitment (1000); Mar 15 closes
      // [Feb 15, Mar 15) under 4000: 1000 fixed + 3000 true-up = 4000; Apr 15: removed, 1000
      ["1000", "1000", "4000", "1000"],
    ],
  ],
  [
    "a cancellation at the end of the cycle still trues up the last period",
    async (s) => {
      const id = await subscribed(s, 1, { minimum_commitment: money(2500) });
      await s.call("POST", `/subscriptions/${id}/cancel`, { cancel_at_end_of_cycle: true });
      await s.advance("2026-02-15T00:00:00Z");
      return (await bills(s)).at(-1);
    },
    // the last period: 1000 fixed (billed Jan 15), no usage: true-up 2500 − 1000 = 1500, nothing in advance
    ["paid", "1500", [["Minimum commitment USD 25.00: charges of the period USD 10.00", "1", "1500", "1500"]]],
  ],
  [
    "a change of rate card mid-period: what it billed counts; the period's charges reach the commitment, no true-up",
    async (s) => {
      const { id, other } = await usageOnly(s, { minimum_commitment: money(10000) });
      await s.events([["2026-01-20T00:00:00Z", "80"]]);
      await s.advance("2026-01-30T00:00:00Z");
      await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: other });
      await s.events([["2026-02-05T00:00:00Z", "30"]]);
      await s.advance("2026-02-15T00:00:00Z");
      return await bills(s);
    },
    [
      // (the empty invoice that opened the period, with no fixed fee, is kept internal: not listed)
      // Jan 30: the change bills the usage so far, 80 × 100 = 8000
      ["paid", "8000", [["API calls", "80", "100", "8000"]]],
      // the close: 30 × 100 = 3000; the period's charges 8000 + 3000 = 11000 ≥ 10000: no true-up (it
      // was 10000 − 3000 = 7000 when only the close's usage counted: 18000 for a period of 11000)
      ["paid", "3000", [["API calls", "30", "100", "3000"]]],
    ],
  ],
  [
    "a change of rate card that leaves the period below the commitment: the true-up is the rest",
    async (s) => {
      const { id, other } = await usageOnly(s, { minimum_commitment: money(10000) });
      await s.events([["2026-01-20T00:00:00Z", "80"]]);
      await s.advance("2026-01-30T00:00:00Z");
      await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: other });
      await s.events([["2026-02-05T00:00:00Z", "10"]]);
      await s.advance("2026-02-15T00:00:00Z");
      return await bills(s);
    },
    [
      // 80 × 100 = 8000 on the change
      ["paid", "8000", [["API calls", "80", "100", "8000"]]],
      // 10 × 100 = 1000; the period's charges 8000 + 1000 = 9000: true-up 10000 − 9000 = 1000; total 1000 + 1000 = 2000
      [
        "paid",
        "2000",
        [
          ["API calls", "10", "100", "1000"],
          ["Minimum commitment USD 100.00: charges of the period USD 90.00", "1", "1000", "1000"],
        ],
      ],
    ],
  ],
  [
    "an immediate cancellation after a change of rate card: the prorated commitment counts what the change billed",
    async (s) => {
      const { id, other } = await usageOnly(s, { minimum_commitment: money(6200) });
      await s.events([["2026-01-16T00:00:00Z", "10"]]);
      await s.advance("2026-01-20T00:00:00Z");
      await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: other });
      await s.events([["2026-01-25T00:00:00Z", "5"]]);
      await s.advance("2026-01-30T00:00:00Z");
      await s.call("POST", `/subscriptions/${id}/cancel`, {});
      await s.advance("2026-01-30T02:00:00Z");
      return await bills(s);
    },
    [
      // Jan 20: 10 × 100 = 1000
      ["paid", "1000", [["API calls", "10", "100", "1000"]]],
      // Jan 15 → Jan 30 is 15 of the period's 31 days: 6200 × 15/31 = 3000; the period's charges
      // 1000 (the change) + 5 × 100 = 1500; true-up 3000 − 1500 = 1500; total 500 + 1500 = 2000
      [
        "paid",
        "2000",
        [
          ["API calls", "5", "100", "500"],
          ["Minimum commitment USD 30.00 (prorated from USD 62.00): charges of the period USD 15.00", "1", "1500", "1500"],
        ],
      ],
    ],
  ],
  [
    "a seat increase mid-period: its proration invoice counts towards the commitment",
    async (s) => {
      const id = await subscribed(s, 1, { minimum_commitment: money(5000) });
      await s.events([["2026-01-20T00:00:00Z", "1500"]]);
      await s.advance("2026-01-30T00:00:00Z");
      await s.call("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { seats: 2 } });
      await s.advance("2026-02-15T00:00:00Z");
      return (await bills(s)).map((b) => b[1]);
    },
    // Jan 15: 1 seat, 1000; Jan 30: 1 seat more for 16 of 31 days, 1000 × 16/31 = 516.13 → 516; the
    // close: 2 seats 2000 (the next period) + usage 1500 + true-up 5000 − (1000 + 516 + 1500) = 1984
    // = 5484 (the true-up was 5000 − 2500 = 2500 when the proration did not count)
    ["1000", "516", "5484"],
  ],
  [
    "a 50% coupon on a commitment met at list price: the charges count before discounts, no true-up",
    async (s) => {
      const half = await coupon(s, { name: "Half", percent_off: "50", duration: "forever" });
      await subscribed(s, 10, { minimum_commitment: money(10000), coupon_id: half.id });
      await s.advance("2026-02-15T00:00:00Z");
      return await bills(s).then(async (b) => [b, await discounted(s)]);
    },
    [
      [
        // 10 seats 10000, 50% off
        ["paid", "5000", [["Seats", "10", "1000", "10000"]]],
        // the period's charges 10000 before discounts = the commitment: no true-up; the next
        // period's seats 10000, 50% off: 5000 (after discounts the period came to 5000, which would have trued up 5000)
        ["paid", "5000", [["Seats", "10", "1000", "10000"]]],
      ],
      [
        ["paid", "5000", "5000"],
        ["paid", "5000", "5000"],
      ],
    ],
  ],
  [
    "a coupon for every rate discounts the true-up line like the others",
    async (s) => {
      const half = await coupon(s, { name: "Half", percent_off: "50", duration: "forever" });
      await subscribed(s, 1, { minimum_commitment: money(10000), coupon_id: half.id });
      await s.events([["2026-01-20T00:00:00Z", "1500"]]);
      await s.advance("2026-02-15T00:00:00Z");
      return [(await bills(s)).at(-1), (await discounted(s)).at(-1)];
    },
    [
      // the period's charges before discounts: seats 1000 + usage 1500 = 2500; true-up 10000 − 2500 = 7500;
      // lines 1000 + 1500 + 7500 = 10000, 50% off every line: 5000 off, total 5000
      [
        "paid",
        "5000",
        [
          ["Seats", "1", "1000", "1000"],
          ["API calls", "1500", "1", "1500"],
          ["Minimum commitment USD 100.00: charges of the period USD 25.00", "1", "7500", "7500"],
        ],
      ],
      ["paid", "5000", "5000"],
    ],
  ],
  [
    "a coupon limited to rate codes leaves the true-up line whole (it has no rate)",
    async (s) => {
      const seatsOnly = await coupon(s, { name: "Half the seats", percent_off: "50", duration: "forever", applies_to_rate_codes: ["seats"] });
      await subscribed(s, 1, { minimum_commitment: money(10000), coupon_id: seatsOnly.id });
      await s.events([["2026-01-20T00:00:00Z", "1500"]]);
      await s.advance("2026-02-15T00:00:00Z");
      return (await discounted(s)).at(-1);
    },
    // true-up 10000 − (1000 + 1500) = 7500 as above; 50% off the seats line only: 500 off; total 10000 − 500 = 9500
    ["paid", "9500", "500"],
  ],
  [
    "bad input: 400 naming minimum_commitment's fields, nothing written",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [simple(m, usd(1))] });
      const body = (mc: Json) => ({ subject_id: s.subjectId, rate_card_id: card, fixed_rate_quantities: { seats: 1 }, minimum_commitment: mc });
      const out: unknown[] = [];
      for (const mc of [money(-1), money(100, "EUR"), money("x"), money(100, "XYZ")]) {
        const r = await s.raw("POST", "/subscriptions", body(mc));
        out.push([r.status, violatedFields(r.body)]);
      }
      out.push((await s.subscriptions()).length);
      return out;
    },
    [[400, ["minimum_commitment.value"]], [400, ["minimum_commitment.currency_code"]], [400, ["minimum_commitment.value"]], [400, ["minimum_commitment.currency_code"]], 0],
  ],
];

for (const store of STORES) {
  const server = useServer(store);
  for (const [title, run, expected] of cases) {
    test(`${store}: ${title}`, async (t) => {
      const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
      t.deepEqual(await run(s), expected);
    });
  }

  test(`${store}: a draft's true-up is sized again on late usage at finalization`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z", { invoiceGraceSeconds: 3600 });
    await subscribed(s, 1, { minimum_commitment: money(5000) });
    await s.events([["2026-01-20T00:00:00Z", "1000"]]);
    await s.advance("2026-02-15T00:00:00Z");
    const draft = (await bills(s)).at(-1);
    // A late event of the period, within the grace period.
    await s.events([["2026-02-14T00:00:00Z", "500"]]);
    await s.advance("2026-02-15T02:00:00Z");
    const final = (await bills(s)).at(-1);
    t.deepEqual(draft, [
      "draft",
      // 1000 (seats of the next period) + 1000 usage + true-up 5000 − (1000 + 1000) = 3000
      "5000",
      [
        ["Seats", "1", "1000", "1000"],
        ["API calls", "1000", "1", "1000"],
        ["Minimum commitment USD 50.00: charges of the period USD 20.00", "1", "3000", "3000"],
      ],
    ]);
    t.deepEqual(final, [
      "paid",
      // usage 1500: true-up 5000 − (1000 + 1500) = 2500; total 1000 + 1500 + 2500 = 5000
      "5000",
      [
        ["Seats", "1", "1000", "1000"],
        ["API calls", "1500", "1", "1500"],
        ["Minimum commitment USD 50.00: charges of the period USD 25.00", "1", "2500", "2500"],
      ],
    ]);
  });
}
