/**
 * A change of rate card's invoice is taxed line by line by the card each line is for (DESIGN §15,
 * as Stripe does): the old card's credit for the time left by its default tax rates, the new
 * card's charge for it by the new card's. The change's invoice used to take the old card's rates
 * for every line (it is booked while the subscription still names the old card): an upgrade from
 * an untaxed card to a taxed one charged no tax. Through the real server (REST) on a test clock,
 * on MariaDB and SQLite; every figure is worked out beside it.
 *
 * Card A: Seats 100.00 a month, no tax rate. Card B: Seats 200.00 a month, a 20% exclusive tax
 * rate. A month of 30 days: Apr 1 → May 1 2026 (2,592,000 s). The change on Apr 16 00:00 leaves
 * 15 days (1,296,000 s): the fraction is 1,296,000 / 2,592,000 = 0.5 exactly (the code's rule:
 * remaining ms / period ms; the credit rounded once half-up, the charge the rounded difference
 * less the credit).
 *
 * Below those: an upgrade whose credit carries more tax than its charge (the old card taxed, the
 * new one not) nets to a credit once taxed: that credit goes to the subject's credit balance
 * (DESIGN §13), the change's two lines leave the invoice (the old code booked an invoice of a
 * negative total, marked paid, the customer's difference lost), prorated, as the rate
 * difference, and at a timeline's move. And the two lines always sum to the rounded difference
 * (the old code rounded each on its own: a cent more or less).
 */
import test from "ava";
import { type Booked, bookedOf, buyer, taxRate, want } from "../helpers/booking-bodies.js";
import { seats } from "../helpers/catalog-bodies.js";
import { billed, credited, grantStates, ledger } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const APR = "2026-04-01T00:00:00Z";
const APR_16 = "2026-04-16T00:00:00Z";
const MAY = "2026-05-01T00:00:00Z";
const HALF = "(prorated: 50% of the period left)";
/** Apr 21 00:00 leaves 10 days of 30: 864,000 / 2,592,000 s = 1/3 exactly. */
const APR_21 = "2026-04-21T00:00:00Z";
const THIRD = "(prorated: 33.33% of the period left)";

/** Each invoice as [number, status, lines as [description, amount, taxes], total]. */
async function lined(s: Scenario): Promise<Json[]> {
  return (await billed(s)).map((i: Json) => {
    const b = bookedOf(i);
    return [b.number, b.status, b.lines.map(([d, a, , tx]) => [d, a, tx]), b.total];
  });
}

/** Card A 100.00 + a 20% exclusive rate, card B 110.00 untaxed: subscribed to A on Apr 1 (a card on file); A and B. */
async function taxedToUntaxed(s: Scenario): Promise<{ a: string; b: string; sub: Json }> {
  const vat = await taxRate(s, "VAT", "20");
  const a = await s.card({ name: "A", fixed_rates: [seats(10000)], default_tax_rate_ids: [vat] });
  const b = await s.card({ name: "B", fixed_rates: [seats(11000)], default_tax_rate_ids: [] });
  const sub = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 } })).subscription;
  return { a, b, sub };
}

/** Changes `sub` to `card` with `behavior` now; the change must succeed. */
async function change(s: Scenario, sub: Json, card: string, behavior: string): Promise<void> {
  const r = await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: card, upgrade_behavior: behavior });
  if (r.result?.type !== "success") throw new Error(`change: ${JSON.stringify(r)}`);
}

/** Subscribes the subject to card A (paid by a checkout: a card on file), changes to B on Apr 16 with proration, renews on May 1; the invoices booked. */
async function changed(s: Scenario, aTaxes: string[], bTaxes: string[]): Promise<Booked[]> {
  const a = await s.card({ name: "A", fixed_rates: [seats(10000)], default_tax_rate_ids: aTaxes });
  const b = await s.card({ name: "B", fixed_rates: [seats(20000)], default_tax_rate_ids: bTaxes });
  const sub = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 } })).subscription;
  await s.advance(APR_16);
  const r = await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: b, upgrade_behavior: "prorate" });
  if (r.result?.type !== "success") throw new Error(`change: ${JSON.stringify(r)}`);
  await s.advance(MAY);
  return (await billed(s)).map((i: Json) => bookedOf(i));
}

/** The first invoice (Apr 1): A's 100.00, untaxed, paid; the upgrade's credit for A's unused half, 50.00, given back of it (given-back.ts). */
const FIRST = want({ number: "INV-000001", status: "paid", lines: [["Seats", "10000", [], []]], subtotal: "10000", total: "10000", credited: "5000" });
/** The renewal (May 1): B's 200.00 + 20% = 40.00 tax, 240.00. */
const RENEWAL = want({
  number: "INV-000003",
  status: "paid",
  lines: [["Seats", "20000", [], [["VAT", "20000", "4000"]]]],
  subtotal: "20000",
  total_tax: "4000",
  tax_amounts: [["VAT", "20", false, "20000", "4000"]],
  total: "24000",
});

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: an upgrade from an untaxed card to a taxed one: the credit is untaxed, the new card's charge taxed by it, the renewal too`, async (t) => {
    const s = await Scenario.start(server, APR);
    const vat = await taxRate(s, "VAT", "20");
    const got = await changed(s, [], [vat]);
    // Apr 16: credit for A's unused half, 10,000 × 0.5 = −5,000, A has no rate: untaxed; charge for
    // B's remaining half, 20,000 × 0.5 = 10,000, B's 20% exclusive: 2,000. Subtotal 5,000, tax
    // 2,000, total 7,000 (the old code: 5,000 on one line, untaxed, total 5,000).
    const change = want({
      number: "INV-000002",
      status: "paid",
      lines: [
        [`Unused time on A ${HALF}`, "-5000", [], []],
        [`Remaining time on B ${HALF}`, "10000", [], [["VAT", "10000", "2000"]]],
      ],
      subtotal: "5000",
      total_tax: "2000",
      tax_amounts: [["VAT", "20", false, "10000", "2000"]],
      total: "7000",
    });
    t.deepEqual(got, [FIRST, change, RENEWAL]);
  });

  test(`${store}: a US rate on the new card applies to a subject with a US address`, async (t) => {
    const s = await Scenario.start(server, APR);
    await buyer(s, { legal_name: "Customer Inc.", address: { line1: "1 Main St", city: "Austin", state: "TX", postal_code: "78701", country: "US" } });
    const us = await taxRate(s, "VAT", "20", { country: "US" });
    const got = await changed(s, [], [us]);
    // As above: −5,000 untaxed + 10,000 + 2,000 (the rate's country is the subject's) = 7,000.
    t.deepEqual(
      got.map((i) => [i.number, i.lines, i.total_tax, i.total]),
      [
        ["INV-000001", [["Seats", "10000", [], []]], "0", "10000"],
        [
          "INV-000002",
          [
            [`Unused time on A ${HALF}`, "-5000", [], []],
            [`Remaining time on B ${HALF}`, "10000", [], [["VAT", "10000", "2000"]]],
          ],
          "2000",
          "7000",
        ],
        ["INV-000003", [["Seats", "20000", [], [["VAT", "20000", "4000"]]]], "4000", "24000"],
      ],
    );
  });

  test(`${store}: both cards with the same rate: the credit's tax and the charge's net out`, async (t) => {
    const s = await Scenario.start(server, APR);
    const vat = await taxRate(s, "VAT", "20");
    const got = await changed(s, [vat], [vat]);
    // Apr 1: 10,000 + 2,000 = 12,000. Apr 16: −5,000 − 1,000 tax, 10,000 + 2,000 tax: subtotal
    // 5,000, tax 1,000 (20% of the 5,000 difference), total 6,000. May 1: 20,000 + 4,000 = 24,000.
    t.deepEqual(
      got.map((i) => [i.number, i.lines, i.tax_amounts, i.total]),
      [
        ["INV-000001", [["Seats", "10000", [], [["VAT", "10000", "2000"]]]], [["VAT", "20", false, "10000", "2000"]], "12000"],
        [
          "INV-000002",
          [
            [`Unused time on A ${HALF}`, "-5000", [], [["VAT", "-5000", "-1000"]]],
            [`Remaining time on B ${HALF}`, "10000", [], [["VAT", "10000", "2000"]]],
          ],
          [["VAT", "20", false, "5000", "1000"]],
          "6000",
        ],
        ["INV-000003", [["Seats", "20000", [], [["VAT", "20000", "4000"]]]], [["VAT", "20", false, "20000", "4000"]], "24000"],
      ],
    );
  });

  /** Apr 1: A's 100.00 + 20.00 tax. */
  const TAXED_FIRST = ["INV-000001", "paid", [["Seats", "10000", [["VAT", "10000", "2000"]]]], "12000"];
  /** May 1: B's 110.00, untaxed. */
  const UNTAXED_RENEWAL = ["INV-000002", "paid", [["Seats", "11000", []]], "11000"];

  test(`${store}: an upgrade whose credit carries more tax than its charge: the net credit goes to the balance, no negative invoice`, async (t) => {
    const s = await Scenario.start(server, APR);
    const { b, sub } = await taxedToUntaxed(s);
    await s.advance(APR_16);
    await change(s, sub, b, "prorate");
    // Apr 16: credit for A's unused half, 10,000 × 0.5 = −5,000, and A's 20%: −1,000 tax, −6,000;
    // charge for B's half, 11,000 × 0.5 = 5,500, untaxed. Before tax +500 (an upgrade), taxed
    // −6,000 + 5,500 = −500: a credit of 500 to the balance, no invoice (nothing else to bill).
    // The old code: an invoice of total −500, amount due 0, paid, nothing credited.
    t.deepEqual(await grantStates(s), [["promotional", "active", "500", "500"]]);
    await s.advance(MAY);
    // May 1: B's 11,000 untaxed; the 500 pays part of it: 10,500 due.
    t.deepEqual(await lined(s), [TAXED_FIRST, UNTAXED_RENEWAL]);
    t.deepEqual(
      (await credited(s)).map(([st, total, applied, due]) => [st, total, applied.map(([, v]) => v), due]),
      [
        ["paid", "12000", [], "12000"],
        ["paid", "11000", ["500"], "10500"],
      ],
    );
    t.deepEqual(await ledger(s), [
      ["proration", "500"],
      ["application", "-500"],
    ]);
    t.is((await s.call("GET", `/subscriptions/${sub.id}`)).rate_card_id, b);
  });

  test(`${store}: the same as the rate difference: the whole period's net credit goes to the balance`, async (t) => {
    const s = await Scenario.start(server, APR);
    const { b, sub } = await taxedToUntaxed(s);
    await s.advance(APR_16);
    await change(s, sub, b, "rate_difference");
    // The whole period: −10,000 − 2,000 tax + 11,000 = −1,000: a credit of 1,000, no invoice.
    t.deepEqual(await grantStates(s), [["promotional", "active", "1000", "1000"]]);
    await s.advance(MAY);
    // May 1: 11,000 − 1,000 of credit = 10,000 due.
    t.deepEqual(await lined(s), [TAXED_FIRST, UNTAXED_RENEWAL]);
    t.deepEqual(
      (await credited(s)).map(([, total, applied, due]) => [total, applied.map(([, v]) => v), due]),
      [
        ["12000", [], "12000"],
        ["11000", ["1000"], "10000"],
      ],
    );
  });

  test(`${store}: the same at a timeline's move from A to B`, async (t) => {
    const s = await Scenario.start(server, APR);
    const vat = await taxRate(s, "VAT", "20");
    const a = await s.card({ name: "A", fixed_rates: [seats(10000)], default_tax_rate_ids: [vat] });
    const b = await s.card({ name: "B", fixed_rates: [seats(11000)], default_tax_rate_ids: [] });
    const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: a });
    const item = (card: string, start: string, end: string | null) => ({
      period: { start, end },
      subscription_input: { rate_card_id: card, fixed_rate_quantities: { seats: 1 }, rate_price_multipliers: {} },
    });
    await s.call("POST", `/subscription-timelines/${tl.id}/items`, { items: [item(a, APR, APR_16), item(b, APR_16, null)] });
    const started = await s.call("POST", `/subscription-timelines/${tl.id}/start`, { checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/no" } });
    if (started.result.result_type === "requires_action") await s.payCheckout(started.result.action.checkout_url, CARD_OK);
    await s.advance(APR_16);
    // The move on Apr 16 prorates as the change does: −6,000 + 5,500 = −500 to the balance.
    t.deepEqual(await grantStates(s), [["promotional", "active", "500", "500"]]);
    t.is(((await s.subscriptions())[0] as Json).rate_card_id, b);
    await s.advance(MAY);
    t.deepEqual(await lined(s), [TAXED_FIRST, UNTAXED_RENEWAL]);
    t.deepEqual(
      (await credited(s)).map(([, , , due]) => due),
      ["12000", "10500"],
    );
  });

  test(`${store}: the two lines sum to the rounded difference: 10.00 to 20.00 with a third left`, async (t) => {
    const s = await Scenario.start(server, APR);
    const a = await s.card({ name: "A", fixed_rates: [seats(1000)] });
    const b = await s.card({ name: "B", fixed_rates: [seats(2000)] });
    const sub = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 } })).subscription;
    await s.advance(APR_21);
    await change(s, sub, b, "prorate");
    // Credit: round(−1,000 × 1/3 = −333.33…) = −333. Difference: round(1,000 × 1/3) = 333; the
    // charge is 333 − (−333) = 666 (B's 2,000 × 1/3 = 666.67 on its own would round to 667: the
    // old code's total 334). Total 333.
    t.deepEqual((await lined(s))[1], [
      "INV-000002",
      "paid",
      [
        [`Unused time on A ${THIRD}`, "-333", []],
        [`Remaining time on B ${THIRD}`, "666", []],
      ],
      "333",
    ]);
  });

  test(`${store}: the two lines sum to the rounded difference: 10.01 to 20.02 with half left`, async (t) => {
    const s = await Scenario.start(server, APR);
    const a = await s.card({ name: "A", fixed_rates: [seats(1001)] });
    const b = await s.card({ name: "B", fixed_rates: [seats(2002)] });
    const sub = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 } })).subscription;
    await s.advance(APR_16);
    await change(s, sub, b, "prorate");
    // Credit: round(−1,001 × 0.5 = −500.5) = −501 (half away from zero). Difference: round(1,001 ×
    // 0.5 = 500.5) = 501; the charge is 501 − (−501) = 1,002 (B's 2,002 × 0.5 = 1,001 on its own:
    // the old code's total 500). Total 501.
    t.deepEqual((await lined(s))[1], [
      "INV-000002",
      "paid",
      [
        [`Unused time on A ${HALF}`, "-501", []],
        [`Remaining time on B ${HALF}`, "1002", []],
      ],
      "501",
    ]);
  });
}
