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
 * remaining ms / period ms, each line rounded once half-up).
 */
import test from "ava";
import { type Booked, bookedOf, buyer, taxRate, want } from "../helpers/booking-bodies.js";
import { seats } from "../helpers/catalog-bodies.js";
import { billed } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const APR = "2026-04-01T00:00:00Z";
const APR_16 = "2026-04-16T00:00:00Z";
const MAY = "2026-05-01T00:00:00Z";
const HALF = "(prorated: 50% of the period left)";

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

/** The first invoice (Apr 1): A's 100.00, untaxed, paid. */
const FIRST = want({ number: "INV-000001", status: "paid", lines: [["Seats", "10000", [], []]], subtotal: "10000", total: "10000" });
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
}
