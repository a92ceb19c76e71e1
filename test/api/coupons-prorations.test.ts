/**
 * Coupons against seat changes and late-finalized invoices (DESIGN §13, §15), golden cases through the REST API on
 * test clocks, on MariaDB and SQLite. Amounts in USD cents; every figure is worked out beside it.
 * - A seat decrease's credit for unused time passes through the subscription's discounts as the
 *   increase's charge did: an increase then the same decrease nets to zero (it credited the list
 *   price, so each round trip farmed the coupon's share).
 * - A decrease's credit is valued at what the period's paid invoices took for the rate net of their
 *   discounts (unused × (1 − discounts / billed), rounded once): not the coupons that apply now.
 * - A subject's "repeating" discount discounts each invoice by that invoice's own date: one dated
 *   before the end is discounted even when one dated after it was booked first (the later one
 *   marked the discount ended, and the earlier lost it).
 */
import test from "ava";
import { coupon, discounted, plan, subscribe } from "../helpers/coupon-bodies.js";
import { seats } from "../helpers/catalog-bodies.js";
import { flat, usageRate } from "../helpers/price-bodies.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const ledger = async (s: Scenario): Promise<[string, string, string][]> =>
  ((await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`)).entries as Json[]).map((e) => [e.entry_type, e.amount.value, e.description]);

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a seat decrease's credit is discounted as the increase's charge was: up then down nets to zero`, async (t) => {
    // June 1 → July 1 is 30 days; June 16 leaves 15 of them.
    const s = await Scenario.start(server, "2026-06-01T00:00:00Z");
    const card = await s.card({ fixed_rates: [seats(10000)] });
    const half = await coupon(s, { name: "Half off", percent_off: "50", duration: "forever" });
    const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 }, coupon_id: half.id })).subscription.id;
    await s.advance("2026-06-16T00:00:00Z");
    const up = await s.call("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { seats: 2 } });
    // (2 − 1) × 10000 × 15/30 = +5000; 50% of it = 2500 off; 2500 charged.
    t.deepEqual([up.proration_invoice.status, up.proration_invoice.total_discount.value, up.proration_invoice.total_amount.value], ["paid", "2500", "2500"]);
    const down = await s.call("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { seats: 1 } });
    t.is(down.proration_invoice, null);
    // (1 − 2) × 10000 × 15/30 = −5000, valued at what the period's invoices took for seats: they billed
    // 10000 + 5000 with 5000 + 2500 off, a fraction of 0.5: 5000 × (1 − 0.5) = 2500 credited, not 5000.
    t.deepEqual(await ledger(s), [["proration", "2500", "Seats: 2 → 1 (remaining 15 of 30 days), less the period's discounts on it: USD 25.00"]]);
    await s.advance("2026-07-01T00:00:00Z");
    t.deepEqual(
      (await s.invoices()).map((i) => [i.total_amount.value, i.total_discount.value, (i.credits_applied as Json[]).map((c) => c.amount.value), i.amount_due.value]),
      [
        ["5000", "5000", [], "5000"], // Jun 1: 1 × 10000 − 50%
        ["2500", "2500", [], "2500"], // the increase: 5000 − 50%
        ["5000", "5000", ["2500"], "2500"], // Jul 1: 1 × 10000 − 50% = 5000, less the 2500 credited
      ],
    );
    // Net of the round trip: paid 2500, credited 2500 = 0.
  });

  test(`${store}: a subject's repeating discount discounts each invoice by its own date, whichever is booked first`, async (t) => {
    // Drafts stay 3 days (the grace period), so B's Jun 1 invoice is final on Jun 4, after A's Jun 20
    // one closed in the same run (cycles close first, then due drafts finalize): on the old code A's
    // marked the discount ended and B's, dated before the end, lost it.
    const s = await Scenario.start(server, "2026-05-01T00:00:00Z", { invoiceGraceSeconds: 3 * 86400 });
    const metric = await s.metric();
    const base = { code: "base", name: "Base", price: { price_type: "flat", amount: { currency_code: "USD", value: "1000" } } };
    const metered = await s.card({ fixed_rates: [base], usage_based_rates: [usageRate(metric, flat(10))] }); // 1000 a month in advance + 10 a call
    const fixed = await plan(s); // base 1000 a month in advance
    const b = (await s.subscribe({ rate_card_id: metered, fixed_rate_quantities: { base: 1 } })).subscription.id; // B: anchored May 1
    await s.events([["2026-05-05T00:00:00Z", "5"]]); // 5 calls in May: 5 × 10 = 50
    await s.advance("2026-05-10T00:00:00Z");
    const month = await coupon(s, { name: "20% for a month", percent_off: "20", duration: "repeating", duration_in_months: 1 });
    const d = await s.call("POST", `/subjects/${s.subjectId}/discounts`, { coupon_id: month.id });
    t.deepEqual([d.start, d.end], ["2026-05-10T00:00:00Z", "2026-06-10T00:00:00Z"]); // May 10 + 1 month
    await s.advance("2026-05-20T00:00:00Z");
    const a = await subscribe(s, fixed); // A: anchored May 20 (the card is on file: at once)
    // One step: B's Jun 1 cycle and A's Jun 20 one close; B's draft is due Jun 4.
    await s.advance("2026-06-21T00:00:00Z");
    const rows = (await s.invoices()).map((i: Json) => [i.subscription_id === b ? "B" : i.subscription_id === a ? "A" : "?", i.period_start, i.status, i.total_amount.value, i.total_discount.value]);
    t.deepEqual(
      rows.sort((x, y) => (x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0)),
      [
        ["B", "2026-05-01T00:00:00Z", "paid", "1000", "0"], // before the coupon: 1000
        ["A", "2026-05-20T00:00:00Z", "paid", "800", "200"], // May 20 < Jun 10: 1000 − 20% (200)
        ["B", "2026-06-01T00:00:00Z", "paid", "840", "210"], // final Jun 4 < Jun 10: (1000 + 50) − 20% (210)
        ["A", "2026-06-20T00:00:00Z", "paid", "1000", "0"], // Jun 20 ≥ Jun 10: not discounted
      ],
    );
  });

  /** A subscription on April 1 (30 days to May 1) of `card` with `quantities`, and `coupon_id` if given; its ID. */
  const april = async (quantities: Json, rates: Json[], couponBody?: Json) => {
    const s = await Scenario.start(server, "2026-04-01T00:00:00Z");
    const card = await s.card({ fixed_rates: rates });
    const c = couponBody ? await coupon(s, couponBody) : undefined;
    const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: quantities, ...(c ? { coupon_id: c.id } : {}) })).subscription.id as string;
    return { s, id };
  };
  const amounts = async (s: Scenario) => (await ledger(s)).filter((e) => e[0] === "proration").map((e) => e[1]);
  const ten = { name: "Ten off", amount_off: { currency_code: "USD", value: "1000" }, duration: "forever" };

  test(`${store}: an amount_off coupon's share of the period is what the credit leaves out, step by step or at once`, async (t) => {
    // 3 seats × 10000 = 30000 less 1000 = 29000 paid on Apr 1: the coupon took 1000/30000 = 1/30 of seats.
    const a = await april({ seats: 3 }, [seats(10000)], ten);
    t.deepEqual((await discounted(a.s))[0], ["29000", "1000", [["Ten off", "1000"]]]);
    await a.s.advance("2026-04-16T00:00:00Z"); // 15 of 30 days left
    t.is((await a.s.call("PATCH", `/subscriptions/${a.id}`, { fixed_rate_quantities: { seats: 2 } })).proration_invoice, null);
    t.is((await a.s.call("PATCH", `/subscriptions/${a.id}`, { fixed_rate_quantities: { seats: 1 } })).proration_invoice, null);
    // Each step: 10000 × 15/30 = 5000 × (1 − 1/30) = 4833.33 → 4833 (the coupon's 1000 is not taken off each credit:
    // the old rule credited 5000 − 1000 = 4000 twice, 8000, against 10000 − 1000 = 9000 at once).
    t.deepEqual(await amounts(a.s), ["4833", "4833"]);
    const b = await april({ seats: 3 }, [seats(10000)], ten);
    await b.s.advance("2026-04-16T00:00:00Z");
    await b.s.call("PATCH", `/subscriptions/${b.id}`, { fixed_rate_quantities: { seats: 1 } });
    // At once: 20000 × 15/30 = 10000 × 29/30 = 9666.67 → 9667. Two steps round twice: 4833 + 4833 = 9666, a cent apart.
    t.deepEqual(await amounts(b.s), ["9667"]);
  });

  test(`${store}: a 100% once coupon made the period free, so a decrease credits nothing`, async (t) => {
    const { s, id } = await april({ seats: 10 }, [seats(10000)], { name: "First month free", percent_off: "100", duration: "once" });
    t.deepEqual((await discounted(s))[0], ["0", "100000", [["First month free", "100000"]]]); // 10 × 10000, all off
    await s.advance("2026-04-16T00:00:00Z");
    t.is((await s.call("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { seats: 1 } })).proration_invoice, null);
    // 9 × 10000 × 15/30 = 45000 × (1 − 100000/100000) = 0 (the old rule skipped "once" coupons: 45000 credited).
    t.deepEqual(await amounts(s), []);
  });

  test(`${store}: a coupon added after the period was paid at list takes nothing of the credit`, async (t) => {
    const { s, id } = await april({ seats: 2 }, [seats(10000)]);
    t.deepEqual((await discounted(s))[0], ["20000", "0", []]); // paid at list
    await s.advance("2026-04-10T00:00:00Z");
    const half = await coupon(s, { name: "Half off", percent_off: "50", duration: "forever" });
    await s.call("POST", `/subscriptions/${id}/discounts`, { coupon_id: half.id });
    await s.advance("2026-04-16T00:00:00Z");
    await s.call("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { seats: 1 } });
    // 10000 × 15/30 = 5000 × (1 − 0/20000) = 5000 (the old rule took today's 50%: 2500).
    t.deepEqual(await amounts(s), ["5000"]);
  });

  test(`${store}: a change that raises one rate and lowers a fully discounted one charges the raise`, async (t) => {
    const x = seats(6000, "x", "X");
    const y = seats(10000, "y", "Y");
    const { s, id } = await april({ x: 1, y: 2 }, [x, y], { name: "Y free", percent_off: "100", duration: "forever", applies_to_rate_codes: ["y"] });
    t.deepEqual((await discounted(s))[0], ["6000", "20000", [["Y free", "20000"]]]); // 6000 + 20000 − 20000 on y
    await s.advance("2026-04-16T00:00:00Z");
    const r = await s.call("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { x: 2, y: 1 } });
    // X: +6000 × 15/30 = +3000; Y: −10000 × 15/30 = −5000, valued × (1 − 20000/20000) = 0. Net +3000: invoiced,
    // the coupon (on y only) takes nothing of it. The old rule netted −2000 at list (no invoice), then dropped X's +3000.
    t.truthy(r.proration_invoice);
    t.deepEqual([r.proration_invoice.status, r.proration_invoice.total_discount.value, r.proration_invoice.total_amount.value], ["paid", "0", "3000"]);
    t.deepEqual(await amounts(s), []);
  });
}
