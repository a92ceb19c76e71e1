/**
 * A credit for unused fixed-fee time is worth what was paid for that time, net of the discounts
 * the period's invoices took, and no current coupon discounts it (DESIGN §13, §15): a pause's
 * credit on the resume's invoice, and an upgrade of rate card's credit for the old card. Golden
 * cases through the REST API on test clocks, on MariaDB and SQLite. Amounts in USD cents. An
 * invoice (those with lines) is [status, total, lines as [description, amount, discounts], amount
 * due], oldest first.
 */
import test from "ava";
import { seats } from "../helpers/catalog-bodies.js";
import { ledger } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

async function bills(s: Scenario): Promise<unknown[]> {
  return (await s.invoices())
    .filter((i) => i.line_items.length > 0)
    .map((i) => [i.status, i.total_amount.value, i.line_items.map((l: Json) => [l.description, l.amount.value, (l.discount_amounts as Json[]).map((d) => d.amount.value)]), i.amount_due.value]);
}

const HALF_ONCE = { name: "Half once", percent_off: "50", duration: "once" };
const HALF_SEATS = { name: "Half seats", percent_off: "50", duration: "forever", applies_to_rate_codes: ["seats"] };
const HALF_ALL = { name: "Half", percent_off: "50", duration: "forever" };

/**
 * 1 seat at 10,000 a month from January 15 (31 days), `coupon` from the start or (`later`) added
 * while paused; paused on January 25 (21 of 31 days unused: 6,774.19 at list), resumed on
 * February 1.
 */
async function pausedAndResumed(s: Scenario, coupon: Json, later = false): Promise<void> {
  const card = await s.card({ fixed_rates: [seats(10000)] });
  const c = (await s.call("POST", "/coupons", coupon)).id;
  const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 }, ...(later ? {} : { coupon_id: c }) })).subscription;
  await s.advance("2026-01-25T00:00:00Z");
  await s.call("POST", `/subscriptions/${sub.id}/pause`, {});
  await s.advance("2026-02-01T00:00:00Z");
  if (later) await s.call("POST", `/subscriptions/${sub.id}/discounts`, { coupon_id: c });
  await s.call("POST", `/subscriptions/${sub.id}/resume`, {});
}

const UNUSED = "Seats × 1: unused time of the cycle paused at 2026-01-25T00:00:00Z (remaining 21 of 31 days)";
const LESS = `${UNUSED}, less the period's discounts on it: USD 33.87`;

/**
 * Card A (1 seat at 1,000) upgraded on February 15 (half of February left) to card B (1 seat at
 * 2,000), prorated, `coupon` from the start or (`later`) added just before the upgrade.
 */
async function upgraded(s: Scenario, coupon: Json, later: boolean): Promise<void> {
  const a = await s.card({ name: "A", fixed_rates: [seats(1000)] });
  const b = await s.card({ name: "B", fixed_rates: [seats(2000)] });
  const c = (await s.call("POST", "/coupons", coupon)).id;
  const sub = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 }, ...(later ? {} : { coupon_id: c }) })).subscription;
  await s.advance("2026-02-15T00:00:00Z");
  if (later) await s.call("POST", `/subscriptions/${sub.id}/discounts`, { coupon_id: c });
  await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: b, behavior: "prorate" });
}

const HALF = "(prorated: 50% of the period left)";

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: pause under a "once" 50% coupon: the credit is the 5,000 paid × 21/31 = 3,387; the resume pays 10,000 − 3,387 = 6,613`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    await pausedAndResumed(s, HALF_ONCE);
    t.deepEqual(await bills(s), [
      ["paid", "5000", [["Seats", "10000", ["5000"]]], "5000"],
      [
        "paid",
        "6613",
        [
          ["Seats", "10000", []],
          [LESS, "-3387", []],
        ],
        "6613",
      ],
    ]);
  });

  test(`${store}: pause under a "forever" 50% seats-only coupon: the resume pays 5,000 − 3,387 = 1,613 (the credit is not left out of the discount's reach by its missing rate code, nor discounted)`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    await pausedAndResumed(s, HALF_SEATS);
    t.deepEqual(await bills(s), [
      ["paid", "5000", [["Seats", "10000", ["5000"]]], "5000"],
      [
        "paid",
        "1613",
        [
          ["Seats", "10000", ["5000"]],
          [LESS, "-3387", []],
        ],
        "1613",
      ],
    ]);
  });

  test(`${store}: pause under a "forever" 50% coupon on every rate: the resume pays 5,000 − 3,387 = 1,613 (the coupon discounts the charge, not the credit)`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    await pausedAndResumed(s, HALF_ALL);
    t.deepEqual(await bills(s), [
      ["paid", "5000", [["Seats", "10000", ["5000"]]], "5000"],
      [
        "paid",
        "1613",
        [
          ["Seats", "10000", ["5000"]],
          [LESS, "-3387", []],
        ],
        "1613",
      ],
    ]);
  });

  test(`${store}: a "forever" 50% coupon added while paused takes nothing of the credit for a period paid at list: 5,000 − 6,774 → 0 due, 1,774 carried to the balance`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    await pausedAndResumed(s, HALF_ALL, true);
    t.deepEqual(await bills(s), [
      ["paid", "10000", [["Seats", "10000", []]], "10000"],
      [
        "paid",
        "0",
        [
          ["Seats", "10000", ["5000"]],
          [`${UNUSED} (USD 50.00 of USD 67.74; the rest on the next invoice)`, "-5000", []],
        ],
        "0",
      ],
    ]);
    // The 1,774 left goes to the balance at the next cycle close (March 1) and pays part of its 5,000.
    await s.advance("2026-03-01T00:00:00Z");
    const last = (await bills(s)).at(-1);
    t.deepEqual(last, ["paid", "5000", [["Seats", "10000", ["5000"]]], "3226"]);
    t.deepEqual(
      (await ledger(s)).filter(([type]) => type === "proration"),
      [["proration", "1774"]],
    );
  });

  test(`${store}: upgrade under a "forever" 50% seats-only coupon: B's half at 50% (500) less A's unused half at what was paid (250) = 250`, async (t) => {
    const s = await Scenario.start(server, "2026-02-01T00:00:00Z");
    await upgraded(s, HALF_SEATS, false);
    t.deepEqual((await bills(s)).at(-1), [
      "paid",
      "250",
      [
        [`Unused time on A ${HALF}, less the period's discounts on it: USD 2.50`, "-250", []],
        [`Remaining time on B ${HALF}`, "1000", ["500"]],
      ],
      "250",
    ]);
  });

  test(`${store}: upgrade with a "forever" 50% coupon on every rate added after A was paid at list: 500 − 500 = 0 (the credit is not discounted)`, async (t) => {
    const s = await Scenario.start(server, "2026-02-01T00:00:00Z");
    await upgraded(s, HALF_ALL, true);
    t.deepEqual((await bills(s)).at(-1), [
      "paid",
      "0",
      [
        [`Unused time on A ${HALF}`, "-500", []],
        [`Remaining time on B ${HALF}`, "1000", ["500"]],
      ],
      "0",
    ]);
  });
}
