/**
 * A "once" coupon an upgrade's change lines take, booked from an unlocked read (the change's
 * invoice is a draft), while another transaction takes or holds it (change-credit.ts, coupon-store
 * holdOnce): the upgrade checks the row under its lock and, if it is no longer as it read it,
 * starts over from a fresh read. Through the REST API on MariaDB (SQLite's transaction holds the
 * file: no two interleave), with a deterministic interleaving: a connection of the test holds the
 * discount's row lock while the two calls read it, and lets go once both wait on it. Amounts in
 * USD cents. An invoice (those with lines) is [status, total, lines as [description, amount,
 * discounts], amount due], oldest first; the ledger is [entry type, amount].
 */
import test from "ava";
import mysql from "mysql2/promise";
import { seats, simple, usd } from "../helpers/catalog-bodies.js";
import { ledger } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const mysqlOnly = STORES.includes("mysql") ? test : test.skip;
const server = STORES.includes("mysql") ? useServer("mysql") : undefined;

async function bills(s: Scenario): Promise<unknown[]> {
  return (await s.invoices())
    .filter((i) => i.line_items.length > 0)
    .map((i) => [i.status, i.total_amount.value, i.line_items.map((l: Json) => [l.description, l.amount.value, (l.discount_amounts as Json[]).map((d) => d.amount.value)]), i.amount_due.value]);
}

/** Runs `first`, then (1.5 s later, `first` waiting on the lock) `second`, while discount `discountId`'s row is locked; lets go 1.5 s later. */
async function underLock(url: string, discountId: string, first: () => Promise<unknown>, second: () => Promise<unknown>): Promise<void> {
  const conn = await mysql.createConnection(url);
  try {
    await conn.query("START TRANSACTION");
    await conn.query("SELECT id FROM discounts WHERE id = ? FOR UPDATE", [discountId]);
    const a = first();
    await new Promise((r) => setTimeout(r, 1_500));
    const b = second();
    await new Promise((r) => setTimeout(r, 1_500));
    await conn.query("COMMIT");
    await Promise.all([a, b]);
  } finally {
    await conn.end();
  }
}

mysqlOnly("mysql: a change's draft finalized while an upgrade of another subscription books a subject's 2,000 off once: one of them takes it, not both (1,100 + 1,500)", async (t) => {
  if (!server) return t.fail();
  const s = await Scenario.start(server, "2026-01-05T00:00:00Z", { invoiceGraceSeconds: 5 * 86400 });
  const m = await s.metric();
  const a = await s.card({ name: "A", fixed_rates: [seats(1000)], usage_based_rates: [simple(m, usd(1))] });
  const b = await s.card({ name: "B", fixed_rates: [seats(2000)], usage_based_rates: [simple(m, usd(1))] });
  const m2 = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "other");
  const cy = await s.card({ name: "C", fixed_rates: [seats(1000)], usage_based_rates: [simple(m2, usd(1), 0, "other", "Other calls")] });
  const coupon = (await s.call("POST", "/coupons", { name: "Once", duration: "once", amount_off: { currency_code: "USD", value: 2000 } })).id;
  const x = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 } })).subscription; // Jan 5
  await s.advance("2026-01-10T00:00:00Z");
  const y = (await s.subscribe({ rate_card_id: cy, fixed_rate_quantities: { seats: 1 } })).subscription; // Jan 10
  await s.events([["2026-01-20T00:00:00Z", "100"]], "other");
  await s.advance("2026-02-05T00:00:00Z");
  await s.events([["2026-02-06T00:00:00Z", "500"]]);
  await s.advance("2026-02-11T00:00:00Z"); // Y's close on Feb 10: its draft (1,000 + 100) until Feb 15
  const discount = await s.call("POST", `/subjects/${s.subjectId}/discounts`, { coupon_id: coupon });
  await s.advance("2026-02-12T00:00:00Z");
  const draft = (await s.invoices()).find((i: Json) => i.status === "draft" && i.subscription_id === y.id);
  await underLock(
    server.db.url,
    discount.id,
    () => s.call("POST", `/invoices/${draft.id}/finalize`, {}),
    () => s.call("POST", `/subscriptions/${x.id}/change-rate-card`, { rate_card_id: b, behavior: "prorate" }),
  );
  const [yClose, change] = (await bills(s)).slice(-2);
  // Y's draft took the coupon: 1,000 + 100 − 1,100 = 0.
  t.deepEqual(yClose, [
    "paid",
    "0",
    [
      ["Seats", "1000", ["1000"]],
      ["Other calls", "100", ["100"]],
    ],
    "0",
  ]);
  // X's change on Feb 12 (75% of Feb 5–Mar 5 left), booked again once the coupon was gone: 500 − 750 + 1,500 = 1,250, nothing
  // to the balance. The old code kept the booking it read first: the change lines took 1,500 of the coupon as well, and their
  // net −750 went to the balance (1,100 + 1,500 = 2,600 off a 2,000 coupon).
  t.deepEqual(change, [
    "draft",
    "1250",
    [
      ["API calls", "500", []],
      ["Unused time on A (prorated: 75% of the period left)", "-750", []],
      ["Remaining time on B (prorated: 75% of the period left)", "1500", []],
    ],
    "1250",
  ]);
  t.deepEqual(await ledger(s), []);
});

mysqlOnly("mysql: two subscriptions upgrading at once under a subject's 3,000 off once: the second does not take the coupon held for the first's draft", async (t) => {
  if (!server) return t.fail();
  const s = await Scenario.start(server, "2026-02-01T00:00:00Z", { invoiceGraceSeconds: 3600 });
  const m1 = await s.metric();
  const m2 = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "other");
  const card = (name: string, price: number, m: string, other: boolean) =>
    s.card({ name, fixed_rates: [seats(price)], usage_based_rates: [other ? simple(m, usd(1), 0, "other", "Other calls") : simple(m, usd(1))] });
  const [a1, b1, a2, b2] = [await card("A", 1000, m1, false), await card("B", 2000, m1, false), await card("A2", 1000, m2, true), await card("B2", 2000, m2, true)];
  const coupon = (await s.call("POST", "/coupons", { name: "Once", duration: "once", amount_off: { currency_code: "USD", value: 3000 } })).id;
  const x1 = (await s.subscribe({ rate_card_id: a1, fixed_rate_quantities: { seats: 1 } })).subscription;
  const x2 = (await s.subscribe({ rate_card_id: a2, fixed_rate_quantities: { seats: 1 } })).subscription;
  await s.events([["2026-02-10T00:00:00Z", "500"]]);
  await s.events([["2026-02-10T00:00:00Z", "500"]], "other");
  await s.advance("2026-02-14T00:00:00Z");
  const discount = await s.call("POST", `/subjects/${s.subjectId}/discounts`, { coupon_id: coupon });
  await s.advance("2026-02-15T00:00:00Z");
  const upgrade = (id: string, to: string) => () => s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: to, behavior: "prorate" });
  await underLock(server.db.url, discount.id, upgrade(x1.id, b1), upgrade(x2.id, b2));
  const [first, second] = (await bills(s)).slice(-2);
  // X1's change (half left): −500 + 1,000 + 500 of usage, the coupon takes 1,500, 500 of it on the usage alone: −500 to the
  // balance, the coupon held for this draft with 1,000 taken.
  t.deepEqual(first, ["draft", "0", [["API calls", "500", ["500"]]], "0"]);
  // X2's, booked again once the coupon was held for X1's draft: none of it: −500 + 1,000 + 500 = 1,000. The old code took it
  // again (another 500 to the balance, 0 here) and moved the hold to X2's draft, 2,000 taken, X1's draft then offered none of it.
  t.deepEqual(second, [
    "draft",
    "1000",
    [
      ["Other calls", "500", []],
      ["Unused time on A2 (prorated: 50% of the period left)", "-500", []],
      ["Remaining time on B2 (prorated: 50% of the period left)", "1000", []],
    ],
    "500", // X1's 500 on the balance pays part of it
  ]);
  t.deepEqual(await ledger(s), [["proration", "500"]]);
});
