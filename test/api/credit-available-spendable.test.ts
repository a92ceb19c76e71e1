/**
 * Billing state's available_credit (DESIGN §14) counts only the credit the period's close can
 * draw on: grants spendable at the period's end (in effect, not expired by then), a grant limited
 * to rate codes the card does not bill as usage only as far as it pays the period's lines;
 * credit_balance stays the ledger's sum.
 * Through the real server's API, on both stores and a test clock.
 *
 * A card with one usage rate `api` at 10 per unit, period Jan 15 → Feb 15, a grant of 5,000, 200
 * units used on Jan 20 (2,000). The Feb 15 invoice then applies what available credit said.
 */
import test from "ava";
import { credited, creditState, promo } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { flat, usageRate } from "../helpers/price-bodies.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const JAN = "2026-01-15T00:00:00Z";
const JAN_16 = "2026-01-16T00:00:00Z";
const JAN_20 = "2026-01-20T00:00:00Z";
const FEB_1 = "2026-02-01T00:00:00Z";
const FEB = "2026-02-15T00:00:00Z";
const FEB_16 = "2026-02-16T00:00:00Z";
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
}
