/**
 * A seat decrease's credit and a credit note never give back more of an invoice than it took
 * (DESIGN §13, §15): the unused time a decrease credits is recorded on the invoice it was drawn on
 * (its amount credited, as a note's is), so a credit note may credit only what is left, and a
 * decrease after a note is valued at what the note left. Through the real server (REST) on a test
 * clock, on MariaDB and SQLite. Amounts in cents (USD).
 */
import test from "ava";
import { taxRate } from "../helpers/booking-bodies.js";
import { seats } from "../helpers/catalog-bodies.js";
import { reasonOf } from "../helpers/clients.js";
import { ledger } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { patch } from "../helpers/price-bodies.js";
import { CARD_FAILS_LATER, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";

const FEB = "2026-02-01T00:00:00Z";
/** Feb 15 00:00 leaves 14 of February's 28 days: half the period. */
const FEB_15 = "2026-02-15T00:00:00Z";

/** 2 seats at 5,000 a month from Feb 1 (paid by card), `tax` exclusive if given: the subscription's and its first invoice's IDs. */
async function twoSeats(s: Scenario, tax?: string): Promise<{ id: string; invoice: string }> {
  const card = await s.card({ fixed_rates: [seats(5000)], ...(tax ? { default_tax_rate_ids: [await taxRate(s, "VAT", tax)] } : {}) });
  const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 2 } })).subscription.id;
  const [first] = await s.invoices();
  return { id, invoice: String(first?.id) };
}

/** The invoice's [status, total, amount credited]. */
async function credited(s: Scenario, id: string): Promise<string[]> {
  const i = await s.call("GET", `/invoices/${id}`);
  return [i.status, i.total_amount.value, i.amount_credited.value];
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: after a seat decrease credited 2,500 of a paid 10,000, a credit note refunds at most the 7,500 left`, async (t) => {
    const s = await Scenario.start(server, FEB);
    const { id, invoice } = await twoSeats(s);
    await s.advance(FEB_15);
    // 2 → 1 with 14 of 28 days left: 5,000 × 14/28 = 2,500 to the balance.
    await patch(s, id, { fixed_rate_quantities: { seats: 1 } });
    t.deepEqual(await ledger(s), [["proration", "2500"]]);
    t.deepEqual(await credited(s, invoice), ["paid", "10000", "2500"]);
    // A refund of all 10,000 would give back the 2,500 a second time (the old code took it: 12,500 back of 10,000 paid).
    const over = await s.raw("POST", "/credit-notes", { invoice_id: invoice, reason: "other", outcome: "refund", amount: "10000" });
    t.is(over.status, 400);
    t.is(reasonOf(over.body), "CREDIT_EXCEEDS_INVOICE");
    t.regex(String(over.body.message), /^10000 to credit, but 7500 of invoice .*'s total 10000 is left to credit$/);
    const perLine = await s.raw("POST", "/credit-notes", { invoice_id: invoice, reason: "other", outcome: "refund", lines: [{ invoice_line_index: 0 }] });
    t.is(reasonOf(perLine.body), "CREDIT_EXCEEDS_INVOICE");
    // The whole note refunds what is left: 10,000 − 2,500 = 7,500; 7,500 + 2,500 = 10,000 back in all.
    const note = await s.call("POST", "/credit-notes", { invoice_id: invoice, reason: "other", outcome: "refund" });
    t.is(note.total.value, "7500");
    t.deepEqual(await credited(s, invoice), ["paid", "10000", "10000"]);
  });

  test(`${store}: with 20% VAT, a seat decrease's credit of 2,500 + 500 leaves 12,000 − 3,000 = 9,000 to credit`, async (t) => {
    const s = await Scenario.start(server, FEB);
    const { id, invoice } = await twoSeats(s, "20");
    await s.advance(FEB_15);
    // 2 → 1: 5,000 × 14/28 = 2,500, and the 20% booked on it: 500.
    await patch(s, id, { fixed_rate_quantities: { seats: 1 } });
    t.deepEqual(await ledger(s), [["proration", "3000"]]);
    t.deepEqual(await credited(s, invoice), ["paid", "12000", "3000"]);
    const over = await s.raw("POST", "/credit-notes", { invoice_id: invoice, reason: "other", outcome: "credit_balance", amount: "9001" });
    t.is(reasonOf(over.body), "CREDIT_EXCEEDS_INVOICE");
    const note = await s.call("POST", "/credit-notes", { invoice_id: invoice, reason: "other", outcome: "credit_balance" });
    t.is(note.total.value, "9000");
  });

  test(`${store}: a seat decrease after a refund of the whole invoice credits nothing`, async (t) => {
    const s = await Scenario.start(server, FEB);
    const { id, invoice } = await twoSeats(s);
    await s.advance(FEB_15);
    const note = await s.call("POST", "/credit-notes", { invoice_id: invoice, reason: "other", outcome: "refund" });
    t.is(note.total.value, "10000");
    await patch(s, id, { fixed_rate_quantities: { seats: 1 } });
    // All 10,000 went back by the refund: nothing is left for the removed seat's unused time.
    t.deepEqual(await ledger(s), []);
    t.deepEqual(await credited(s, invoice), ["paid", "10000", "10000"]);
  });

  test(`${store}: a seat decrease and a whole refund at the same time give back 10,000 in all, whichever the database takes first`, async (t) => {
    const s = await Scenario.start(server, FEB);
    const { id, invoice } = await twoSeats(s);
    await s.advance(FEB_15);
    const [, note] = await Promise.all([patch(s, id, { fixed_rate_quantities: { seats: 1 } }), s.call("POST", "/credit-notes", { invoice_id: invoice, reason: "other", outcome: "refund" })]);
    const back = (await ledger(s)).reduce((a, [, v]) => a + Number(v), 0);
    // The decrease first: 2,500 to the balance and 7,500 refunded; the note first: 10,000 refunded and nothing credited.
    t.true((back === 2500 && note.total.value === "7500") || (back === 0 && note.total.value === "10000"), `${back} credited, ${note.total.value} refunded`);
    t.deepEqual(await credited(s, invoice), ["paid", "10000", "10000"]);
  });

  test(`${store}: seats taken off while their invoice is open lower what it asks, not the balance: voiding it leaves no credit for money never received`, async (t) => {
    const s = await Scenario.start(server, FEB);
    const card = await s.card({ fixed_rates: [seats(1000)], default_tax_rate_ids: [await taxRate(s, "VAT", "20")] });
    const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 2 } })).subscription.id;
    await s.saveCardInPortal(CARD_FAILS_LATER);
    await s.advance(FEB_15);
    // Feb 1: 2 × 1,000 + 20% = 2,400 paid. Feb 15: 2 → 4, 2 × 1,000 × 14/28 = 1,000 + 200, its charge declined: open.
    const up = (await patch(s, id, { fixed_rate_quantities: { seats: 4 } })).proration_invoice;
    t.deepEqual([up.status, up.total_amount.value, up.amount_due.value], ["open", "1200", "1200"]);
    // 4 → 2 takes off the 2 seats of that open invoice: its 1,200 no longer asked (paid by the decrease), nothing to
    // the balance (the old code: 1,200 to the balance, kept when the open invoice was then voided).
    await patch(s, id, { fixed_rate_quantities: { seats: 2 } });
    t.deepEqual(await ledger(s), []);
    const after = await s.call("GET", `/invoices/${up.id}`);
    t.deepEqual([after.status, after.amount_due.value, after.amount_credited.value], ["paid", "0", "1200"]);
    // 2 → 0 takes off the 2 seats of Feb 1 (2,000 + 400 paid): 1,000 + 200 back, all the customer paid for the half not used.
    await patch(s, id, { fixed_rate_quantities: { seats: 0 } });
    t.deepEqual(await ledger(s), [["proration", "1200"]]);
  });

  test(`${store}: a decrease that takes off only part of an open invoice's seats lowers its amount due by that part; voiding it then leaves the balance as it was`, async (t) => {
    const s = await Scenario.start(server, FEB);
    const card = await s.card({ fixed_rates: [seats(1000)] });
    const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 2 } })).subscription.id;
    await s.saveCardInPortal(CARD_FAILS_LATER);
    await s.advance(FEB_15);
    // 2 → 4: 2 × 1,000 × 14/28 = 1,000 open. 4 → 3: 1,000 × 14/28 = 500 off it, 500 still asked.
    const up = (await patch(s, id, { fixed_rate_quantities: { seats: 4 } })).proration_invoice;
    await patch(s, id, { fixed_rate_quantities: { seats: 3 } });
    const after = await s.call("GET", `/invoices/${up.id}`);
    t.deepEqual([after.status, after.amount_due.value, after.amount_credited.value], ["open", "500", "500"]);
    await s.call("POST", `/invoices/${up.id}/void`, {});
    // Nothing was credited for the open invoice: voiding it leaves nothing on the balance (the old code: 500 kept).
    t.deepEqual(await ledger(s), []);
  });
}
