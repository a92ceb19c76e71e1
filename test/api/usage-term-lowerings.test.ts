/**
 * Usage sent late, dated before a lowered usage multiplier (billed at once), is priced at the
 * multiplier in force when it was used, also when a raise follows in the same window; and a usage
 * window keeps at most 20 changes of usage terms (a 400 past them), however many rates each changes. Through the public API on a
 * test clock, on MariaDB and SQLite; every figure is worked out beside it. A monthly card from
 * 2026-01-01 with 1 seat at 1,000 and API calls at 2 a unit (a sum metric, nothing included),
 * subscribed at ×3; invoices are final at once and paid by card.
 *
 * An invoice reads [total, lines]; a line [description, kind, quantity, unit price, amount].
 */
import test from "ava";
import { seats } from "../helpers/catalog-bodies.js";
import { reasonOf } from "../helpers/clients.js";
import { creditState, ledger } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { EXACT, flat, lineOf, patch, usageRate } from "../helpers/price-bodies.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const JAN = "2026-01-01T00:00:00Z";
const FEB = "2026-02-01T00:00:00Z";
const SEATS = ["Seats", "fixed", "1", "1000", "1000"];

async function bills(s: Scenario): Promise<unknown[]> {
  return (await s.invoices()).slice(1).map((i) => [i.total_amount.value, (i.line_items as Json[]).map((l) => lineOf(l, EXACT))]);
}

/** The subscription (1 seat, API calls at ×3) and 1,000 units on Jan 8, lowered to ×1 on Jan 10. */
async function lowered(s: Scenario): Promise<string> {
  const api = await s.metric();
  const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [usageRate(api, flat(2))] });
  const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 }, rate_price_multipliers: { api: "3" } })).subscription.id;
  await s.events([["2026-01-08T00:00:00Z", "1000"]]);
  await s.advance("2026-01-10T00:00:00Z");
  await patch(s, id, { rate_price_multipliers: { api: "1" } });
  return id;
}

// Jan 10: 1,000 units at ×3 − ×1: 1,000 × 2 × 2 = 4,000, billed at once.
const LOWERED = ["4000", [["API calls: usage before the change (multiplier 3 → 1) at the old terms (2026-01-01T00:00:00Z to 2026-01-10T00:00:00Z)", "adjustment", "1", "4000", "4000"]]];
const LATE = "API calls: usage sent after changes of its terms billed at once, at the terms it was used under (2026-01-01T00:00:00Z to 2026-01-10T00:00:00Z)";

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: lowered 3 → 1, raised 1 → 2, then late usage dated before the lowering: priced at ×3`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const id = await lowered(s);
    await s.events([["2026-01-15T00:00:00Z", "1000"]]);
    await s.advance("2026-01-20T00:00:00Z");
    await patch(s, id, { rate_price_multipliers: { api: "2" } });
    await s.events([["2026-01-25T00:00:00Z", "1000"]]);
    await s.advance("2026-01-31T00:00:00Z");
    await s.events([["2026-01-05T00:00:00Z", "1000"]]);
    await s.advance(FEB);
    t.deepEqual(await bills(s), [
      LOWERED,
      // Feb 1: 1 seat 1,000; 4,000 units × 2 × 2 = 16,000; the raise: (1 − 2) × 2 × 3,000 units before Jan 20 (the late
      // 1,000 of Jan 5 included) = −6,000; the lowering, priced again with the late units: (3 − 1) × 2 × 2,000 = 8,000 less
      // the 4,000 billed on Jan 10: 4,000. API calls in all: 4,000 + 16,000 − 6,000 + 4,000 = 18,000 = 2,000 × 6 (×3:
      // Jan 5, 8) + 1,000 × 2 (×1: Jan 15) + 1,000 × 4 (×2: Jan 25). The old code billed 1,000 + 16,000 − 6,000 = 11,000:
      // 14,000 for API calls, the late 1,000 at ×1 (2,000, not 6,000).
      [
        "15000",
        [
          SEATS,
          ["API calls", "usage", "4000", "4", "16000"],
          [LATE, "adjustment", "1", "4000", "4000"],
          ["API calls: usage before the change (multiplier 1 → 2) at the old terms (2026-01-01T00:00:00Z to 2026-01-20T00:00:00Z)", "adjustment", "1", "-6000", "-6000"],
        ],
      ],
    ]);
  });

  test(`${store}: lowered 3 → 1, then late usage dated before it: priced at ×3`, async (t) => {
    const s = await Scenario.start(server, JAN);
    await lowered(s);
    await s.advance("2026-01-31T00:00:00Z");
    await s.events([["2026-01-05T00:00:00Z", "1000"]]);
    await s.advance(FEB);
    t.deepEqual(await bills(s), [
      LOWERED,
      // Feb 1: 1 seat 1,000; 2,000 units × 2 × 1 = 4,000; the lowering priced again: (3 − 1) × 2 × 2,000 = 8,000 less the
      // 4,000 billed on Jan 10: 4,000. API calls in all: 4,000 + 4,000 + 4,000 = 12,000 = 2,000 × 6, all used at ×3 (the
      // old code: 1,000 + 4,000 = 5,000, the late 1,000 at ×1).
      ["9000", [SEATS, ["API calls", "usage", "2000", "2", "4000"], [LATE, "adjustment", "1", "4000", "4000"]]],
    ]);
  });

  test(`${store}: lowered 3 → 1 with nothing sent late: nothing more at the close`, async (t) => {
    const s = await Scenario.start(server, JAN);
    await lowered(s);
    await s.advance(FEB);
    // Feb 1: 1 seat 1,000; 1,000 × 2 × 1 = 2,000; the lowering priced again: 4,000 − 4,000 billed: no line. 6,000 in all = 1,000 × 6.
    t.deepEqual(await bills(s), [LOWERED, ["3000", [SEATS, ["API calls", "usage", "1000", "2", "2000"]]]]);
  });

  test(`${store}: lowered 3 → 1, then usage dated before it sent after the close: the next invoice adds it at ×3`, async (t) => {
    const s = await Scenario.start(server, JAN);
    await lowered(s);
    await s.advance("2026-02-10T00:00:00Z");
    await s.events([["2026-01-05T00:00:00Z", "1000"]]);
    await s.advance("2026-03-01T00:00:00Z");
    t.deepEqual(await bills(s), [
      LOWERED,
      // Feb 1: 1 seat 1,000; 1,000 × 2 × 1 = 2,000 (the lowering priced again: 4,000 − 4,000 billed, no line).
      ["3000", [SEATS, ["API calls", "usage", "1000", "2", "2000"]]],
      // Mar 1: 1 seat 1,000; January's window again: usage 2,000 × 2 × 1 = 4,000 (+2,000) and the lowering (3 − 1) × 2 × 2,000
      // = 8,000 less the 4,000 billed (+4,000): 6,000 = the late 1,000 at ×3 (the old code: 2,000, at ×1). One line per key,
      // the late 1,000 units (the adjustment adds no units: late-usage.ts unitsOf).
      ["7000", [SEATS, ["Late usage adjustment: API calls (period 2026-01-01T00:00:00Z to 2026-02-01T00:00:00Z)", "adjustment", "1000", "2", "6000"]]],
    ]);
  });

  test(`${store}: lowered 3 → 1, then the usage before it withdrawn: the close takes back what the lowering billed for it`, async (t) => {
    const s = await Scenario.start(server, JAN);
    await lowered(s);
    await s.advance("2026-01-12T00:00:00Z");
    await s.events([["2026-01-08T00:00:00Z", "-1000"]]);
    await s.events([["2026-01-15T00:00:00Z", "1000"]]);
    await s.advance(FEB);
    const b = await bills(s);
    const due = (await s.invoices()).map((i) => (i.amount_due as Json).value);
    const granted = await ledger(s);
    await s.advance("2026-03-01T00:00:00Z");
    const march = (await s.invoices())[3] as Json;
    t.deepEqual(
      [b, due[2], granted, [march.total_amount.value, march.amount_due.value], await ledger(s)],
      [
        [
          LOWERED,
          // Feb 1: 1 seat 1,000; 1,000 units (Jan 8's withdrawn: 1,000 − 1,000 + 1,000 of Jan 15) × 2 × 1 = 2,000; the lowering
          // priced again: (3 − 1) × 2 × 0 units before Jan 10 = 0, less the 4,000 billed on Jan 10: −4,000. API calls in all:
          // 4,000 + 2,000 − 4,000 = 2,000 = 1,000 × 2 at ×1. The old code took off at most the window's 2,000 of usage:
          // 4,000 for API calls. A total below 0 asks nothing, as a late-usage invoice's below 0 does.
          ["-1000", [SEATS, ["API calls", "usage", "1000", "2", "2000"], [LATE, "adjustment", "1", "-4000", "-4000"]]],
        ],
        "0",
        // The −1,000 goes to the balance (DESIGN §14: a credit never becomes a negative invoice), as it is finalized; the old code kept it on the invoice, lost.
        [["invoice_credit", "1000"]],
        // Mar 1: 1 seat 1,000, no usage; paid from the 1,000 granted: due 1,000 − 1,000 = 0, the balance 0.
        ["1000", "0"],
        [
          ["invoice_credit", "1000"],
          ["application", "-1000"],
        ],
      ],
    );
  });

  test(`${store}: lowered 3 → 1, then the usage before it withdrawn after the close: the next invoice takes back what the lowering billed for it`, async (t) => {
    const s = await Scenario.start(server, JAN);
    await lowered(s);
    await s.events([["2026-01-15T00:00:00Z", "1000"]]);
    await s.advance("2026-02-10T00:00:00Z");
    await s.events([["2026-01-08T00:00:00Z", "-1000"]]);
    await s.advance("2026-03-01T00:00:00Z");
    t.deepEqual(await bills(s), [
      LOWERED,
      // Feb 1: 1 seat 1,000; 2,000 units × 2 × 1 = 4,000; the lowering priced again: 4,000 − 4,000 billed, no line.
      ["5000", [SEATS, ["API calls", "usage", "2000", "2", "4000"]]],
      // Mar 1: 1 seat 1,000; January's window again: usage 1,000 × 2 × 1 = 2,000 (−2,000) and the lowering (3 − 1) × 2 × 0
      // = 0 less the 4,000 billed (−4,000): −6,000, one line for the key, −1,000 units (unit price as the other late lines show it). API calls in all: 4,000 + 4,000 −
      // 6,000 = 2,000 = 1,000 × 2 at ×1 (the old code: −2,000 here, the lowering's −4,000 capped at the window's usage, 4,000
      // in all). Below 0, as late usage withdrawn makes any late-usage invoice.
      ["-5000", [SEATS, ["Late usage adjustment: API calls (period 2026-01-01T00:00:00Z to 2026-02-01T00:00:00Z)", "adjustment", "-1000", "2", "-6000"]]],
    ]);
    // Mar 1's −5,000 (1,000 − 6,000) asks nothing and goes to the balance (DESIGN §14); the old code kept it on the invoice, lost.
    const march = (await s.invoices())[3] as Json;
    const granted = await ledger(s);
    await s.advance("2026-04-01T00:00:00Z");
    const april = (await s.invoices())[4] as Json;
    t.deepEqual(
      [[march.status, march.amount_due.value], granted, [april.total_amount.value, april.amount_due.value], await ledger(s), await creditState(s)],
      [
        // Nothing due: paid at once (so it cannot be voided, which would have to take the credit back).
        ["paid", "0"],
        [["invoice_credit", "5000"]],
        // Apr 1: 1 seat 1,000, no usage in March; paid from the 5,000: due 1,000 − 1,000 = 0, 5,000 − 1,000 = 4,000 left.
        ["1000", "0"],
        [
          ["invoice_credit", "5000"],
          ["application", "-1000"],
        ],
        ["4000", "4000"],
      ],
    );
  });

  test(`${store}: 20 changes of usage terms in a window, each usage part at its own multiplier; the 21st is refused until the close`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const id = await lowered(s);
    // Changes 2 to 20 on Jan 11 to 29: ×3 on even ones, ×1 on odd ones (the 20th: ×3). Each lowering nets the raise
    // before it: (3 − 1) × 2 × 1,000 − (3 − 1) × 2 × 1,000 = 0 billed, so only Jan 10's 4,000 is billed at once.
    for (let n = 2; n <= 20; n++) {
      await s.advance(`2026-01-${String(9 + n).padStart(2, "0")}T00:00:00Z`);
      await patch(s, id, { rate_price_multipliers: { api: n % 2 === 0 ? "3" : "1" } });
    }
    await s.advance("2026-01-30T00:00:00Z");
    const refused = await s.raw("PATCH", `/subscriptions/${id}`, { rate_price_multipliers: { api: "1" } });
    await s.advance("2026-01-31T00:00:00Z");
    await s.events([["2026-01-05T00:00:00Z", "1000"]]);
    await s.advance(FEB);
    const after = await patch(s, id, { rate_price_multipliers: { api: "1" } });
    const b = await bills(s);
    t.deepEqual(
      [refused.status, reasonOf(refused.body as Json), (after.subscription as Json).rate_price_multipliers, b.length, b[0], (b[1] as unknown[])[0]],
      [
        400,
        "TOO_MANY_USAGE_TERM_CHANGES",
        { api: "1" },
        // Jan 10, then the close (a lowering at Feb 1, the start of the next window, settles nothing).
        2,
        LOWERED,
        // Feb 1: 1 seat 1,000; 2,000 units (the late 1,000 of Jan 5 included) × 2 × 3 = 12,000; the 19 changes up to Jan 28
        // priced again: 10 lowerings × (3 − 1) × 2 × 2,000 − 9 raises × 8,000 = 8,000, less the 4,000 billed: 4,000; the
        // raise of Jan 29: (1 − 3) × 2 × 2,000 = −8,000. API calls in all: 4,000 + 12,000 + 4,000 − 8,000 = 12,000 = 2,000 × 6,
        // all used at ×3.
        "9000",
      ],
    );
  });

  test(`${store}: one change lowering 21 usage rates' multipliers is one change of the window's 20, in every window`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const api = await s.metric();
    const codes = Array.from({ length: 21 }, (_, i) => `r${i}`);
    const card = await s.card({ fixed_rates: [seats()], usage_based_rates: codes.map((c) => usageRate(api, flat(2), { code: c, name: c })) });
    const at = (m: string) => Object.fromEntries(codes.map((c) => [c, m]));
    const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 }, rate_price_multipliers: at("3") })).subscription.id;
    await s.events([["2026-01-08T00:00:00Z", "10"]]);
    await s.advance("2026-01-10T00:00:00Z");
    // 21 rates × 3 → 1, each 10 units × 2 × (3 − 1) = 40 billed at once: 840. The old code counted the 21 rates as 21 changes: 400.
    const jan = await s.raw("PATCH", `/subscriptions/${id}`, { rate_price_multipliers: at("1") });
    await s.advance("2026-02-10T00:00:00Z");
    const raised = await s.raw("PATCH", `/subscriptions/${id}`, { rate_price_multipliers: at("2") });
    const invoices = await s.invoices();
    t.deepEqual([jan.status, raised.status, reasonOf(raised.body as Json), (invoices[1] as Json).total_amount.value], [200, 200, undefined, "840"]);
  });
}
