/**
 * Proration credits carried on a subscription when it is cancelled now (DESIGN §13, §14): what the
 * final invoice does not take goes to the subject's credit balance, as at a cycle close or a seat
 * change; a cancelled row's carried credits are read by nothing, so they were lost. Golden cases
 * through the REST API on test clocks, on MariaDB and SQLite. Amounts in USD cents; 1,000 a seat,
 * monthly from January 15: the period [Jan 15, Feb 15) is 31 days, and January 26 leaves 20 of
 * them. An invoice (those with lines) is [status, total, lines as [description, amount], credits
 * applied, amount due], oldest first; the ledger [entry_type, amount]; billing state
 * [credit_balance, available_credit].
 */
import test from "ava";
import { seats, simple, usd } from "../helpers/catalog-bodies.js";
import { creditState, ledger } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

async function bills(s: Scenario): Promise<unknown[]> {
  return (await s.invoices())
    .filter((i) => i.line_items.length > 0)
    .map((i) => [i.status, i.total_amount.value, i.line_items.map((l: Json) => [l.description, l.amount.value]), (i.credits_applied as Json[]).map((c) => c.amount.value), i.amount_due.value]);
}

/**
 * Subscribed on January 15 with 4 seats (4,000 paid), then on January 26 down to 1 seat without
 * proration (the period stays billed at 4) and paused; resumed on February 1: the unused time
 * 4 × 1,000 × 20/31 = 2,580.65 → 2,581 is credited, the new cycle's 1 × 1,000 takes 1,000 of it
 * and 1,581 is carried on the subscription. With `usage`, API calls at 1 cent a unit, 300 of them
 * on February 1 at noon. The subscription's ID.
 */
async function carrying1581(s: Scenario, usage = false): Promise<string> {
  const m = usage ? await s.metric() : "";
  const card = await s.card({ fixed_rates: [seats()], usage_based_rates: usage ? [simple(m, usd(1))] : [] });
  const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 4 } })).subscription.id;
  await s.advance("2026-01-26T00:00:00Z");
  await s.call("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { seats: 1 }, proration_behavior: "none" });
  await s.call("POST", `/subscriptions/${id}/pause`, {});
  await s.advance("2026-02-01T00:00:00Z");
  await s.call("POST", `/subscriptions/${id}/resume`, {});
  if (usage) await s.events([["2026-02-01T12:00:00Z", "300"]]);
  return id;
}

const PAID_4 = ["paid", "4000", [["Seats", "4000"]], [], "4000"];
const RESUMED = [
  "paid",
  "0",
  [
    ["Seats", "1000"],
    // 1,000 of the 2,581 credited: the rest, 1,581, carried
    ["Seats × 4: unused time of the cycle paused at 2026-01-26T00:00:00Z (remaining 20 of 31 days) (USD 10.00 of USD 25.81; the rest on the next invoice)", "-1000"],
  ],
  [],
  "0",
];

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: cancelled now with 1,581 carried: the final invoice takes nothing, the 1,581 goes to the credit balance`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const id = await carrying1581(s);
    await s.advance("2026-02-02T00:00:00Z");
    const cancelled = await s.call("POST", `/subscriptions/${id}/cancel`, {});
    t.is(cancelled.status, "cancelled");
    // The final invoice bills no usage (the card has none): no room for the credit. The old code
    // left the −1,581 on the cancelled row, where nothing reads it (ledger empty, balance 0).
    t.deepEqual(await bills(s), [PAID_4, RESUMED]);
    t.deepEqual(await ledger(s), [["proration", "1581"]]);
    t.deepEqual(await creditState(s), ["1581", "1581"]);
  });

  test(`${store}: cancelled now with 1,581 carried and 300 of usage: the open final invoice takes 300, the balance gets the other 1,281`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const id = await carrying1581(s, true);
    await s.advance("2026-02-02T00:00:00Z");
    await s.call("POST", `/subscriptions/${id}/cancel`, {});
    t.deepEqual((await bills(s)).slice(1), [
      RESUMED,
      // Final: 300 × 1 = 300, less 300 of the carried credit (all it can take): 0
      [
        "paid",
        "0",
        [
          ["API calls", "300"],
          ["Seats × 4: unused time of the cycle paused at 2026-01-26T00:00:00Z (remaining 20 of 31 days) (USD 3.00 of USD 25.81; the rest on the next invoice)", "-300"],
        ],
        [],
        "0",
      ],
    ]);
    // 1,581 − 300 = 1,281 granted, once
    t.deepEqual(await ledger(s), [["proration", "1281"]]);
    t.deepEqual(await creditState(s), ["1281", "1281"]);
  });

  test(`${store}: cancelled now with a draft final invoice (grace 1 hour): the 1,581 goes to the balance, which pays the draft once final`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z", { invoiceGraceSeconds: 3600 });
    const id = await carrying1581(s, true);
    await s.advance("2026-02-02T00:00:00Z");
    await s.call("POST", `/subscriptions/${id}/cancel`, {});
    // A draft takes no carried credit (its usage lines are recomputed at finalization): all 1,581
    // is granted at once, not once on the draft and again on the balance.
    const atCancel = [await ledger(s), (await bills(s)).at(-1)];
    await s.advance("2026-02-02T02:00:00Z");
    // (a draft shows what the balance would pay of it now, nothing spent yet)
    t.deepEqual(atCancel, [[["proration", "1581"]], ["draft", "300", [["API calls", "300"]], ["300"], "0"]]);
    t.deepEqual(await bills(s), [
      PAID_4,
      RESUMED,
      // Final: 300 × 1 = 300, paid by the balance: 1,581 − 300 = 1,281 left
      ["paid", "300", [["API calls", "300"]], ["300"], "0"],
    ]);
    t.deepEqual(await ledger(s), [
      ["proration", "1581"],
      ["application", "-300"],
    ]);
    t.deepEqual(await creditState(s), ["1281", "1281"]);
  });

  test(`${store}: paused again and cancelled while paused: the 1,581 carried goes to the credit balance`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const id = await carrying1581(s);
    await s.advance("2026-02-02T00:00:00Z");
    // The pause's invoice bills no usage: it takes none of the credit, which stays carried.
    await s.call("POST", `/subscriptions/${id}/pause`, {});
    await s.advance("2026-02-03T00:00:00Z");
    const cancelled = await s.call("POST", `/subscriptions/${id}/cancel`, {});
    t.is(cancelled.status, "cancelled");
    t.deepEqual(await bills(s), [PAID_4, RESUMED]);
    t.deepEqual(await ledger(s), [["proration", "1581"]]);
    t.deepEqual(await creditState(s), ["1581", "1581"]);
  });
}
