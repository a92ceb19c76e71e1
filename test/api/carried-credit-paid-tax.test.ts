/**
 * A paused cycle's unused time that the resume's invoice cannot take is carried on the
 * subscription with the exclusive tax PAID for that time (the paused cycle's paid invoices' tax
 * on it, as a seat decrease's: tax × part / net; none when paid exempt or with the tax inside the
 * price), never worked out again from the invoice it is carried from or the buyer's tax status at
 * the time; a re-carry keeps it (a split one's rest its share). Through the real server (REST) on
 * a test clock, on MariaDB and SQLite; amounts in cents (USD), each figure worked out beside it.
 *
 * The set-up: 1 seat at 10,000 a month from Jan 15 (31 days), paused Jan 25 (21 of 31 days
 * unused: 10,000 × 21/31 = 6,774.19 → 6,774), a 50% forever coupon added while paused, resumed
 * Feb 1: the resume's invoice is 10,000 − 5,000 coupon = 5,000, so it takes 5,000 of the 6,774 and
 * 1,774 is carried. With 10% exclusive tax paid (11,000) it carries −677 × 1,774 / 6,774 = −177.3
 * → −177 and is granted 1,951 (carried-credit-tax.test.ts); paid without exclusive tax, 1,774.
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

/** Subscribes 1 seat on `card` Jan 15 and pauses Jan 25 (`jan16`: run on Jan 16 before); on Feb 1 runs `feb1` (while paused), adds the 50% coupon and resumes; the subscription's ID. */
async function resumed(s: Scenario, card: string, hooks: { jan16?: (id: string) => Promise<unknown>; feb1?: () => Promise<unknown> } = {}): Promise<string> {
  const half = (await s.call("POST", "/coupons", { name: "Half", percent_off: "50", duration: "forever" })).id;
  const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription;
  if (hooks.jan16) {
    await s.advance("2026-01-16T00:00:00Z");
    await hooks.jan16(sub.id);
  }
  await s.advance("2026-01-25T00:00:00Z");
  await s.call("POST", `/subscriptions/${sub.id}/pause`, {});
  await s.advance("2026-02-01T00:00:00Z");
  await hooks.feb1?.();
  await s.call("POST", `/subscriptions/${sub.id}/discounts`, { coupon_id: half });
  await s.call("POST", `/subscriptions/${sub.id}/resume`, {});
  return sub.id;
}

/** Jan 15 exempt: 10,000, no tax. */
const OPENING_EXEMPT = ["10000", "0", "0", "10000", [], "10000"];
/** Feb 1: 10,000 − 5,000 coupon − 5,000 of the credit = 0 (with 10% paid and charged, 500 − 500 = 0). */
const RESUME_HALF = ["0", "5000", "0", "0", [], "0"];
/**
 * Feb 1, the credit paid without exclusive tax, the charge taxed at 10%: 500 on the 5,000 charged,
 * none given back with the 5,000 of the credit (credit-line-paid-tax.test.ts): total 500.
 */
const RESUME_HALF_TAXED = ["0", "5000", "500", "500", [], "500"];
/** Mar 1 on a 10% exclusive card: 10,000 − 5,000 coupon = 5,000 + 500 tax = 5,500, less the 1,774 granted: 3,726 due. */
const CLOSE_1774 = ["5000", "5000", "500", "5500", ["1774"], "3726"];

/** A second pause on Feb 10 (its invoice has no lines: the whole 1,774 carried on again), then cancelled Feb 12: granted then. */
async function recarried(s: Scenario, id: string): Promise<void> {
  await s.advance("2026-02-10T00:00:00Z");
  await s.call("POST", `/subscriptions/${id}/pause`, {});
  await s.advance("2026-02-12T00:00:00Z");
  await s.call("POST", `/subscriptions/${id}/cancel`, {});
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: paid exempt, taxable by a re-carry: the 1,774 is granted without tax (before: the re-carry gave it −177 never paid, 1,951)`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [seats(10000)], default_tax_rate_ids: [await taxRate(s, "VAT", "10")] });
    await buyer(s, { tax_exempt: "exempt" });
    const id = await resumed(s, card);
    await buyer(s, { tax_exempt: "none" });
    await recarried(s, id);
    t.deepEqual(await invoices(s), [OPENING_EXEMPT, RESUME_HALF]);
    // Tax paid on the 6,774: none. Carried with 0 at the resume, kept at the pause.
    t.deepEqual(await proration(s), [[UNUSED, "1774"]]);
  });

  test(`${store}: paid with 10% tax, exempt by a re-carry: the 1,774 keeps the 177 paid for it, 1,951 (before: the re-carry dropped it, 1,774)`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [seats(10000)], default_tax_rate_ids: [await taxRate(s, "VAT", "10")] });
    const id = await resumed(s, card);
    await buyer(s, { tax_exempt: "exempt" });
    await recarried(s, id);
    // Jan 15: 10,000 + 1,000 tax paid. Tax paid on the 6,774: 1,000 × 6,774 / 10,000 = 677.4 → 677; on the 1,774 carried: 677 × 1,774 / 6,774 = 177.3 → 177.
    t.deepEqual(await invoices(s), [["10000", "0", "1000", "11000", [], "11000"], RESUME_HALF]);
    t.deepEqual(await proration(s), [[`${UNUSED}, incl. tax: USD 1.77`, "1951"]]);
  });

  test(`${store}: paid on a card with 10% inclusive tax, resumed on one with 10% exclusive: the 1,774 holds its tax already, granted 1,774, close 3,726 due (before: 1,951, 3,549)`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const a = await s.card({ name: "A", fixed_rates: [seats(10000)], default_tax_rate_ids: [await taxRate(s, "VAT incl.", "10", { inclusive: true })] });
    const b = await s.card({ name: "B", fixed_rates: [seats(10000)], default_tax_rate_ids: [await taxRate(s, "VAT", "10")] });
    // Jan 16: to B charging nothing (behavior none): the cycle stays paid on A, where the unused time is priced.
    await resumed(s, a, { jan16: (id) => s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: b, behavior: "none" }) });
    await s.advance("2026-03-01T00:00:00Z");
    // Jan 15: 10,000 with 909 of tax inside (10,000 − 10,000 / 1.1 = 909.09), no exclusive tax: none to give back on top of the 6,774.
    // Feb 1: the 5,000 of it on the invoice gives back the tax inside it as paid: 909 × 6,774 / 10,000 = 615.76 → 616 on the 6,774,
    // 616 × 1,774 / 6,774 = 161.3 → 161 carried, 455 on the line; total tax 500 − 455 = 45, total 0 + 500 exclusive = 500.
    const resume = ["0", "5000", "45", "500", [], "500"];
    t.deepEqual(await invoices(s), [["10000", "0", "909", "10000", [], "10000"], resume, CLOSE_1774]);
    t.deepEqual(await proration(s), [[UNUSED, "1774"]]);
  });

  test(`${store}: paid exempt, taxable by the resume: granted 1,774, close 3,726 due (before: 1,951, 3,549)`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [seats(10000)], default_tax_rate_ids: [await taxRate(s, "VAT", "10")] });
    await buyer(s, { tax_exempt: "exempt" });
    await resumed(s, card, { feb1: () => buyer(s, { tax_exempt: "none" }) });
    await s.advance("2026-03-01T00:00:00Z");
    t.deepEqual(await invoices(s), [OPENING_EXEMPT, RESUME_HALF_TAXED, CLOSE_1774]);
    t.deepEqual(await proration(s), [[UNUSED, "1774"]]);
  });

  test(`${store}: paid on an untaxed card, the rest carried past an upgrade to a 20% card: 1,524 granted without tax`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const a = await s.card({ name: "A", fixed_rates: [seats(10000)], default_tax_rate_ids: [] });
    const b = await s.card({ name: "B", fixed_rates: [seats(12000)], default_tax_rate_ids: [await taxRate(s, "VAT", "20")] });
    const id = await resumed(s, a);
    await s.advance("2026-02-22T00:00:00Z");
    await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: b, behavior: "prorate" });
    await s.advance("2026-03-01T00:00:00Z");
    t.deepEqual(await invoices(s), [
      OPENING_EXEMPT,
      RESUME_HALF,
      // Feb 22 (7 of 28 days left): A's −2,500 net of the coupon −1,250; B 3,000 − 1,500 coupon = 1,500 + 300 tax; 250 of the 1,774 lands: subtotal 0, total 300.
      ["0", "1500", "300", "300", [], "300"],
      // Mar 1: 12,000 − 6,000 = 6,000 + 1,200 tax = 7,200, less the 1,524 carried on (0 × 1,524 / 1,774 = 0 of tax): 5,676 due.
      ["6000", "6000", "1200", "7200", ["1524"], "5676"],
    ]);
    t.deepEqual(await proration(s), [[UNUSED, "1524"]]);
  });
}
