/**
 * A whole-invoice credit note on an invoice whose negative line is taxed at another rate than its
 * charge (DESIGN §15): a rate-card change's invoice (the fixture of change-tax.test.ts), the
 * unused time on the old card taxed by the old card, the remaining time on the new card by the new
 * card. The note credits every line all that is left of it, the negative one as a negative note
 * line, so that it reverses the invoice's subtotal and total_tax exactly. The old code spread the
 * whole total over the positive line alone, at its tax rate: the wrong tax. Through the real
 * server (REST) on a test clock, on MariaDB and SQLite; every figure is worked out beside it.
 *
 * A month of 30 days: Apr 1 → May 1 2026; the change on Apr 16 leaves half of it (0.5 exactly).
 */
import test from "ava";
import { taxRate } from "../helpers/booking-bodies.js";
import { seats } from "../helpers/catalog-bodies.js";
import { reasonOf, violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const APR = "2026-04-01T00:00:00Z";
const APR_16 = "2026-04-16T00:00:00Z";
const HALF = "(prorated: 50% of the period left)";

/** Subscribed to card A on Apr 1 (a card on file), changed to B on Apr 16 with proration: the change's invoice. */
async function changeInvoice(s: Scenario, a: Json, b: Json): Promise<Json> {
  const ca = await s.card({ name: "A", fixed_rates: [seats(10000)], ...a });
  const cb = await s.card({ name: "B", ...b });
  const sub = (await s.subscribe({ rate_card_id: ca, fixed_rate_quantities: { seats: 1 } })).subscription;
  await s.advance(APR_16);
  const r = await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: cb, upgrade_behavior: "prorate" });
  if (r.result?.type !== "success") throw new Error(`change: ${JSON.stringify(r)}`);
  const inv = (await s.invoices()).find((i: Json) => i.number === "INV-000002");
  if (!inv) throw new Error("no change invoice");
  return inv;
}

const invoiceFigures = (i: Json) => [i.status, i.line_items.map((l: Json) => [l.description, l.amount.value]), i.subtotal.value, i.total_tax.value, i.total_amount.value];
const noteFigures = (n: Json) => [n.lines.map((l: Json) => [l.invoice_line_index, l.description, l.amount.value, l.tax_amount.value]), n.subtotal.value, n.total_tax.value, n.total.value];

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: the whole of an upgrade's invoice (untaxed credit, taxed charge): the note reverses its subtotal 5000 and its tax 2000`, async (t) => {
    const s = await Scenario.start(server, APR);
    const vat = await taxRate(s, "VAT", "20");
    const inv = await changeInvoice(s, { default_tax_rate_ids: [] }, { fixed_rates: [seats(20000)], default_tax_rate_ids: [vat] });
    // −5000 (10,000 × 0.5, A untaxed); 10,000 (20,000 × 0.5) + 20% = 2,000 tax: subtotal 5,000, tax 2,000, total 7,000; paid by the card.
    t.deepEqual(invoiceFigures(inv), [
      "paid",
      [
        [`Unused time on A ${HALF}`, "-5000"],
        [`Remaining time on B ${HALF}`, "10000"],
      ],
      "5000",
      "2000",
      "7000",
    ]);
    const note = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "refund" });
    // Every line all of it: −5,000 (no tax) and 12,000 of which 2,000 tax; 7,000 − 2,000 = 5,000.
    // The old code: 7,000 on line 1, tax round(7,000 × 2,000 / 12,000) = 1,167, subtotal 5,833.
    t.deepEqual(noteFigures(note), [
      [
        [0, `Unused time on A ${HALF}`, "-5000", "0"],
        [1, `Remaining time on B ${HALF}`, "12000", "2000"],
      ],
      "5000",
      "2000",
      "7000",
    ]);
    t.deepEqual(await s.call("GET", `/credit-notes/${note.id}`), note);
    const after = await s.call("GET", `/invoices/${inv.id}`);
    t.is(after.amount_credited.value, "7000");
    const pdf = await fetch(`${server.url}/credit-notes/${note.id}/pdf`, { headers: { "x-api-key": s.key } });
    t.deepEqual([pdf.status, pdf.headers.get("content-type")], [200, "application/pdf"]);
    await pdf.arrayBuffer();
  });

  test(`${store}: per line, 7000 of the taxed charge is all that is left of the upgrade's invoice: the whole note, its tax 2000 all reversed`, async (t) => {
    const s = await Scenario.start(server, APR);
    const vat = await taxRate(s, "VAT", "20");
    const inv = await changeInvoice(s, { default_tax_rate_ids: [] }, { fixed_rates: [seats(20000)], default_tax_rate_ids: [vat] });
    t.deepEqual([inv.subtotal.value, inv.total_tax.value, inv.total_amount.value], ["5000", "2000", "7000"]);
    const note = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "refund", lines: [{ invoice_line_index: 1, amount: "7000" }] });
    // 7000 asked of line 1 = the invoice's 7000 left: every line all of it, −5000 (no tax) and 12000 of which 2000 tax; 7000 − 2000 = 5000.
    // The old code: 7000 on line 1 alone, tax round(7000 × 2000 / 12000) = 1167, subtotal 5833: the invoice all credited, 833 of its tax never reversed.
    t.deepEqual(noteFigures(note), [
      [
        [0, `Unused time on A ${HALF}`, "-5000", "0"],
        [1, `Remaining time on B ${HALF}`, "12000", "2000"],
      ],
      "5000",
      "2000",
      "7000",
    ]);
    t.is((await s.call("GET", `/invoices/${inv.id}`)).amount_credited.value, "7000");
    // Nothing left: every line credited all of it (a line of its own refused, naming it), and the invoice (0 left).
    const line = await s.raw("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "refund", lines: [{ invoice_line_index: 1, amount: "1" }] });
    t.deepEqual([line.status, violatedFields(line.body)], [400, ["lines[0].amount"]]);
    const more = await s.raw("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "refund", amount: "1" });
    t.deepEqual([more.status, reasonOf(more.body)], [400, "CREDIT_EXCEEDS_INVOICE"]);
  });

  test(`${store}: per line 3000, then the rest (4000) of the same line: the second note folds in the negative line; the tax 500 + 1500 = 2000`, async (t) => {
    const s = await Scenario.start(server, APR);
    const vat = await taxRate(s, "VAT", "20");
    const inv = await changeInvoice(s, { default_tax_rate_ids: [] }, { fixed_rates: [seats(20000)], default_tax_rate_ids: [vat] });
    const first = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "credit_balance", lines: [{ invoice_line_index: 1, amount: "3000" }] });
    // 3000 of 12000 (2000 tax): round(3000 × 2000 / 12000) = 500; subtotal 2500.
    t.deepEqual(noteFigures(first), [[[1, `Remaining time on B ${HALF}`, "3000", "500"]], "2500", "500", "3000"]);
    const rest = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "credit_balance", lines: [{ invoice_line_index: 1, amount: "4000" }] });
    // 4000 = 7000 − 3000, all that is left: −5000 and the line's 9000, tax 2000 − 500 = 1500; subtotal 4000 − 1500 = 2500.
    // Both: subtotal 2500 + 2500 = 5000, tax 500 + 1500 = 2000, total 7000: the invoice's. The old code: 4000 with 667 of tax (1167 in all).
    t.deepEqual(noteFigures(rest), [
      [
        [0, `Unused time on A ${HALF}`, "-5000", "0"],
        [1, `Remaining time on B ${HALF}`, "9000", "1500"],
      ],
      "2500",
      "1500",
      "4000",
    ]);
    t.is((await s.call("GET", `/invoices/${inv.id}`)).amount_credited.value, "7000");
  });

  test(`${store}: the mirror (taxed credit, untaxed charge): half by amount, then the rest; the two notes reverse its tax −1000 exactly`, async (t) => {
    const s = await Scenario.start(server, APR);
    const vat = await taxRate(s, "VAT", "20");
    const inv = await changeInvoice(s, { default_tax_rate_ids: [vat] }, { fixed_rates: [seats(30000)], default_tax_rate_ids: [] });
    // −5,000 − 1,000 (A's 20%) = −6,000; 15,000 (30,000 × 0.5) untaxed: subtotal 10,000, tax −1,000, total 9,000.
    t.deepEqual(invoiceFigures(inv), [
      "paid",
      [
        [`Unused time on A ${HALF}`, "-5000"],
        [`Remaining time on B ${HALF}`, "15000"],
      ],
      "10000",
      "-1000",
      "9000",
    ]);
    const half = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "credit_balance", amount: "4500" });
    // 4,500 of 9,000: the negative line's share round(4,500 × 6,000 / 9,000) = 3,000 → −3,000, its tax
    // round(−3,000 × −1,000 / −6,000) = −500; the charge 4,500 + 3,000 = 7,500, untaxed. 4,500 − (−500) = 5,000.
    t.deepEqual(noteFigures(half), [
      [
        [0, `Unused time on A ${HALF}`, "-3000", "-500"],
        [1, `Remaining time on B ${HALF}`, "7500", "0"],
      ],
      "5000",
      "-500",
      "4500",
    ]);
    const rest = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "credit_balance" });
    // What is left of each: −3,000 with tax −1,000 − (−500) = −500; 7,500. The old code: 4,500 on line 1, no tax (0 of −1,000 reversed in all).
    t.deepEqual(noteFigures(rest), [
      [
        [0, `Unused time on A ${HALF}`, "-3000", "-500"],
        [1, `Remaining time on B ${HALF}`, "7500", "0"],
      ],
      "5000",
      "-500",
      "4500",
    ]);
    // The two notes: subtotal 5,000 + 5,000 = 10,000, tax −500 − 500 = −1,000, total 9,000: the invoice's.
    t.is((await s.call("GET", `/invoices/${inv.id}`)).amount_credited.value, "9000");
  });
}
