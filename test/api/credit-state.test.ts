/**
 * Billing state's credit fields (DESIGN §14) on both stores and test clocks: credit_balance and
 * available_credit per currency with usage so far, what the next invoice then applies, and
 * expiries run by clock advances in order with cycle closes. The scenario is set up through the
 * API; credit is wired as a second server has it (helpers/credit-realtime.ts).
 */
import test from "ava";
import { apiPlan, coupon, percentOff, taxRate } from "../helpers/booking-bodies.js";
import { type CreditWiring, wireCredits } from "../helpers/credit-realtime.js";
import { STORES } from "../helpers/db.js";
import { flat, usageRate } from "../helpers/price-bodies.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const JAN = "2026-01-15T00:00:00Z";
const JAN_20 = "2026-01-20T00:00:00Z";
const FEB_1 = "2026-02-01T00:00:00Z";
const FEB_2 = "2026-02-02T00:00:00Z";
const FEB = "2026-02-15T00:00:00Z";
const FEB_20 = "2026-02-20T00:00:00Z";
const MAR_1 = "2026-03-01T00:00:00Z";

/** Subscribes to a plan of `price` per unit of event `name`'s n, in `currency`. */
async function plan(s: Scenario, price: number, currency = "USD", name = "usage"): Promise<void> {
  const m = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], name);
  const card = await s.card({ name: `${name} ${currency}`, usage_based_rates: [usageRate(m, flat(price, currency))] });
  await s.subscribe({ rate_card_id: card });
}

/** The invoices with lines, oldest first: [currency, total, sum of credits applied, amount due]. */
async function applied(s: Scenario): Promise<[string, string, string, string][]> {
  const out: [string, string, string, string][] = [];
  for (const i of await s.invoices()) {
    if ((i.line_items as Json[]).length === 0) continue;
    const credits = ((i.credits_applied ?? []) as Json[]).reduce((a, c) => a + Number(c.amount.value), 0);
    out.push([i.total_amount.currency_code, i.total_amount.value, String(credits), i.amount_due?.value ?? i.total_amount.value]);
  }
  return out.sort((a, b) => a[0].localeCompare(b[0]));
}

async function ledger(w: CreditWiring, subjectId: string): Promise<[string, string][]> {
  const page = await w.store.ledger(w.caller.environmentId, subjectId, undefined, { limit: 100, offset: 0 });
  return page.items.map((e) => [e.type, e.amount]);
}

async function eventTypes(s: Scenario, prefix: string): Promise<string[]> {
  const r = await s.call("GET", "/events?limit=100");
  return (r.events as Json[]).map((e) => String(e.type)).filter((t) => t.startsWith(prefix));
}

for (const store of STORES) {
  const server = useServer(store);

  test.serial(`${store}: credit_balance and available_credit per currency equal what the next invoices apply`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const w = await wireCredits(s);
    try {
      t.deepEqual(await w.state(), ["0", "0"], "no credit, no subscription: nothing (absent reads as 0)");
      await plan(s, 10);
      await plan(s, 20, "EUR", "eu");
      await w.grant("5000");
      await w.grant("1000", { currency: "EUR" });
      t.deepEqual(
        [await w.state(), await w.state("EUR")],
        [
          ["5000", "5000"],
          ["1000", "1000"],
        ],
      );
      await w.use(JAN_20, "200");
      await s.events([[JAN_20, "30"]], "eu");
      // USD: 5,000 − 200 × 10 = 3,000. EUR: 1,000 − 30 × 20 = 400.
      const before = [await w.state(), await w.state("EUR")];
      t.deepEqual(before, [
        ["5000", "3000"],
        ["1000", "400"],
      ]);
      await w.advance(FEB);
      // Each invoice applies balance − available: USD 2,000, EUR 600; nothing due.
      t.deepEqual(await applied(s), [
        ["EUR", "600", "600", "0"],
        ["USD", "2000", "2000", "0"],
      ]);
      for (const [i, [balance, available]] of before.entries()) t.is(String(Number(balance) - Number(available)), (await applied(s))[1 - i]?.[2]);
      t.deepEqual(
        [await w.state(), await w.state("EUR")],
        [
          ["3000", "3000"],
          ["400", "400"],
        ],
      );
    } finally {
      await w.close();
    }
  });

  test.serial(`${store}: available credit is what the close's invoice will take: the usage after its discounts and tax`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const w = await wireCredits(s);
    try {
      const vat = await taxRate(s, "VAT", "20");
      await s.subscribe({ rate_card_id: await apiPlan(s, { taxes: [vat] }), coupon_id: await coupon(s, "Quarter off", percentOff("25")) });
      await w.grant("6000");
      await w.use(JAN_20, "500");
      // 500 × 10 = 5,000, less 25% = 3,750, plus 20% tax 750 = 4,500 taken of 6,000: 1,500 available (not 6,000 − 5,000 = 1,000).
      t.deepEqual(await w.state(), ["6000", "1500"]);
      await w.advance(FEB);
      t.deepEqual(await applied(s), [["USD", "4500", "4500", "0"]]);
      t.deepEqual(await w.state(), ["1500", "1500"]);
    } finally {
      await w.close();
    }
  });

  test.serial(`${store}: a subject's "once" discount counts in available credit once, on the period that closes first`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const w = await wireCredits(s);
    try {
      await plan(s, 10, "USD", "a");
      await w.advance("2026-01-16T00:00:00Z");
      await plan(s, 10, "USD", "b");
      await w.grant("10000");
      await s.call("POST", `/subjects/${s.subjectId}/discounts`, { coupon_id: await coupon(s, "Half once", percentOff("50", "once")) });
      await s.events([[JAN_20, "400"]], "a");
      await s.events([[JAN_20, "600"]], "b");
      // a closes Feb 15 and takes the once discount: 4,000 less 50% = 2,000; b (Feb 16) pays 6,000 in full: 10,000 − 8,000 = 2,000.
      t.deepEqual(await w.state(), ["10000", "2000"]);
      await w.advance("2026-02-16T00:00:00Z");
      t.deepEqual(
        (await applied(s)).sort((x, y) => Number(x[1]) - Number(y[1])),
        [
          ["USD", "2000", "2000", "0"],
          ["USD", "6000", "6000", "0"],
        ],
      );
      t.deepEqual(await w.state(), ["2000", "2000"]);
    } finally {
      await w.close();
    }
  });

  test.serial(`${store}: overdrawn: available credit goes negative; the next invoice applies the whole balance`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const w = await wireCredits(s);
    try {
      await plan(s, 10);
      await w.grant("2000");
      await w.use(JAN_20, "350");
      t.deepEqual(await w.state(), ["2000", "-1500"]);
      await w.advance(FEB);
      // 3,500: 2,000 applied (the balance), 1,500 due.
      t.deepEqual(await applied(s), [["USD", "3500", "2000", "1500"]]);
      t.deepEqual(await w.state(), ["0", "0"]);
    } finally {
      await w.close();
    }
  });

  test.serial(`${store}: a grant expiring mid-period leaves the balance at that time on a clock advance; the invoice spends what is left`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const w = await wireCredits(s);
    try {
      await plan(s, 10);
      await w.grant("3000", { expiresAt: new Date(FEB_1) });
      await w.grant("2000");
      await w.use(JAN_20, "250");
      // The 3,000 grant expires before the close on Feb 15 can spend it: it is in the balance but
      // not available already: 2,000 − 2,500 = −500 (not 5,000 − 2,500 = 2,500).
      t.deepEqual(await w.state(), ["5000", "-500"]);
      await w.advance(FEB_2);
      // Feb 1: the 3,000 grant expires unspent: the balance drops, available credit stays −500.
      t.deepEqual(await w.state(), ["2000", "-500"]);
      t.deepEqual(await eventTypes(s, "credit_grant.expired"), ["credit_grant.expired"]);
      await w.advance(FEB);
      t.deepEqual(await applied(s), [["USD", "2500", "2000", "500"]]);
      t.deepEqual(await ledger(w, s.subjectId), [
        ["grant", "3000"],
        ["grant", "2000"],
        ["expiry", "-3000"],
        ["application", "-2000"],
      ]);
    } finally {
      await w.close();
    }
  });

  test.serial(`${store}: one advance across a period end and an expiry after it: the invoice spends the grant first, then the rest expires`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const w = await wireCredits(s);
    try {
      await plan(s, 10);
      await w.grant("3000", { expiresAt: new Date(FEB_20) });
      await w.use(JAN_20, "100");
      await w.advance(MAR_1);
      // Feb 15: 1,000 applied; Feb 20: the 2,000 left expires.
      t.deepEqual(await applied(s), [["USD", "1000", "1000", "0"]]);
      t.deepEqual(await ledger(w, s.subjectId), [
        ["grant", "3000"],
        ["application", "-1000"],
        ["expiry", "-2000"],
      ]);
      t.deepEqual(await w.state(), ["0", "0"]);
    } finally {
      await w.close();
    }
  });
}
