/**
 * A second upgrade in the period after one whose change lines went to the balance with the part of
 * a "once" coupon that took the new card's charge (change-credit.ts): the new card's unused time is
 * worth what was paid for it (change-lines.ts paidCredit, proration.ts ChangeChargeTerms), not its
 * list price. Through the REST API on test clocks, on MariaDB and SQLite. Amounts in USD cents. An
 * invoice (those with lines) is [status, total, lines as [description, amount, discounts], amount
 * due], oldest first; the ledger is [entry type, amount].
 */
import test from "ava";
import { seats, simple, usd } from "../helpers/catalog-bodies.js";
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

/**
 * Cards A (1,000 a seat), B (2,000) and C (2,800), each with API calls at 1 a unit; 1 seat of A from
 * Feb 1 (grace 15 days), 500 units on Feb 10, `off` off once added on Feb 14, A → B (prorate) on Feb 15.
 */
async function upgradedToB(server: ReturnType<typeof useServer>, off: number) {
  const s = await Scenario.start(server, "2026-02-01T00:00:00Z", { invoiceGraceSeconds: 15 * 86400 });
  const m = await s.metric();
  const a = await s.card({ name: "A", fixed_rates: [seats(1000)], usage_based_rates: [simple(m, usd(1))] });
  const b = await s.card({ name: "B", fixed_rates: [seats(2000)], usage_based_rates: [simple(m, usd(1))] });
  const c = await s.card({ name: "C", fixed_rates: [seats(2800)], usage_based_rates: [simple(m, usd(1))] });
  const coupon = (await s.call("POST", "/coupons", { name: "Once", duration: "once", amount_off: { currency_code: "USD", value: off } })).id;
  const sub = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 } })).subscription;
  await s.events([["2026-02-10T00:00:00Z", "500"]]);
  await s.advance("2026-02-14T00:00:00Z");
  await s.call("POST", `/subscriptions/${sub.id}/discounts`, { coupon_id: coupon });
  await s.advance("2026-02-15T00:00:00Z");
  await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: b, behavior: "prorate" });
  return { s, a, c, sub };
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: B's charge taken whole by a 3,000 off once coupon, B's unused time at a second upgrade is worth 0, not 500 at list`, async (t) => {
    const { s, c, sub } = await upgradedToB(server, 3000);
    // Feb 15 (half left): −500 for A + 1,000 for B + 500 of usage; the coupon takes 1,500, 1,000 of it B's whole charge. The
    // change lines net −500 + 1,000 − 1,000 = −500, to the balance; B's time to Mar 1 was paid 0.
    t.deepEqual((await bills(s)).at(-1), ["draft", "0", [["API calls", "500", ["500"]]], "0"]);
    t.deepEqual(await ledger(s), [["proration", "500"]]);
    await s.events([["2026-02-16T00:00:00Z", "100"]]);
    await s.advance("2026-02-22T00:00:00Z");
    await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: c, behavior: "prorate" });
    // Feb 22 (25% left): 100 of usage + C's 700 (2,800 − 2,000 = 800 × 25% = 200 above B's 500 at list, 500 + 200), B's unused time
    // worth 0: 800, 500 of it paid by the balance, 300 due. The old code credited B's 25% at list: 100 − 500 + 700 = 300, 0 due.
    t.deepEqual((await bills(s)).at(-1), [
      "draft",
      "800",
      [
        ["API calls", "100", []],
        ["Remaining time on C (prorated: 25% of the period left)", "700", []],
      ],
      "300",
    ]);
    await s.advance("2026-03-10T00:00:00Z");
    const all = await bills(s);
    t.deepEqual(all.slice(-2), [
      [
        "paid",
        "800",
        [
          ["API calls", "100", []],
          ["Remaining time on C (prorated: 25% of the period left)", "700", []],
        ],
        "300",
      ],
      ["draft", "2800", [["Seats", "2800", []]], "2800"],
    ]);
    t.deepEqual(await ledger(s), [
      ["proration", "500"],
      ["application", "-500"],
    ]);
  });

  test(`${store}: a 1,200 off once coupon split between B's charge and usage: B took 700 of it, so B's unused time at a second upgrade is worth 150`, async (t) => {
    const { s, c, sub } = await upgradedToB(server, 1200);
    // Feb 15 (half left): −500 for A + 1,000 for B + 500 of usage. Booked with the change lines the 1,200 spreads 800 on B and
    // 400 on usage; without them usage alone takes 500: the change lines took 1,200 − 500 = 700, B's 1,000 was paid 300, and
    // −500 + 1,000 − 700 = −200 goes to the balance.
    t.deepEqual(await ledger(s), [["proration", "200"]]);
    await s.events([["2026-02-16T00:00:00Z", "100"]]);
    await s.advance("2026-02-22T00:00:00Z");
    await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: c, behavior: "prorate" });
    // Feb 22 (25% left): B's unused time 2,000 × 25% = 500 at list, 70% of B's charge taken by the coupon: worth 500 × 30%
    // = 150 (the share booked on B's line, 800, made it 100). 100 of usage − 150 + C's 700 = 650.
    const last = (await bills(s)).at(-1) as [string, string, [string, string, string[]][], string];
    t.deepEqual([last[1], last[2].map((l) => l[1])], ["650", ["100", "-150", "700"]]);
  });

  test(`${store}: B's charge taken whole by the coupon, a downgrade back to A in between keeps B's time worth 0 at the upgrade to C`, async (t) => {
    const { s, a, c, sub } = await upgradedToB(server, 3000);
    await s.advance("2026-02-18T00:00:00Z");
    await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: a, behavior: "prorate" });
    await s.advance("2026-02-22T00:00:00Z");
    await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: c, behavior: "prorate" });
    // Feb 18: B → A charges nothing; the period stays paid on B, at 0 (the coupon took B's whole charge). Feb 22 (25% left):
    // C's 2,800 × 25% = 700, B's unused time worth 0: 700 (it credited B's 25% at list again, −500: 200).
    const last = (await bills(s)).at(-1) as [string, string, [string, string, string[]][], string];
    t.deepEqual([last[1], last[2].map((l) => l[1])], ["700", ["700"]]);
  });
}
