/**
 * A credit for unused time that the invoice it is booked on cannot take is carried on the
 * subscription (DESIGN §13) and is worth the same wherever it lands: booked as a credit line it
 * gives back its exclusive tax (booking taxes it at the invoice's tax, as an upgrade's old-card
 * credit line); carried, it keeps the exclusive tax paid for that time (the rest of a split one
 * its share), and is granted to the balance (ledger `proration`) with it; landing as a line on a
 * later invoice, it is taxed there instead (not twice); see carried-credit-paid-tax.test.ts. Through the real server (REST)
 * on a test clock, on MariaDB and SQLite; every figure is worked out beside it. Amounts in cents
 * (USD), tax 10% exclusive, each line's tax rounded half-up in cents.
 *
 * The set-up: 1 seat at 10,000 a month from Jan 15 (31 days), paused Jan 25 (21 of 31 days
 * unused: 10,000 × 21/31 = 6,774.19 → 6,774), a 50% forever coupon added while paused, resumed
 * Feb 1. The resume's invoice: seats 10,000 − 5,000 coupon = 5,000 (+500 tax), so it takes 5,000
 * of the 6,774 (−500 tax) and totals 0; 1,774 is carried with −177 tax (tax paid on the 6,774:
 * 1,000 × 6,774 / 10,000 = 677.4 → 677; its share on the 1,774: 677 × 1,774 / 6,774 = 177.3 → 177). Without the coupon the invoice takes all 6,774 and its −677 tax (−677.4 → −677): with
 * it, 500 + 177 = 677 comes back too.
 */
import test from "ava";
import { buyer, taxRate } from "../helpers/booking-bodies.js";
import { seats } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const UNUSED = "Seats × 1: unused time of the cycle paused at 2026-01-25T00:00:00Z (remaining 21 of 31 days)";

/** Invoices with lines, oldest first, as [subtotal (after discounts), total_discount, total_tax, total, credits applied, amount due]. */
async function invoices(s: Scenario): Promise<unknown[]> {
  return (await s.invoices())
    .filter((i) => i.line_items.length > 0)
    .map((i) => [i.subtotal.value, i.total_discount.value, i.total_tax.value, i.total_amount.value, (i.credits_applied as Json[]).map((c) => c.amount.value), i.amount_due.value]);
}

/** The credits granted for unused time (ledger entries `proration`), oldest first, as [description, amount]. */
async function proration(s: Scenario): Promise<[string, string][]> {
  const page = await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`);
  return (page.entries as Json[])
    .filter((e) => e.entry_type === "proration")
    .reverse()
    .map((e) => [e.description, e.amount.value]);
}

/** The set-up above up to the resume (`coupon`: the 50% coupon added while paused; `exempt`: a tax-exempt buyer); the subscription's ID. */
async function resumed(s: Scenario, opts: { coupon: boolean; exempt?: boolean; card?: string }): Promise<string> {
  const card = opts.card ?? (await s.card({ fixed_rates: [seats(10000)], default_tax_rate_ids: [await taxRate(s, "VAT", "10")] }));
  if (opts.exempt) await buyer(s, { tax_exempt: "exempt" });
  const half = (await s.call("POST", "/coupons", { name: "Half", percent_off: "50", duration: "forever" })).id;
  const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription;
  await s.advance("2026-01-25T00:00:00Z");
  await s.call("POST", `/subscriptions/${sub.id}/pause`, {});
  await s.advance("2026-02-01T00:00:00Z");
  if (opts.coupon) await s.call("POST", `/subscriptions/${sub.id}/discounts`, { coupon_id: half });
  await s.call("POST", `/subscriptions/${sub.id}/resume`, {});
  return sub.id;
}

/** Jan 15: 10,000 + 1,000 tax, paid. */
const OPENING = ["10000", "0", "1000", "11000", [], "11000"];
/** Feb 1 with the coupon: 10,000 − 5,000 coupon − 5,000 credit = 0; tax 500 − 500 = 0. */
const RESUME_HALF = ["0", "5000", "0", "0", [], "0"];

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a resume's credit its invoice cannot take goes to the balance with its tax: 1,774 + 177 = 1,951, the close due 3,549 as without the coupon`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    await resumed(s, { coupon: true });
    await s.advance("2026-03-01T00:00:00Z");
    // Mar 1: 10,000 − 5,000 coupon = 5,000 + 500 tax = 5,500, less the 1,951 granted: 3,549 due (before: 1,774 granted, 3,726 due: 177 of tax lost).
    t.deepEqual(await invoices(s), [OPENING, RESUME_HALF, ["5000", "5000", "500", "5500", ["1951"], "3549"]]);
    t.deepEqual(await proration(s), [[`${UNUSED}, incl. tax: USD 1.77`, "1951"]]);
  });

  test(`${store}: without the coupon the resume's invoice takes the whole credit and its tax: 10,000 − 6,774 = 3,226 + 323 tax = 3,549 (the reference)`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    await resumed(s, { coupon: false });
    // Feb 1: tax 1,000 − 677 = 323. Returned in tax: 677, the same as with the coupon (500 on the line + 177 granted).
    t.deepEqual(await invoices(s), [OPENING, ["3226", "0", "323", "3549", [], "3549"]]);
    t.deepEqual(await proration(s), []);
  });

  test(`${store}: a scheduled resume (resumes_at) carries the same: 1,951 granted at the close`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [seats(10000)], default_tax_rate_ids: [await taxRate(s, "VAT", "10")] });
    const half = (await s.call("POST", "/coupons", { name: "Half", percent_off: "50", duration: "forever" })).id;
    const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription;
    await s.advance("2026-01-25T00:00:00Z");
    await s.call("POST", `/subscriptions/${sub.id}/pause`, { resumes_at: "2026-02-01T00:00:00Z" });
    await s.advance("2026-01-31T00:00:00Z");
    await s.call("POST", `/subscriptions/${sub.id}/discounts`, { coupon_id: half });
    await s.advance("2026-03-01T00:00:00Z");
    t.deepEqual(await invoices(s), [OPENING, RESUME_HALF, ["5000", "5000", "500", "5500", ["1951"], "3549"]]);
    t.deepEqual(await proration(s), [[`${UNUSED}, incl. tax: USD 1.77`, "1951"]]);
  });

  test(`${store}: part of the carried credit lands on an upgrade's invoice, taxed there once (−250, −25); the rest goes to the balance with its tax there: 1,524 + 152 = 1,676`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const vat = await taxRate(s, "VAT", "10");
    const a = await s.card({ name: "A", fixed_rates: [seats(10000)], default_tax_rate_ids: [vat] });
    const b = await s.card({ name: "B", fixed_rates: [seats(12000)], default_tax_rate_ids: [vat] });
    const id = await resumed(s, { coupon: true, card: a });
    await s.advance("2026-02-22T00:00:00Z");
    await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: b, behavior: "prorate" });
    await s.advance("2026-03-01T00:00:00Z");
    t.deepEqual(await invoices(s), [
      OPENING,
      RESUME_HALF,
      // Feb 22 (7 of 28 days left, 25%): A's credit −2,500 net of the coupon's half = −1,250 (−125 tax); B 3,000 − 1,500 coupon = 1,500 (+150 tax);
      // room 1,500 − 1,250 = 250 of the 1,774 carried (−25 tax, booked here): subtotal 0, tax −125 + 150 − 25 = 0. 1,524 carried on with its share of the −177: −177 × 1,524 / 1,774 = −152.06 → −152.
      ["0", "1500", "0", "0", [], "0"],
      // Mar 1: B 12,000 − 6,000 coupon = 6,000 + 600 tax = 6,600, less 1,524 + 152 = 1,676: 4,924 due (before: 1,524 granted, 5,076 due).
      ["6000", "6000", "600", "6600", ["1676"], "4924"],
    ]);
    // Tax given back on the 6,774: 500 (resume) + 25 (upgrade) + 152 (granted) = 677, as if the resume had taken it all.
    t.deepEqual(await proration(s), [[`${UNUSED}, incl. tax: USD 1.52`, "1676"]]);
  });

  test(`${store}: cancelled now after the resume: the final invoice (usage only, a draft) takes nothing, the 1,774 goes to the balance with its 177 tax`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const id = await resumed(s, { coupon: true });
    await s.advance("2026-02-10T00:00:00Z");
    t.is((await s.call("POST", `/subscriptions/${id}/cancel`, {})).status, "cancelled");
    t.deepEqual(await proration(s), [[`${UNUSED}, incl. tax: USD 1.77`, "1951"]]);
  });

  test(`${store}: a tax-exempt buyer pays no tax and gets none back: 1,774 granted as it is`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    await resumed(s, { coupon: true, exempt: true });
    await s.advance("2026-03-01T00:00:00Z");
    // Jan 15: 10,000; Feb 1: 10,000 − 5,000 − 5,000 = 0; Mar 1: 5,000 − 1,774 = 3,226.
    t.deepEqual(await invoices(s), [
      ["10000", "0", "0", "10000", [], "10000"],
      ["0", "5000", "0", "0", [], "0"],
      ["5000", "5000", "0", "5000", ["1774"], "3226"],
    ]);
    t.deepEqual(await proration(s), [[UNUSED, "1774"]]);
  });
}
