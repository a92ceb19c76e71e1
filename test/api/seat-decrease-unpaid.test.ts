/**
 * A seat decrease credits only seats that were paid for (DESIGN §13, §15): the seats an invoice
 * added that was then voided or written off give nothing back; after a partial credit note, a
 * decrease gives back at most what the note left of the invoice, its tax in proportion; and a
 * decrease that would take off seats whose invoice's payment waits for the customer (3-D Secure)
 * is refused rather than credited to the balance. Through the real server (REST) on a test
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
import type { Json } from "../helpers/subjects-api.js";

const FEB = "2026-02-01T00:00:00Z";
/** Feb 15 00:00 leaves 14 of February's 28 days: half the period. */
const FEB_15 = "2026-02-15T00:00:00Z";
/** Feb 22 00:00 leaves 7 of February's 28 days. */
const FEB_22 = "2026-02-22T00:00:00Z";
const CARD_AUTH = "4000 0025 0000 3155";

/** `n` seats at `price` a month from Feb 1 (paid by card), `tax` exclusive if given: the subscription's and its first invoice's IDs. */
async function subscribed(s: Scenario, n: number, price: number, tax?: string): Promise<{ id: string; invoice: string }> {
  const card = await s.card({ fixed_rates: [seats(price)], ...(tax ? { default_tax_rate_ids: [await taxRate(s, "VAT", tax)] } : {}) });
  const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: n } })).subscription.id;
  const [first] = await s.invoices();
  return { id, invoice: String(first?.id) };
}

/** The invoice's [status, total, amount due, amount credited]. */
async function state(s: Scenario, id: string): Promise<string[]> {
  const i = await s.call("GET", `/invoices/${id}`);
  return [i.status, i.total_amount.value, i.amount_due.value, i.amount_credited.value];
}

/** 1 seat at 5,000 paid Feb 1; Feb 15 1 → 3 on a card declined: 2 × 5,000 × 14/28 = 5,000 on an open invoice, then `end`ed. */
async function addedThenEnded(s: Scenario, end: "void" | "mark_uncollectible"): Promise<{ id: string; invoice: string; up: Json }> {
  const { id, invoice } = await subscribed(s, 1, 5000);
  await s.saveCardInPortal(CARD_FAILS_LATER);
  await s.advance(FEB_15);
  const up = (await patch(s, id, { fixed_rate_quantities: { seats: 3 } })).proration_invoice;
  await s.call("POST", `/invoices/${up.id}/${end}`, {});
  return { id, invoice, up };
}

for (const store of STORES) {
  const server = useServer(store);

  for (const [end, status] of [
    ["void", "void"],
    ["mark_uncollectible", "uncollectible"],
  ] as const) {
    test(`${store}: the 2 seats added on an invoice then ${status} credit nothing when taken off; the paid seat its unused half`, async (t) => {
      const s = await Scenario.start(server, FEB);
      const { id, invoice, up } = await addedThenEnded(s, end);
      t.deepEqual(await state(s, up.id), [status, "5000", "5000", "0"]);
      // 3 → 1 takes off the 2 seats of the ended invoice: 0 credited (the old code: 2 × 5,000 × 14/28 = 5,000, for money never received).
      await patch(s, id, { fixed_rate_quantities: { seats: 1 } });
      t.deepEqual(await ledger(s), []);
      t.deepEqual(await state(s, invoice), ["paid", "5000", "5000", "0"]);
      // 1 → 0 takes off the seat paid Feb 1: 5,000 × 14/28 = 2,500, all of the unused time paid for.
      await patch(s, id, { fixed_rate_quantities: { seats: 0 } });
      t.deepEqual(await ledger(s), [["proration", "2500"]]);
      t.deepEqual(await state(s, invoice), ["paid", "5000", "5000", "2500"]);
    });
  }

  test(`${store}: seats of a voided invoice taken off a week later still credit nothing; the paid seat then its unused quarter`, async (t) => {
    const s = await Scenario.start(server, FEB);
    const { id, invoice } = await addedThenEnded(s, "void");
    // Feb 22 leaves 7 of 28 days. 3 → 1: the 2 voided seats' 7 of the 14 days they were added for, 2 × 5,000 × 7/28 = 2,500, never
    // paid: 0 (the old code: 2,500).
    await s.advance(FEB_22);
    await patch(s, id, { fixed_rate_quantities: { seats: 1 } });
    t.deepEqual(await ledger(s), []);
    // 1 → 0: 5,000 × 7/28 = 1,250 for the paid seat; the voided seats' time left is not taken for it (the period is still
    // charged at 3 seats, as after a decrease that credited nothing: 3 × 1,250 = 3,750, of which 2,500 never paid).
    await patch(s, id, { fixed_rate_quantities: { seats: 0 } });
    t.deepEqual(await ledger(s), [["proration", "1250"]]);
    t.deepEqual(await state(s, invoice), ["paid", "5000", "5000", "1250"]);
  });

  test(`${store}: a pause after seats were added on a voided invoice credits the paid seat's unused time only`, async (t) => {
    const s = await Scenario.start(server, FEB);
    const { id } = await addedThenEnded(s, "void");
    await s.advance(FEB_22);
    await s.call("POST", `/subscriptions/${id}/pause`, {});
    await s.call("POST", `/subscriptions/${id}/resume`, {});
    // The cycle paused with 7 of 28 days left: 3 seats × 5,000 × 7/28 = 3,750 unused, 2,500 of it for the voided seats:
    // 1,250 credited on the resume's invoice (the old code: 3,750).
    const resumed = (await s.invoices()).at(-1) as Json;
    t.deepEqual(
      resumed.line_items.map((l: Json) => l.amount.value),
      ["15000", "-1250"],
    );
  });

  test(`${store}: after a note credited 9,600 of 12,000, a seat decrease gives back the 2,000 + 400 left, not 2,400 + 480`, async (t) => {
    const s = await Scenario.start(server, FEB);
    // 2 seats at 5,000 + 20% VAT: 10,000 + 2,000 = 12,000 paid.
    const { id, invoice } = await subscribed(s, 2, 5000, "20");
    await s.advance(FEB_15);
    await s.call("POST", "/credit-notes", { invoice_id: invoice, reason: "other", outcome: "refund", amount: "9600" });
    t.deepEqual(await state(s, invoice), ["paid", "12000", "12000", "9600"]);
    // 2 → 1: 5,000 × 14/28 = 2,500 unused + 500 VAT; left of the invoice: 12,000 − 9,600 = 2,400, i.e. 2,000 net
    // (2,400 × 10,000 / 12,000) + 400 VAT. Credited 2,000 + 400 = 2,400 (the old code: 2,400 + 480 = 2,880, 480 over).
    await patch(s, id, { fixed_rate_quantities: { seats: 1 } });
    t.deepEqual(await ledger(s), [["proration", "2400"]]);
    t.deepEqual(await state(s, invoice), ["paid", "12000", "12000", "12000"]);
  });

  test(`${store}: a seat decrease drawing on an invoice whose payment waits for the customer is refused; once voided it credits nothing`, async (t) => {
    const s = await Scenario.start(server, FEB);
    const { id, invoice } = await subscribed(s, 2, 1000);
    await s.saveCardInPortal(CARD_AUTH);
    await s.advance(FEB_15);
    // 2 → 4: 2 × 1,000 × 14/28 = 1,000, its charge waiting for the customer's authentication.
    const up = (await patch(s, id, { fixed_rate_quantities: { seats: 4 } })).proration_invoice;
    t.deepEqual([up.status, up.amount_due.value, Boolean(up.payment_url)], ["open", "1000", true]);
    // 4 → 2 would take off those 2 seats: refused (the old code credited 1,000 to the balance for money not received).
    const down = await s.raw("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { seats: 2 } });
    t.is(down.status, 400);
    t.is(reasonOf(down.body), "INVOICE_PAYMENT_WAITS_FOR_CUSTOMER");
    t.regex(String(down.body.message), new RegExp(`invoice ${up.id}`));
    t.deepEqual(await ledger(s), []);
    t.is((await s.call("GET", `/subscriptions/${id}`)).fixed_rate_quantities.seats, "4");
    t.deepEqual(await state(s, up.id), ["open", "1000", "1000", "0"]);
    // Voided, the 2 seats were never paid: 4 → 2 credits nothing; 2 → 0 then 2 × 1,000 × 14/28 = 1,000.
    await s.call("POST", `/invoices/${up.id}/void`, {});
    await patch(s, id, { fixed_rate_quantities: { seats: 2 } });
    t.deepEqual(await ledger(s), []);
    await patch(s, id, { fixed_rate_quantities: { seats: 0 } });
    t.deepEqual(await ledger(s), [["proration", "1000"]]);
    t.deepEqual(await state(s, invoice), ["paid", "2000", "2000", "1000"]);
  });
}
