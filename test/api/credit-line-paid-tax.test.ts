/**
 * A credit for unused time that lands as a line on a new invoice (a resume's credit for the cycle
 * the pause cut short, an upgrade's credit for the old card) gives back the tax PAID for that
 * time, per rate as it was paid, not the tax the new invoice's rates or the buyer's tax status
 * would put on it now; the invoice's tax breakdown shows it under the rate it was paid at. The
 * same as such a credit carried to the balance (carried-credit-paid-tax.test.ts). Through the
 * real server (REST) on a test clock, on MariaDB and SQLite; amounts in cents (USD), each figure
 * worked out beside it.
 *
 * Resume set-up: 1 seat at 10,000 a month from Jan 15 (31 days) on a card with "VAT 10" (10%
 * exclusive), paused Jan 25 (21 of 31 days unused: 10,000 × 21/31 = 6,774.19 → 6,774), resumed
 * Feb 1: 10,000 for the new cycle less the 6,774. Paid at 10%: 11,000, of which 1,000 × 6,774 /
 * 10,000 = 677.4 → 677 of tax for the unused time.
 */
import test from "ava";
import { type Booked, booked, buyer, taxRate, want } from "../helpers/booking-bodies.js";
import { seats } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";

const UNUSED = "Seats × 1: unused time of the cycle paused at 2026-01-25T00:00:00Z (remaining 21 of 31 days)";

/** The opening invoice and the resume's (from Jan 15 on `card`, paused Jan 25, `feb1` run, resumed Feb 1), booked. */
async function pausedAndResumed(s: Scenario, card: string, feb1: () => Promise<unknown>): Promise<Booked[]> {
  const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription.id;
  await s.advance("2026-01-25T00:00:00Z");
  await s.call("POST", `/subscriptions/${id}/pause`, {});
  await s.advance("2026-02-01T00:00:00Z");
  await feb1();
  await s.call("POST", `/subscriptions/${id}/resume`, {});
  return booked(s);
}

/** Only the fields a test reads of a booked invoice. */
const totals = (b: Booked | undefined) => b && { lines: b.lines, subtotal: b.subtotal, total_tax: b.total_tax, total: b.total, tax_amounts: b.tax_amounts, notes: b.notes };

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: paid at 10%, resumed at 20%: the credit line gives back the 677 paid, total 4,549 (before: 1,355 at 20%, 3,871)`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [seats(10000)], default_tax_rate_ids: [await taxRate(s, "VAT 10", "10")] });
    const vat20 = await taxRate(s, "VAT 20", "20");
    const [opening, resume] = await pausedAndResumed(s, card, () => buyer(s, { tax_rate_ids: [vat20] }));
    t.is(opening?.total, "11000"); // 10,000 + 1,000 at 10%, paid
    t.deepEqual(totals(resume), {
      lines: [
        ["Seats", "10000", [], [["VAT 20", "10000", "2000"]]], // 10,000 × 20%
        [UNUSED, "-6774", [], [["VAT 10", "-6774", "-677"]]], // the 677 paid at 10%, not −6,774 × 20% = −1,355
      ],
      subtotal: "3226", // 10,000 − 6,774
      total_tax: "1323", // 2,000 − 677
      total: "4549", // 3,226 + 1,323
      tax_amounts: [
        ["VAT 20", "20", false, "10000", "2000"],
        ["VAT 10", "10", false, "-6774", "-677"],
      ],
      notes: [],
    });
  });

  test(`${store}: paid exempt, taxable at the resume: the credit line gives back no tax, total 4,226 (before: −677 never paid, 3,549)`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [seats(10000)], default_tax_rate_ids: [await taxRate(s, "VAT 10", "10")] });
    await buyer(s, { tax_exempt: "exempt" });
    const [opening, resume] = await pausedAndResumed(s, card, () => buyer(s, { tax_exempt: "none" }));
    t.deepEqual([opening?.total, opening?.total_tax], ["10000", "0"]); // paid exempt: no tax
    t.deepEqual(totals(resume), {
      lines: [
        ["Seats", "10000", [], [["VAT 10", "10000", "1000"]]],
        [UNUSED, "-6774", [], []], // no tax was paid for it
      ],
      subtotal: "3226", // 10,000 − 6,774
      total_tax: "1000", // 1,000 on the new cycle alone
      total: "4226", // 3,226 + 1,000
      tax_amounts: [["VAT 10", "10", false, "10000", "1000"]],
      notes: [],
    });
  });

  test(`${store}: paid at 10%, exempt at the resume: the credit line still gives back the 677 paid, total 2,549 (before: none, 3,226)`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [seats(10000)], default_tax_rate_ids: [await taxRate(s, "VAT 10", "10")] });
    const [, resume] = await pausedAndResumed(s, card, () => buyer(s, { tax_exempt: "exempt" }));
    t.deepEqual(totals(resume), {
      lines: [
        ["Seats", "10000", [], []], // exempt now: no tax on the new cycle
        [UNUSED, "-6774", [], [["VAT 10", "-6774", "-677"]]], // the 677 paid for the time given back
      ],
      subtotal: "3226",
      total_tax: "-677",
      total: "2549", // 3,226 − 677
      tax_amounts: [["VAT 10", "10", false, "-6774", "-677"]],
      notes: ["Tax exempt."],
    });
  });

  test(`${store}: upgrade after a rate rise: the old card's credit gives back the 500 paid at 10%, total 6,500 (before: 1,000 at 20%, 6,000)`, async (t) => {
    const s = await Scenario.start(server, "2026-02-01T00:00:00Z");
    const vat10 = await taxRate(s, "VAT 10", "10");
    const vat20 = await taxRate(s, "VAT 20", "20");
    const a = await s.card({ name: "A", fixed_rates: [seats(10000)], default_tax_rate_ids: [vat10] });
    const b = await s.card({ name: "B", fixed_rates: [seats(20000)], default_tax_rate_ids: [vat10] });
    const id = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 } })).subscription.id;
    // Feb 15 00:00: 14 of February's 28 days left, half the period; the buyer's own rate is now 20%.
    await s.advance("2026-02-15T00:00:00Z");
    await buyer(s, { tax_rate_ids: [vat20] });
    await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: b, behavior: "prorate" });
    const [opening, upgrade] = await booked(s);
    t.is(opening?.total, "11000"); // 10,000 + 1,000 at 10%, paid
    t.deepEqual(
      totals(upgrade),
      totals(
        want({
          number: "",
          lines: [
            ["Unused time on A (prorated: 50% of the period left)", "-5000", [], [["VAT 10", "-5000", "-500"]]], // 1,000 × 5,000 / 10,000 paid, not −5,000 × 20% = −1,000
            ["Remaining time on B (prorated: 50% of the period left)", "10000", [], [["VAT 20", "10000", "2000"]]], // 20,000 × ½ at 20%
          ],
          subtotal: "5000", // −5,000 + 10,000
          total_tax: "1500", // 2,000 − 500
          total: "6500", // 5,000 + 1,500
          tax_amounts: [
            ["VAT 10", "10", false, "-5000", "-500"],
            ["VAT 20", "20", false, "10000", "2000"],
          ],
        }),
      ),
    );
  });
}
