/**
 * A "once" coupon split by an upgrade whose change lines net to a credit (change-credit.ts): the
 * part the change lines took goes to the balance with them, the rest stays for the change's draft
 * (the old card's usage, in its grace period), and late usage that reaches that draft never makes
 * the coupon take more than its amount over both. Through the REST API on test clocks, on MariaDB
 * and SQLite. Amounts in USD cents. An invoice (those with lines) is [status, total, lines as
 * [description, amount, discounts], amount due], oldest first.
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
 * A 1,000 a month + 1 a unit, upgraded on Feb 15 (half left) to B (`b.seats` a month, + 1 a unit when `b.usage`), 500 units by then,
 * `coupon` ("once") added on Feb 14; drafts for `b.graceSeconds`.
 */
async function upgraded(server: Parameters<typeof Scenario.start>[0], coupon: Json, b: { seats: number; usage: boolean; graceSeconds: number }) {
  const s = await Scenario.start(server, "2026-02-01T00:00:00Z", { invoiceGraceSeconds: b.graceSeconds });
  const m = await s.metric();
  const a = await s.card({ name: "A", fixed_rates: [seats(1000)], usage_based_rates: [simple(m, usd(1))] });
  const to = await s.card({ name: "B", fixed_rates: [seats(b.seats)], ...(b.usage ? { usage_based_rates: [simple(m, usd(1))] } : {}) });
  const c = (await s.call("POST", "/coupons", { name: "Once", duration: "once", ...coupon })).id;
  const sub = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 } })).subscription;
  await s.events([["2026-02-10T00:00:00Z", "500"]]);
  await s.advance("2026-02-14T00:00:00Z");
  await s.call("POST", `/subscriptions/${sub.id}/discounts`, { coupon_id: c });
  await s.advance("2026-02-15T00:00:00Z");
  await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: to, behavior: "prorate" });
  return s;
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: 3,000 off "once" split by an upgrade (1,000 on its charge, 500 to the balance) takes at most 2,000 of the change's draft after late usage: 3,500 − 2,000 − 500 = 1,000 due`, async (t) => {
    const s = await upgraded(server, { amount_off: { currency_code: "USD", value: 3000 } }, { seats: 2000, usage: true, graceSeconds: 3600 });
    // The change: −500 for A + 1,000 for B + 500 of usage, the coupon capped at its 1,500 of lines: 1,000 on B's charge, 500 on the
    // usage. Without the change lines the usage takes 500 of it (0): the change lines add −500 + 1,000 − 1,000 = −500, to the balance.
    t.deepEqual((await bills(s)).at(-1), ["draft", "0", [["API calls", "500", ["500"]]], "0"]);
    t.deepEqual(await ledger(s), [["proration", "500"]]);
    // Late usage on Feb 12, while the change's draft is in grace: 3,000 more units; the draft, booked again, is offered 2,000.
    await s.events([["2026-02-12T00:00:00Z", "3000"]]);
    t.deepEqual((await bills(s)).at(-1), ["draft", "1500", [["API calls", "3500", ["2000"]]], "1000"]);
    await s.advance("2026-02-15T02:00:00Z");
    const all = await bills(s);
    // The draft finalized: 3,500 of usage, the coupon's 3,000 less the 1,000 the change lines took = 2,000 off: 1,500, 500 of it
    // paid by the balance: 1,000 due. The old code took 3,000 again (4,000 in all): 500, paid by the balance, 0 due.
    t.deepEqual(all.at(-1), ["paid", "1500", [["API calls", "3500", ["2000"]]], "1000"]);
    t.deepEqual(await ledger(s), [
      ["proration", "500"],
      ["application", "-500"],
    ]);
    // Nothing left of it at the next close: B's 2,000 + 0 of usage.
    await s.advance("2026-03-01T02:00:00Z");
    t.deepEqual((await bills(s)).at(-1), ["paid", "2000", [["Seats", "2000", []]], "2000"]);
  });

  test(`${store}: 100% off "once" split by an upgrade discounts the change's lines only, not the next period's invoice that finalizes before the change's draft: March 2,000 − 500 of balance = 1,500 due`, async (t) => {
    // Grace 15 days: the change's draft (Feb 15) finalizes on Mar 2, after the close of Mar 1 (B has no usage rate: final at once).
    const s = await upgraded(server, { percent_off: "100" }, { seats: 2000, usage: false, graceSeconds: 15 * 86400 });
    // The change: −500 for A, B's 1,000 and the 500 of usage all taken (−500); without the change lines the usage is taken (0): −500 to the balance.
    t.deepEqual((await bills(s)).at(-1), ["draft", "0", [["API calls", "500", ["500"]]], "0"]);
    await s.advance("2026-03-03T00:00:00Z");
    // March's 2,000 is not discounted (the coupon is held for the change's draft), 500 of it paid by the balance: 1,500 due; the draft's
    // 500 of usage taken on Mar 2: 0. The old code took March's 2,000 too (0 due) and charged the draft's 500 to the balance.
    t.deepEqual((await bills(s)).slice(1), [
      ["paid", "0", [["API calls", "500", ["500"]]], "0"],
      ["paid", "2000", [["Seats", "2000", []]], "1500"],
    ]);
    t.deepEqual(await ledger(s), [
      ["proration", "500"],
      ["application", "-500"],
    ]);
  });
}
