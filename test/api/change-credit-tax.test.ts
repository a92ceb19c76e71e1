/**
 * A credit to the balance for a mid-cycle change is what the customer paid (or will pay) for the
 * part credited: net of discounts plus the exclusive tax on it (DESIGN §13, §15). A seat decrease
 * gives back the tax booked on the time it gives back (not the tax the buyer's status at the
 * change would charge), never more than was paid. A raised usage multiplier credits nothing to
 * the balance: the usage before it, which the close bills at the new terms, is taken off on the
 * close's invoice as a negative adjustment line of its rate (old − new before discounts and tax),
 * so the close's own discounts and taxes book it as they book that usage, whatever they are then
 * (a "once" coupon the close spends, a "repeating" one that ended, an amount off larger than the
 * usage, the buyer's tax status at the close). An inclusive tax is inside the amount. A minimum
 * commitment is on charges before discounts and tax and counts the line as the period's usage.
 * Through the real server (REST) on a test clock, on MariaDB and SQLite; every figure is worked
 * out beside it. Amounts in cents (USD).
 */
import test from "ava";
import { amountOff, buyer, coupon, discount, percentOff, taxRate } from "../helpers/booking-bodies.js";
import { seats } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { flat, money, patch, usageRate } from "../helpers/price-bodies.js";
import { CARD_FAILS_LATER, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const FEB = "2026-02-01T00:00:00Z";
const FEB_10 = "2026-02-10T00:00:00Z";
/** Feb 15 00:00 leaves 14 of February's 28 days: half the period. */
const FEB_15 = "2026-02-15T00:00:00Z";
const MAR = "2026-03-01T00:00:00Z";
const JAN = "2026-01-01T00:00:00Z";
const JAN_30 = "2026-01-30T00:00:00Z";

/** The credits granted by changes (ledger entries `proration`), oldest first, as [description, amount]. */
async function proration(s: Scenario): Promise<[string, string][]> {
  const page = await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`);
  return (page.entries as Json[])
    .filter((e) => e.entry_type === "proration")
    .reverse()
    .map((e) => [e.description, e.amount.value]);
}

/** Invoices, oldest first, as [subtotal, total_tax, total, credits applied, amount due]. */
async function invoices(s: Scenario): Promise<unknown[]> {
  return (await s.invoices()).map((i) => [i.subtotal.value, i.total_tax.value, i.total_amount.value, (i.credits_applied as Json[]).map((c) => c.amount.value), i.amount_due.value]);
}

/** Invoices, oldest first, as [subtotal (after discounts), total_discount, total_tax, total, credits applied, amount due]. */
async function discounted(s: Scenario): Promise<unknown[]> {
  return (await s.invoices()).map((i) => [
    i.subtotal.value,
    i.total_discount.value,
    i.total_tax.value,
    i.total_amount.value,
    (i.credits_applied as Json[]).map((c) => c.amount.value),
    i.amount_due.value,
  ]);
}

/**
 * 2 seats at 1,000 a month from Feb 1 with tax rate `vat` (a card on file), down to 1 seat on Feb 15, renewed on Mar 1;
 * `taxStatus`: the buyer's tax_exempt when subscribing and from Feb 10 on.
 */
async function seatDecrease(s: Scenario, vat: string, taxStatus?: [string, string]): Promise<{ patched: Json; credits: [string, string][]; invoices: unknown[] }> {
  const card = await s.card({ fixed_rates: [seats(1000)], default_tax_rate_ids: [vat] });
  if (taxStatus) await buyer(s, { tax_exempt: taxStatus[0] });
  const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 2 } })).subscription.id;
  if (taxStatus) {
    await s.advance(FEB_10);
    await buyer(s, { tax_exempt: taxStatus[1] });
  }
  await s.advance(FEB_15);
  const r = await patch(s, id, { fixed_rate_quantities: { seats: 1 } });
  await s.advance(MAR);
  return { patched: r.proration_invoice, credits: await proration(s), invoices: await invoices(s) };
}

/** A card with seats at 1,000 and API calls at 2 a unit (tax rate `vat`), 1 seat from Jan 1 (and `extra`); its subscription's ID. */
async function usagePlan(s: Scenario, vat: string, extra: Json = {}): Promise<string> {
  const api = await s.metric();
  const card = await s.card({ fixed_rates: [seats(1000)], usage_based_rates: [usageRate(api, flat(2))], default_tax_rate_ids: [vat] });
  return (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 }, ...extra })).subscription.id;
}

/** 10,000 units on Jan 20, the api multiplier raised 1 → 3 on Jan 30, 1,000 units on Jan 31, closed on Feb 1. */
async function raised(s: Scenario, id: string): Promise<void> {
  await s.events([["2026-01-20T00:00:00Z", "10000"]]);
  await s.advance(JAN_30);
  await patch(s, id, { rate_price_multipliers: { api: "3" } });
  await s.events([["2026-01-31T00:00:00Z", "1000"]]);
  await s.advance(FEB);
}

const RAISED = "API calls: usage before the change (multiplier 1 → 3) at the old terms (2026-01-01T00:00:00Z to 2026-01-30T00:00:00Z)";

/** The close's (last invoice's) lines as [description, amount, discounts, exclusive tax]. */
async function closeLines(s: Scenario): Promise<unknown[]> {
  const close = (await s.invoices()).at(-1) as Json;
  const sum = (xs: Json[]) => xs.reduce((a, x) => a + Number(x.amount.value ?? x.amount), 0);
  return (close.line_items as Json[]).map((l) => [l.description, l.amount.value, sum(l.discount_amounts ?? []), sum((l.tax_amounts ?? []).filter((x: Json) => !x.inclusive))]);
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a seat decrease with 20% exclusive tax credits the unused time plus its tax`, async (t) => {
    const s = await Scenario.start(server, FEB);
    const got = await seatDecrease(s, await taxRate(s, "VAT", "20"));
    t.deepEqual(got, {
      patched: null,
      // Feb 15: 1 seat × 1,000 × 14/28 = 500 unused, which cost 500 + 20% = 100 of VAT: 600 credited
      // (the old code: 500, the 100 of VAT paid on Feb 1 lost).
      credits: [["Seats: 2 → 1 (remaining 14 of 28 days), incl. tax: USD 1.00", "600"]],
      invoices: [
        // Feb 1: 2 × 1,000 = 2,000 + 400 VAT = 2,400, paid.
        ["2000", "400", "2400", [], "2400"],
        // Mar 1: 1,000 + 200 VAT = 1,200, less the 600 credit: 600 due (the old code: 700).
        ["1000", "200", "1200", ["600"], "600"],
      ],
    });
  });

  test(`${store}: a seat decrease with 20% inclusive tax credits the unused time as it was (the tax is inside it)`, async (t) => {
    const s = await Scenario.start(server, FEB);
    const got = await seatDecrease(s, await taxRate(s, "VAT incl.", "20", { inclusive: true }));
    t.deepEqual(got, {
      patched: null,
      // Feb 15: 1,000 × 14/28 = 500 unused, its tax (83) inside it: 500 credited, as before.
      credits: [["Seats: 2 → 1 (remaining 14 of 28 days)", "500"]],
      invoices: [
        // Feb 1: 2,000, of which 2,000 × 20/120 = 333 VAT; Mar 1: 1,000 (167 VAT) less the 500 credit: 500 due.
        ["2000", "333", "2000", [], "2000"],
        ["1000", "167", "1000", ["500"], "500"],
      ],
    });
  });

  test(`${store}: a raised usage multiplier with 20% exclusive tax takes the difference off the close, taxed as the close taxes it`, async (t) => {
    const s = await Scenario.start(server, JAN);
    await raised(s, await usagePlan(s, await taxRate(s, "VAT", "20")));
    t.deepEqual(
      [await proration(s), await invoices(s), await closeLines(s)],
      [
        // Jan 30: nothing to the balance (the old code granted 40,000 + 8,000 VAT = 48,000).
        [],
        [
          // Jan 1: 1 seat 1,000 + 200 VAT.
          ["1000", "200", "1200", [], "1200"],
          // Feb 1: seat 1,000 + API calls 11,000 × 2 × 3 = 66,000 − 40,000 (10,000 × 2 × (3 − 1)) = 27,000 + 5,400 VAT = 32,400.
          // API calls in all: 26,000 + 5,200 = 20,000 + 4,000 (before, ×1) + 6,000 + 1,200 (after, ×3).
          ["27000", "5400", "32400", [], "32400"],
        ],
        [
          ["Seats", "1000", 0, 200],
          ["API calls", "66000", 0, 13200],
          [RAISED, "-40000", 0, -8000],
        ],
      ],
    );
  });

  test(`${store}: a raised usage multiplier with 20% inclusive tax takes the difference off the close, its tax inside`, async (t) => {
    const s = await Scenario.start(server, JAN);
    await raised(s, await usagePlan(s, await taxRate(s, "VAT incl.", "20", { inclusive: true })));
    // Feb 1: 67,000 − 40,000 = 27,000 (4,500 VAT inside: 167 + 11,000 − 6,667), nothing granted (the old code: 40,000).
    t.deepEqual(await proration(s), []);
    t.deepEqual((await invoices(s)).at(-1), ["27000", "4500", "27000", [], "27000"]);
  });

  test(`${store}: a minimum commitment counts a raised multiplier's adjustment before tax (the commitment is on charges before tax)`, async (t) => {
    const s = await Scenario.start(server, JAN);
    await raised(s, await usagePlan(s, await taxRate(s, "VAT", "20"), { minimum_commitment: money(100000) }));
    const close = (await s.invoices()).at(-1) as Json;
    const trueUp = (close.line_items as Json[]).filter((l) => l.kind === "commitment_true_up").map((l) => l.amount.value);
    // January's charges before tax: seat 1,000 + 66,000 − 40,000 at the close = 27,000: true-up 100,000 − 27,000 = 73,000.
    // Feb 1: 1,000 + 66,000 − 40,000 + 73,000 = 100,000 + 20,000 VAT = 120,000 due, as before (120,000 after a 48,000 credit).
    t.deepEqual([trueUp, await proration(s), (await invoices(s)).at(-1)], [["73000"], [], ["100000", "20000", "120000", [], "120000"]]);
  });

  test(`${store}: a seat decrease gives back the tax paid on the time, not the tax of the buyer's status at the change`, async (t) => {
    // Exempt when Feb 1 was paid (2,000, no tax), taxable from Feb 10: the unused 500 gives back no tax
    // (the old code: 600, 100 of VAT never paid). Mar 1: 1,000 + 200 VAT = 1,200, less 500: 700 due.
    const exempt = await Scenario.start(server, FEB);
    t.deepEqual(await seatDecrease(exempt, await taxRate(exempt, "VAT", "20"), ["exempt", "none"]), {
      patched: null,
      credits: [["Seats: 2 → 1 (remaining 14 of 28 days)", "500"]],
      invoices: [
        ["2000", "0", "2000", [], "2000"],
        ["1000", "200", "1200", ["500"], "700"],
      ],
    });
    // Taxed when Feb 1 was paid (2,000 + 400), reverse charge from Feb 10: the 100 of VAT paid on the unused 500
    // comes back, 600 (the old code: 500). Mar 1: 1,000, no tax, less 600: 400 due.
    const reverse = await Scenario.start(server, FEB);
    t.deepEqual(await seatDecrease(reverse, await taxRate(reverse, "VAT", "20"), ["none", "reverse"]), {
      patched: null,
      credits: [["Seats: 2 → 1 (remaining 14 of 28 days), incl. tax: USD 1.00", "600"]],
      invoices: [
        ["2000", "400", "2400", [], "2400"],
        ["1000", "0", "1000", ["600"], "400"],
      ],
    });
  });

  test(`${store}: one-seat decreases give back no more tax than was paid`, async (t) => {
    const s = await Scenario.start(server, FEB);
    const vat = await taxRate(s, "VAT", "20");
    const card = await s.card({ fixed_rates: [seats(3)], default_tax_rate_ids: [vat] });
    const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 10 } })).subscription.id;
    // Feb 1: 10 seats at 3 = 30 + 6 VAT = 36, paid; then 10 → 9 → … → 0 at once (the whole period left).
    for (let n = 9; n >= 0; n--) await patch(s, id, { fixed_rate_quantities: { seats: n } });
    // In the order of the decreases (the ledger lists entries of one instant in any order).
    const from = (d: string) => Number(/Seats: (\d+)/.exec(d)?.[1]);
    const credits = (await proration(s)).sort(([a], [b]) => from(b) - from(a));
    // Each gives back 3 and 6 × 3/30 = 0.6 of VAT, rounded to 1, until the 6 paid are given back: 6 × 4 + 4 × 3 = 36,
    // what was paid (the old code: 10 × 4 = 40, 10 of VAT for 6 paid).
    const tax = ", incl. tax: USD 0.01";
    t.deepEqual(
      credits,
      [10, 9, 8, 7, 6, 5, 4, 3, 2, 1].map((n) => [`Seats: ${n} → ${n - 1} (remaining 28 of 28 days)${n > 4 ? tax : ""}`, n > 4 ? "4" : "3"]),
    );
    t.is(
      credits.reduce((sum, [, amount]) => sum + Number(amount), 0),
      36,
    );
    t.deepEqual((await discounted(s))[0], ["30", "0", "6", "36", [], "36"]);
  });

  test(`${store}: a seat decrease gives back the tax of the seats it takes off, the last added first: none on seats added exempt`, async (t) => {
    const s = await Scenario.start(server, FEB);
    const card = await s.card({ fixed_rates: [seats(1000)], default_tax_rate_ids: [await taxRate(s, "VAT", "20")] });
    const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 2 } })).subscription.id;
    await s.advance(FEB_10);
    await buyer(s, { tax_exempt: "exempt" });
    await s.advance(FEB_15);
    const up = await patch(s, id, { fixed_rate_quantities: { seats: 12 } });
    await patch(s, id, { fixed_rate_quantities: { seats: 2 } });
    t.deepEqual(
      [[up.proration_invoice.status, up.proration_invoice.total_tax.value], await proration(s), await invoices(s)],
      [
        // Feb 15, exempt: 10 seats × 1,000 × 14/28 = 5,000, no tax, paid.
        ["paid", "0"],
        // 12 → 2 takes off the 10 seats just added (5,000, which paid no tax): 5,000 (the old code: 5,286, "incl. tax:
        // USD 2.86", 400 × 5,000 / 7,000 of the VAT paid on Feb 1 for the 2 seats still in use).
        [["Seats: 12 → 2 (remaining 14 of 28 days)", "5000"]],
        [
          ["2000", "400", "2400", [], "2400"],
          ["5000", "0", "5000", [], "5000"],
        ],
      ],
    );
  });

  test(`${store}: a seat decrease gives back the tax still asked for on the seats it takes off when their invoice is open`, async (t) => {
    const s = await Scenario.start(server, FEB);
    const card = await s.card({ fixed_rates: [seats(1000)], default_tax_rate_ids: [await taxRate(s, "VAT", "20")] });
    const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 2 } })).subscription.id;
    await s.saveCardInPortal(CARD_FAILS_LATER);
    await s.advance(FEB_15);
    const up = await patch(s, id, { fixed_rate_quantities: { seats: 4 } });
    await patch(s, id, { fixed_rate_quantities: { seats: 2 } });
    await patch(s, id, { fixed_rate_quantities: { seats: 0 } });
    const from = (d: string) => Number(/Seats: (\d+)/.exec(d)?.[1]);
    t.deepEqual(
      [[up.proration_invoice.status, up.proration_invoice.total_amount.value], (await proration(s)).sort(([a], [b]) => from(b) - from(a)), await invoices(s)],
      [
        // Feb 15: 2 → 4, 2 × 1,000 × 14/28 = 1,000 + 200 VAT, its charge declined: open, 1,200 still owed.
        ["open", "1200"],
        [
          // 4 → 2 takes off the 2 seats just added, whose open invoice still asks for them with their 200 of VAT: 1,000
          // + 200 off that invoice's amount due (given-back.ts), nothing to the balance (an earlier fix credited the
          // 1,200 to the balance, which voiding the open invoice left with the customer). 3,600 billed − 1,200 taken
          // off − 1,200 back = 1,200 = 1,000 + 200 for 2 seats for half the period.
          // 2 → 0 takes off the 2 seats of Feb 1 (2,000 + 400 paid): 1,000 + 200.
          ["Seats: 2 → 0 (remaining 14 of 28 days), incl. tax: USD 2.00", "1200"],
        ],
        [
          ["2000", "400", "2400", [], "2400"],
          ["1000", "200", "1200", [], "0"],
        ],
      ],
    );
  });

  /** The raised multiplier's close under coupon `body` (applied from Jan 1, or on Jan 25 with `later`), 20% exclusive VAT: [ledger, invoices (discounted)]. */
  const underCoupon = async (body: Json, later = false, extra: Json = {}) => {
    const s = await Scenario.start(server, JAN);
    const c = await coupon(s, "Off", body);
    const id = await usagePlan(s, await taxRate(s, "VAT", "20"), later ? extra : { coupon_id: c, ...extra });
    if (later) {
      await s.advance("2026-01-25T00:00:00Z");
      await discount(s, id, c);
    }
    await raised(s, id);
    return { s, got: [await proration(s), await discounted(s)] };
  };

  test(`${store}: a raised usage multiplier under a 50% coupon for ever: the close takes the difference off before its discount`, async (t) => {
    const { got } = await underCoupon(percentOff("50"));
    t.deepEqual(got, [
      // Nothing to the balance (the old code: 24,000, valued at Jan 30).
      [],
      [
        // Jan 1: seat 1,000 half off: 500 + 100 VAT.
        ["500", "500", "100", "600", [], "600"],
        // Feb 1: 1,000 + 66,000 − 40,000 = 27,000, half off 13,500 + 2,700 VAT = 16,200, as before (40,200 less the 24,000 credit).
        ["13500", "13500", "2700", "16200", [], "16200"],
      ],
    ]);
  });

  test(`${store}: a raised usage multiplier under a 50% "once" coupon the close spends: 16,200 due, not 0`, async (t) => {
    const { got } = await underCoupon(percentOff("50", "once"), true);
    t.deepEqual(got, [
      // The old code granted 48,000 (its preview left the "once" coupon out), which paid all of the close's 40,200 (7,800 left).
      [],
      [
        // Jan 1: seat 1,000 + 200 VAT (the coupon is taken on Jan 25).
        ["1000", "0", "200", "1200", [], "1200"],
        // Feb 1: 27,000, half off (the coupon spent here) 13,500 + 2,700 VAT = 16,200.
        ["13500", "13500", "2700", "16200", [], "16200"],
      ],
    ]);
  });

  test(`${store}: a raised usage multiplier under a 50% "repeating" coupon ending Feb 1: the close, undiscounted, 32,400`, async (t) => {
    const { got } = await underCoupon(percentOff("50", "repeating", 1));
    t.deepEqual(got, [
      // The old code granted 24,000 (valued half off on Jan 30) while the close took no discount: 80,400 − 24,000 = 56,400 due.
      [],
      [
        ["500", "500", "100", "600", [], "600"],
        // Feb 1: the coupon ended: 27,000 + 5,400 VAT = 32,400.
        ["27000", "0", "5400", "32400", [], "32400"],
      ],
    ]);
  });

  test(`${store}: a raised usage multiplier under a 25,000 amount-off coupon: 2,400 due, not 8,400`, async (t) => {
    const { got } = await underCoupon(amountOff(25000));
    t.deepEqual(got, [
      // The old code granted 42,000: at ×1 the preview's 20,000 was all discounted, at ×3 60,000 − 25,000 + 7,000 VAT.
      [],
      [
        // Jan 1: seat 1,000, all of it off.
        ["0", "1000", "0", "0", [], "0"],
        // Feb 1: 27,000 − 25,000 = 2,000 + 400 VAT = 2,400 (the old code: 50,400 − 42,000 = 8,400).
        ["2000", "25000", "400", "2400", [], "2400"],
      ],
    ]);
  });

  test(`${store}: under a coupon, a minimum commitment counts a raised multiplier's adjustment before discounts and tax`, async (t) => {
    const { s, got } = await underCoupon(percentOff("50"), false, { minimum_commitment: money(100000) });
    const close = (await s.invoices()).at(-1) as Json;
    const trueUp = (close.line_items as Json[]).filter((l) => l.kind === "commitment_true_up").map((l) => l.amount.value);
    // The commitment is on charges before discounts: 1,000 + 66,000 − 40,000 = 27,000, true-up 73,000. Feb 1: 100,000,
    // half off 50,000 + 10,000 VAT = 60,000 due, as before (84,000 less the 24,000 credit).
    t.deepEqual([trueUp, got[0], (got[1] as unknown[]).at(-1)], [["73000"], [], ["50000", "50000", "10000", "60000", [], "60000"]]);
  });
}
