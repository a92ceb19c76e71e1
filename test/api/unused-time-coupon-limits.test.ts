/**
 * A credit for unused time under coupons taken after the period was paid (DESIGN §13, §15): an
 * amount off never takes more than its invoice comes to, an upgrade's net credit to the balance
 * is what its lines add to the invoice once discounts are spread again over the lines that stay,
 * a minimum commitment counts an upgrade's credit at list, and a credit carried onto an invoice
 * takes no more than its charges after discounts. Through the REST API on test clocks, on MariaDB
 * and SQLite. Amounts in USD cents. An invoice (those with lines) is [status, total, lines as
 * [description, amount, discounts], amount due], oldest first.
 */
import test from "ava";
import { seats, simple, usd } from "../helpers/catalog-bodies.js";
import { ledger } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { money } from "../helpers/price-bodies.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

async function bills(s: Scenario): Promise<unknown[]> {
  return (await s.invoices())
    .filter((i) => i.line_items.length > 0)
    .map((i) => [i.status, i.total_amount.value, i.line_items.map((l: Json) => [l.description, l.amount.value, (l.discount_amounts as Json[]).map((d) => d.amount.value)]), i.amount_due.value]);
}

const HALF = "(prorated: 50% of the period left)";

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a 300 amount off added before an upgrade 1,000 → 1,100 with half left takes only the 50 the upgrade comes to: 0 now, 800 in March`, async (t) => {
    const s = await Scenario.start(server, "2026-02-01T00:00:00Z");
    const a = await s.card({ name: "A", fixed_rates: [seats(1000)] });
    const b = await s.card({ name: "B", fixed_rates: [seats(1100)] });
    const c = (await s.call("POST", "/coupons", { name: "300 off", amount_off: { currency_code: "USD", value: 300 }, duration: "forever" })).id;
    const sub = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 } })).subscription;
    await s.advance("2026-02-15T00:00:00Z");
    await s.call("POST", `/subscriptions/${sub.id}/discounts`, { coupon_id: c });
    await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: b, behavior: "prorate" });
    await s.advance("2026-03-01T00:00:00Z");
    t.deepEqual(await bills(s), [
      ["paid", "1000", [["Seats", "1000", []]], "1000"],
      [
        "paid",
        "0",
        [
          [`Unused time on A ${HALF}`, "-500", []],
          [`Remaining time on B ${HALF}`, "550", ["50"]],
        ],
        "0",
      ],
      ["paid", "800", [["Seats", "1100", ["300"]]], "800"],
    ]);
    t.deepEqual(await ledger(s), []);
  });

  test(`${store}: a 300 amount off "once" added before an upgrade 1,000 → 1,100 with half left is spent whole: 250 to the balance, 850 due in March`, async (t) => {
    const s = await Scenario.start(server, "2026-02-01T00:00:00Z");
    const a = await s.card({ name: "A", fixed_rates: [seats(1000)] });
    const b = await s.card({ name: "B", fixed_rates: [seats(1100)] });
    const c = (await s.call("POST", "/coupons", { name: "300 off", amount_off: { currency_code: "USD", value: 300 }, duration: "once" })).id;
    const sub = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 } })).subscription;
    await s.advance("2026-02-15T00:00:00Z");
    await s.call("POST", `/subscriptions/${sub.id}/discounts`, { coupon_id: c });
    await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: b, behavior: "prorate" });
    await s.advance("2026-03-01T00:00:00Z");
    // −500 + 550 − 300 = −250 to the balance (the coupon ends with the upgrade); March 1,100 − 250 = 850. The old code
    // capped the coupon at the upgrade's 50 (total 0), ended it all the same and charged 1,100: 250 of it lost.
    t.deepEqual((await bills(s)).at(-1), ["paid", "1100", [["Seats", "1100", []]], "850"]);
    t.deepEqual(await ledger(s), [
      ["proration", "250"],
      ["application", "-250"],
    ]);
  });

  test(`${store}: a 1,000 amount off on an upgrade with 5,000 of usage is taken once: 5,000 + 550 − 500 − 1,000 = 4,050, nothing to the balance`, async (t) => {
    const s = await Scenario.start(server, "2026-02-01T00:00:00Z");
    const m = await s.metric();
    const a = await s.card({ name: "A", fixed_rates: [seats(1000)], usage_based_rates: [simple(m, usd(1))] });
    const b = await s.card({ name: "B", fixed_rates: [seats(1100)], usage_based_rates: [simple(m, usd(1))] });
    const c = (await s.call("POST", "/coupons", { name: "1000 off", amount_off: { currency_code: "USD", value: 1000 }, duration: "forever" })).id;
    const sub = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 } })).subscription;
    await s.events([["2026-02-10T00:00:00Z", "5000"]]);
    await s.advance("2026-02-15T00:00:00Z");
    await s.call("POST", `/subscriptions/${sub.id}/discounts`, { coupon_id: c });
    await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: b, behavior: "prorate" });
    const upgrade = (await bills(s)).at(-1) as unknown[];
    t.is(upgrade[1], "4050");
    t.is(upgrade[3], "4050");
    t.deepEqual(await ledger(s), []);
  });

  test(`${store}: a minimum commitment counts an upgrade's credit at list: 1,000 − 500 + 1,000 = 1,500 of 3,000, true-up 1,500`, async (t) => {
    const s = await Scenario.start(server, "2026-02-01T00:00:00Z");
    const a = await s.card({ name: "A", fixed_rates: [seats(1000)] });
    const b = await s.card({ name: "B", fixed_rates: [seats(2000)] });
    const c = (await s.call("POST", "/coupons", { name: "Half seats", percent_off: "50", duration: "forever", applies_to_rate_codes: ["seats"] })).id;
    const sub = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 }, coupon_id: c, minimum_commitment: money(3000) })).subscription;
    await s.advance("2026-02-15T00:00:00Z");
    await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: b, behavior: "prorate" });
    await s.advance("2026-03-01T00:00:00Z");
    t.deepEqual((await bills(s)).at(-1), [
      "paid",
      "2500",
      [
        ["Seats", "2000", ["1000"]],
        ["Minimum commitment USD 30.00: charges of the period USD 15.00", "1500", []],
      ],
      "2500",
    ]);
  });

  test(`${store}: a credit carried from a resume onto an upgrade's invoice takes only what its charges come to after a 50% coupon: 250 of 1,774, 0 due, 1,524 to the balance at the close`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const a = await s.card({ name: "A", fixed_rates: [seats(10000)] });
    const b = await s.card({ name: "B", fixed_rates: [seats(12000)] });
    const c = (await s.call("POST", "/coupons", { name: "Half", percent_off: "50", duration: "forever" })).id;
    const sub = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 } })).subscription;
    await s.advance("2026-01-25T00:00:00Z");
    await s.call("POST", `/subscriptions/${sub.id}/pause`, {});
    await s.advance("2026-02-01T00:00:00Z");
    await s.call("POST", `/subscriptions/${sub.id}/discounts`, { coupon_id: c });
    // The resume: 10,000 − 5,000 − 5,000 of the 6,774 credit; 1,774 carried.
    await s.call("POST", `/subscriptions/${sub.id}/resume`, {});
    await s.advance("2026-02-22T00:00:00Z");
    await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: b, behavior: "prorate" });
    const carried = "Seats × 1: unused time of the cycle paused at 2026-01-25T00:00:00Z (remaining 21 of 31 days)";
    const quarter = "(prorated: 25% of the period left)";
    t.deepEqual((await bills(s)).at(-1), [
      "paid",
      "0",
      [
        [`Unused time on A ${quarter}, less the period's discounts on it: USD 12.50`, "-1250", []],
        [`Remaining time on B ${quarter}`, "3000", ["1500"]],
        [`${carried} (USD 2.50 of USD 67.74; the rest on the next invoice)`, "-250", []],
      ],
      "0",
    ]);
    await s.advance("2026-03-01T00:00:00Z");
    t.deepEqual((await bills(s)).at(-1), ["paid", "6000", [["Seats", "12000", ["6000"]]], "4476"]);
    t.deepEqual(await ledger(s), [
      ["proration", "1524"],
      ["application", "-1524"],
    ]);
  });
}
