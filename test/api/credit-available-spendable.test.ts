/**
 * Billing state's available_credit (DESIGN §14) counts only the credit the current periods' closes
 * can draw on, played as they will spend it: each close at its finalization (the period's end, or
 * the end of the grace period after it when the card bills usage) takes, of the grants spendable
 * then (in effect, not expired), what allocateCredits gives it of its lines; what they leave due
 * is −available credit, else what is left of the grants a close can still draw on (unrestricted,
 * or limited to a rate code a current card bills, usage or fixed). credit_balance stays the
 * ledger's sum. Through the real server's API, on both stores and a test clock.
 *
 * A card with one usage rate `api` at 10 per unit, period Jan 15 → Feb 15, a grant of 5,000, 200
 * units used on Jan 20 (2,000). The Feb 15 invoice then applies what available credit said.
 */
import test from "ava";
import { type CreditedInvoice, checkoutWithCard, credited, creditState, eventTypes, grants, promo, settings } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { fixedRate, flat, money, usageRate } from "../helpers/price-bodies.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const JAN = "2026-01-15T00:00:00Z";
const JAN_16 = "2026-01-16T00:00:00Z";
const JAN_20 = "2026-01-20T00:00:00Z";
const FEB_1 = "2026-02-01T00:00:00Z";
const FEB = "2026-02-15T00:00:00Z";
const FEB_HALF_HOUR = "2026-02-15T00:30:00Z";
const FEB_16 = "2026-02-16T00:00:00Z";
const FEB_17 = "2026-02-17T00:00:00Z";
const FEB_20 = "2026-02-20T00:00:00Z";

const cases: [string, Json, [string, string], [string, string, [string, string][], string]][] = [
  // Unaffected: the grant pays the 2,000; 3,000 left.
  ["an unrestricted grant in effect counts whole", {}, ["5000", "3000"], ["paid", "2000", [["grant", "2000"]], "0"]],
  // Limited to the rate the card bills: it pays the 2,000, and its 3,000 left pays more api usage.
  ["a grant limited to the billed rate code counts whole", { applies_to_rate_codes: ["api"] }, ["5000", "3000"], ["paid", "2000", [["grant", "2000"]], "0"]],
  // It cannot pay the api line: 2,000 due, as available credit says.
  ["a grant limited to another rate code counts nothing", { applies_to_rate_codes: ["other"] }, ["5000", "-2000"], ["open", "2000", [], "2000"]],
  // Not in effect at the close on Feb 15.
  ["a grant in effect only after the period's end counts nothing", { effective_at: FEB_20 }, ["5000", "-2000"], ["open", "2000", [], "2000"]],
  // Expired by the close on Feb 15, though still in the balance on Jan 20.
  ["a grant expiring before the period's end counts nothing", { expires_at: FEB_1 }, ["5000", "-2000"], ["open", "2000", [], "2000"]],
];

for (const store of STORES) {
  const server = useServer(store);

  for (const [name, opts, state, invoice] of cases) {
    test.serial(`${store}: ${name}`, async (t) => {
      const s = await Scenario.start(server, JAN);
      const m = await s.metric();
      await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, flat(10))] }) });
      await promo(s, "grant", 5000, opts);
      await s.events([[JAN_20, "200"]]);
      t.deepEqual(await creditState(s), state, "[credit_balance, available_credit] on Jan 20");
      await s.advance(FEB);
      // [status, total, credits applied, amount due]: amount due is −available credit when it is < 0.
      t.deepEqual(await credited(s), [invoice]);
    });
  }

  test.serial(`${store}: two subscriptions of one subject: a grant limited to their rate code counts once, as far as it pays both`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const plan = async (event: string) => {
      const m = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], event);
      await s.subscribe({ rate_card_id: await s.card({ name: event, usage_based_rates: [usageRate(m, flat(10))] }) });
    };
    await plan("a");
    await s.advance(JAN_16);
    await plan("b");
    await promo(s, "api-only", 3000, { applies_to_rate_codes: ["api"], priority: 10 });
    await promo(s, "any", 500);
    await s.events([[JAN_20, "200"]], "a");
    await s.events([[JAN_20, "200"]], "b");
    // a (Feb 15) 2,000, all paid by api-only; b (Feb 16) 2,000: api-only's 1,000 left, any's 500:
    // 3,000 + 500 − 4,000 = −500 (not api-only counted for each period apart: 2,000 + 2,000 + 500 − 4,000 = 500).
    t.deepEqual(await creditState(s), ["3500", "-500"]);
    await s.advance(FEB_16);
    t.deepEqual(await credited(s), [
      ["paid", "2000", [["api-only", "2000"]], "0"],
      [
        "open",
        "2000",
        [
          ["api-only", "1000"],
          ["any", "500"],
        ],
        "500",
      ],
    ]);
  });

  test.serial(`${store}: a grant limited to a rate the card bills counts nothing for the usage of another of its rates`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const api = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "api");
    const calls = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "calls");
    await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(api, flat(10)), usageRate(calls, flat(10), { code: "calls", name: "Calls" })] }) });
    await promo(s, "api-only", 5000, { applies_to_rate_codes: ["api"] });
    await s.events([[JAN_20, "200"]], "calls");
    // The 2,000 of calls is due whatever api usage the grant could still pay (was 3,000).
    t.deepEqual(await creditState(s), ["5000", "-2000"]);
    await s.advance(FEB);
    t.deepEqual(await credited(s), [["open", "2000", [], "2000"]]);
  });

  test.serial(`${store}: a grant spendable only at another subscription's close counts nothing for this one's usage`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const a = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "a");
    await s.subscribe({ rate_card_id: await s.card({ name: "a", usage_based_rates: [usageRate(a, flat(10))] }) });
    await s.advance(JAN_20);
    const b = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "b");
    await s.subscribe({ rate_card_id: await s.card({ name: "b", usage_based_rates: [usageRate(b, flat(10))] }) });
    // a closes Feb 15 with no usage, b closes Feb 20 with 2,000: the grant is gone by then (was 3,000).
    await promo(s, "any", 5000, { expires_at: FEB_17 });
    await s.events([[JAN_20, "200"]], "b");
    t.deepEqual(await creditState(s), ["5000", "-2000"]);
    await s.advance(FEB_20);
    t.deepEqual(await credited(s), [["open", "2000", [], "2000"]]);
  });

  const graced: [string, Json, string, CreditedInvoice][] = [
    // Expired when the draft finalizes at 01:00 (was 3,000).
    ["a grant expiring at the period's end counts nothing when the close finalizes after its grace period", { expires_at: FEB }, "-2000", ["open", "2000", [], "2000"]],
    // In effect when the draft finalizes (was −2,000).
    ["a grant in effect within the grace period counts whole", { effective_at: FEB_HALF_HOUR }, "3000", ["paid", "2000", [["grant", "2000"]], "0"]],
  ];
  for (const [name, opts, available, invoice] of graced) {
    test.serial(`${store}: ${name}`, async (t) => {
      const s = await Scenario.start(server, JAN, { invoiceGraceSeconds: 3600 });
      const m = await s.metric();
      await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, flat(10))] }) });
      await promo(s, "grant", 5000, opts);
      await s.events([[JAN_20, "200"]]);
      t.deepEqual(await creditState(s), ["5000", available]);
      await s.advance(FEB_16);
      t.deepEqual(await credited(s), [invoice]);
    });
  }

  test.serial(`${store}: a grant limited to a fixed rate counts whole, and buys no auto top-up`, async (t) => {
    const s = await Scenario.start(server, JAN);
    // Seats only, 1,000 a month, a card on file (the checkout saved it).
    t.is(await checkoutWithCard(s, await s.card({ fixed_rates: [fixedRate(flat(1000))] }), CARD_OK), 303);
    await promo(s, "seats-only", 5000, { applies_to_rate_codes: ["seats"] });
    // The Feb 15 close pays the next month's seats from it: 5,000 available (was 0, below every threshold).
    t.deepEqual(await creditState(s), ["5000", "5000"]);
    await settings(s, { auto_top_up: { threshold: money(500), amount: money(5000) }, low_balance_threshold: money(100) });
    await s.advance(JAN_16);
    await new Promise((r) => setTimeout(r, 500));
    t.deepEqual(await eventTypes(s, ["credit.balance_low", "credit.depleted"]), []);
    t.is((await grants(s)).length, 1, "no top-up bought");
    await s.advance(FEB);
    t.deepEqual(await credited(s), [
      ["paid", "1000", [], "1000"],
      ["paid", "1000", [["seats-only", "1000"]], "0"],
    ]);
  });
}
