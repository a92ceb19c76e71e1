/**
 * A change of seats between two upgrades of rate card in one period, the first upgrade's change
 * lines gone to the balance with the part of a "once" coupon that took the new card's charge
 * (change-credit.ts): the period's charged terms keep what that charge paid for the card
 * (proration.ts ChangeChargeTerms), moved by the seat change (change-lines.ts
 * chargeAfterTermsChange), so the second upgrade credits the card's unused time at what was paid for
 * it. Through the REST API on test clocks, on MariaDB and SQLite. Amounts in USD cents. An invoice
 * (those with lines) is [status, total, lines as [description, amount], amount due], oldest first.
 */
import test from "ava";
import { seats, simple, usd } from "../helpers/catalog-bodies.js";
import { ledger } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { patch } from "../helpers/price-bodies.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

async function bills(s: Scenario): Promise<unknown[]> {
  return (await s.invoices()).filter((i) => i.line_items.length > 0).map((i) => [i.status, i.total_amount.value, i.line_items.map((l: Json) => [l.description, l.amount.value]), i.amount_due.value]);
}

/**
 * Cards A (1,000 a seat), B (2,000) and C (2,800), each with API calls at 1 a unit; 1 seat of A from
 * Feb 1 (grace 15 days), 500 units on Feb 10, 1,200 off once added on Feb 14, A → B (prorate) on
 * Feb 15 (half the period left): −500 for A + 1,000 for B + 500 of usage. Booked with the change
 * lines the 1,200 takes 1,200, without them 500 (the usage): B's 1,000 took 700 of it and was paid
 * 300; −500 + 1,000 − 700 = −200 goes to the balance. B's seats go 1 → 2 on Feb 18 (11 of 28 days
 * left) with `behavior`, and B → C (prorate) on Feb 22 (a quarter left).
 */
async function seatsBetweenUpgrades(server: ReturnType<typeof useServer>, behavior: string) {
  const s = await Scenario.start(server, "2026-02-01T00:00:00Z", { invoiceGraceSeconds: 15 * 86400 });
  const m = await s.metric();
  const a = await s.card({ name: "A", fixed_rates: [seats(1000)], usage_based_rates: [simple(m, usd(1))] });
  const b = await s.card({ name: "B", fixed_rates: [seats(2000)], usage_based_rates: [simple(m, usd(1))] });
  const c = await s.card({ name: "C", fixed_rates: [seats(2800)], usage_based_rates: [simple(m, usd(1))] });
  const coupon = (await s.call("POST", "/coupons", { name: "Once", duration: "once", amount_off: { currency_code: "USD", value: 1200 } })).id;
  const sub = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 } })).subscription;
  await s.events([["2026-02-10T00:00:00Z", "500"]]);
  await s.advance("2026-02-14T00:00:00Z");
  await s.call("POST", `/subscriptions/${sub.id}/discounts`, { coupon_id: coupon });
  await s.advance("2026-02-15T00:00:00Z");
  await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: b, behavior: "prorate" });
  await s.advance("2026-02-18T00:00:00Z");
  await patch(s, sub.id, { fixed_rate_quantities: { seats: "2" }, proration_behavior: behavior });
  await s.advance("2026-02-22T00:00:00Z");
  await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: c, behavior: "prorate" });
  return s;
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: B's seats 1 → 2 between the upgrades: B's unused quarter is worth 150 for the first seat (paid 30%) and 500 for the second (paid in full), 650, not 1,000 at list`, async (t) => {
    const s = await seatsBetweenUpgrades(server, "create_prorations");
    const all = await bills(s);
    // Feb 18: the second seat 2,000 × 11/28 = 785.71 → 786, at list (the once coupon is spent), 200 of it paid by the balance.
    t.deepEqual(all.at(-2), ["paid", "786", [["Seats: 1 → 2 (remaining 11 of 28 days)", "786"]], "586"]);
    // Feb 22: B's unused quarter 2 × 2,000 × 25% = 1,000 at list. The first seat's time was paid 30% (1,000 charged, 700
    // discounted): 500 × 30% = 150; the second's in full: 500. So −650 (B's charge kept moved to Feb 18: 2,000 × 11/28
    // = 785.71 at 30% plus 786 at list, 550 discounted of 1,571.71, 35% of 1,000 off). C's 2 × 2,800 = 5,600: (5,600 −
    // 4,000) × 25% = 400 above B's 1,000 at list, 1,400. 1,400 − 650 = 750. The seat change dropped B's charge before: B's
    // quarter was valued from A's 1,000 and the 786, both at list, −1,000 (400 billed).
    t.deepEqual(all.at(-1), [
      "draft",
      "750",
      [
        ["Unused time on B (prorated: 25% of the period left), less the period's discounts on it: USD 3.50", "-650"],
        ["Remaining time on C (prorated: 25% of the period left)", "1400"],
      ],
      "750",
    ]);
    t.deepEqual(await ledger(s), [
      ["proration", "200"],
      ["application", "-200"],
    ]);
  });

  test(`${store}: B's seats 1 → 2 without proration between the upgrades: the period stays paid for one seat of B, worth 150`, async (t) => {
    const s = await seatsBetweenUpgrades(server, "none");
    // Feb 18 bills nothing: the period stays charged at 1 seat of B, its charge kept as it was (1,000 charged, 700
    // discounted). Feb 22: B's quarter 1 × 2,000 × 25% = 500 at list, paid 30%: −150. C's 5,600: (5,600 − 2,000) × 25% =
    // 900 above B's 500, 1,400. 1,400 − 150 = 1,250. The change dropped B's charge before: 500 at list from A's 1,000 (900).
    t.deepEqual((await bills(s)).at(-1), [
      "draft",
      "1250",
      [
        ["Unused time on B (prorated: 25% of the period left), less the period's discounts on it: USD 3.50", "-150"],
        ["Remaining time on C (prorated: 25% of the period left)", "1400"],
      ],
      "1050",
    ]);
  });
}
