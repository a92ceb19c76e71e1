/**
 * Late usage withdrawn after its window's invoice was credited (DESIGN §14, §15): what the
 * reversal gives back of the window's invoice is capped at what credit notes left of it (per
 * line, and of the invoice), and is recorded on its amount credited, so a later note may credit
 * only what the reversal left. Through the real server (REST) on a test clock, on MariaDB and
 * SQLite. A monthly card from Jan 1: 1 seat at 1,000 and API calls at 10 a unit (a sum metric,
 * nothing included), paid by card; 1,000 units on Jan 10, so Feb 1's invoice (January's window)
 * bills 1,000 (February's seat, line 0) + 10,000 (API calls, line 1) = 11,000, paid. Those
 * 1,000 units withdrawn on Feb 10 (an event of −1,000 dated Jan 10): the Mar 1 close prices
 * January again. Amounts in cents (USD).
 */
import test from "ava";
import { taxRate } from "../helpers/booking-bodies.js";
import { seats } from "../helpers/catalog-bodies.js";
import { reasonOf } from "../helpers/clients.js";
import { ledger } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { flat, usageRate } from "../helpers/price-bodies.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const LATE = "Late usage adjustment: API calls (period 2026-01-01T00:00:00Z to 2026-02-01T00:00:00Z)";

/** The subscription, and January's 1,000 units billed on Feb 1 (paid): the subscription's and Feb 1's invoice's IDs. */
async function januaryBilled(s: Scenario, tax?: string): Promise<{ id: string; window: string }> {
  const api = await s.metric();
  const taxed = tax ? { default_tax_rate_ids: [await taxRate(s, "VAT", tax)] } : {};
  const card = await s.card({ fixed_rates: [seats(1000)], usage_based_rates: [usageRate(api, flat(10))], ...taxed });
  const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription.id;
  await s.events([["2026-01-10T00:00:00Z", "1000"]]);
  await s.advance("2026-02-01T00:00:00Z");
  const window = (await s.invoices())[1] as Json;
  return { id, window: String(window.id) };
}

/** Withdraws January's 1,000 units on Feb 10 and closes February on Mar 1. */
async function withdrawn(s: Scenario): Promise<void> {
  await s.advance("2026-02-10T00:00:00Z");
  await s.events([["2026-01-10T00:00:00Z", "-1000"]]);
  await s.advance("2026-03-01T00:00:00Z");
}

/** An invoice's [status, total, amount credited]. */
async function credited(s: Scenario, id: string): Promise<string[]> {
  const i = await s.call("GET", `/invoices/${id}`);
  return [i.status, i.total_amount.value, i.amount_credited.value];
}

/** Mar 1's invoice as [status, total, amount due, lines as [description, amount]]. */
async function march(s: Scenario): Promise<unknown[]> {
  const i = (await s.invoices())[2] as Json;
  return [i.status, i.total_amount.value, i.amount_due.value, (i.line_items as Json[]).map((l) => [l.description, l.amount.value])];
}

const note = (s: Scenario, body: Json) => s.raw("POST", "/credit-notes", { reason: "other", outcome: "refund", ...body });

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a window invoice refunded in full, then its usage withdrawn: the reversal gives nothing more`, async (t) => {
    const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
    const { window } = await januaryBilled(s);
    const refund = await note(s, { invoice_id: window });
    t.is(refund.body.total?.value, "11000");
    await withdrawn(s);
    t.deepEqual(
      [await march(s), await ledger(s), await credited(s, window)],
      [
        // Mar 1: 1 seat 1,000. January priced again: 0 units − 10,000 billed = −10,000, but all 11,000 of Feb 1 was refunded:
        // nothing left to give back, no line (the old code: 1,000 − 10,000 = −9,000, 9,000 granted: 11,000 + 9,000 = 20,000
        // back of 11,000 paid).
        ["paid", "1000", "1000", [["Seats", "1000"]]],
        [],
        ["paid", "11000", "11000"],
      ],
    );
  });

  test(`${store}: 4,000 of the usage line refunded, then the usage withdrawn: the reversal gives back the 6,000 left of it`, async (t) => {
    const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
    const { window } = await januaryBilled(s);
    const refund = await note(s, { invoice_id: window, lines: [{ invoice_line_index: 1, amount: "4000" }] });
    t.is(refund.body.total?.value, "4000");
    await withdrawn(s);
    t.deepEqual(
      [await march(s), await ledger(s), await credited(s, window)],
      [
        // Mar 1: 1 seat 1,000; January's −10,000 capped at what is left of its API calls line: 10,000 − 4,000 = 6,000 (the
        // invoice has 11,000 − 4,000 = 7,000 left, of which 1,000 is the seat's): 1,000 − 6,000 = −5,000, granted (the old
        // code: −9,000, 9,000 granted: 4,000 + 9,000 = 13,000 back of the 10,000 the usage cost).
        [
          "paid",
          "-5000",
          "0",
          [
            ["Seats", "1000"],
            [LATE, "-6000"],
          ],
        ],
        [["invoice_credit", "5000"]],
        // Feb 1's amount credited: the note's 4,000 + the reversal's 6,000 = 10,000; 1,000 (the seat) left.
        ["paid", "11000", "10000"],
      ],
    );
  });

  test(`${store}: with 20% VAT, 6,000 of the usage line's 12,000 refunded: the reversal takes back 5,000 + 1,000 of tax`, async (t) => {
    const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
    // Feb 1: (1,000 + 10,000) + 20% = 13,200, the API calls line 10,000 + 2,000 of tax.
    const { window } = await januaryBilled(s, "20");
    const refund = await note(s, { invoice_id: window, lines: [{ invoice_line_index: 1, amount: "6000" }] });
    t.is(refund.body.total?.value, "6000");
    await withdrawn(s);
    t.deepEqual(
      [await march(s), await ledger(s), await credited(s, window)],
      [
        // 12,000 − 6,000 = 6,000 left of the line with its tax: 6,000 × 10,000 / 12,000 = 5,000 before tax. Mar 1: (1,000 −
        // 5,000) + 20% = −4,800, granted: 6,000 + 6,000 = 12,000 back of the line's 12,000 (the old code: (1,000 − 10,000) × 1.2
        // = −10,800, 10,800 granted: 6,000 + 12,000 = 18,000 back).
        [
          "paid",
          "-4800",
          "0",
          [
            ["Seats", "1000"],
            [LATE, "-5000"],
          ],
        ],
        [["invoice_credit", "4800"]],
        // The note's 6,000 + the reversal's 5,000 + 1,000 of tax = 12,000; 1,200 (the seat with its tax) left.
        ["paid", "13200", "12000"],
      ],
    );
  });

  test(`${store}: the seat's line refunded, then the usage withdrawn: the reversal gives back all 10,000 of the usage line`, async (t) => {
    const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
    const { window } = await januaryBilled(s);
    const refund = await note(s, { invoice_id: window, lines: [{ invoice_line_index: 0 }] });
    t.is(refund.body.total?.value, "1000");
    await withdrawn(s);
    t.deepEqual(
      [await march(s), await ledger(s), await credited(s, window)],
      [
        // Mar 1: 1,000 − 10,000 = −9,000, granted: the note took none of the API calls line.
        [
          "paid",
          "-9000",
          "0",
          [
            ["Seats", "1000"],
            [LATE, "-10000"],
          ],
        ],
        [["invoice_credit", "9000"]],
        // 1,000 (the note) + 10,000 (the reversal) = all 11,000 (the old code: 1,000, so a note could refund 10,000 more).
        ["paid", "11000", "11000"],
      ],
    );
  });

  test(`${store}: late usage billed on Mar 1 and refunded there, then all of January withdrawn: the reversal takes back Feb 1's 10,000 only`, async (t) => {
    const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
    const { window } = await januaryBilled(s);
    await s.advance("2026-02-10T00:00:00Z");
    await s.events([["2026-01-10T00:00:00Z", "500"]]);
    await s.advance("2026-03-01T00:00:00Z");
    // Mar 1: 1 seat 1,000 + January's late 500 units × 10 = 5,000 (line 1), paid; that line refunded in full.
    const mar = (await s.invoices())[2] as Json;
    const refund = await note(s, { invoice_id: mar.id, lines: [{ invoice_line_index: 1 }] });
    t.is(refund.body.total?.value, "5000");
    await s.advance("2026-03-10T00:00:00Z");
    await s.events([["2026-01-10T00:00:00Z", "-1500"]]);
    await s.advance("2026-04-01T00:00:00Z");
    const apr = (await s.invoices())[3] as Json;
    t.deepEqual(
      [[apr.total_amount.value, (apr.line_items as Json[]).map((l) => [l.description, l.amount.value])], await ledger(s), await credited(s, String(mar.id)), await credited(s, window)],
      [
        // Apr 1: January priced again, 0 − (10,000 + 5,000) = −15,000, drawn newest first: Mar 1's late line, refunded, gives
        // nothing; Feb 1's 10,000 all. 1,000 − 10,000 = −9,000, granted (the old code: 1,000 − 15,000 = −14,000, 14,000
        // granted: 5,000 + 14,000 = 19,000 back of the 15,000 the usage cost).
        [
          "-9000",
          [
            ["Seats", "1000"],
            [LATE, "-10000"],
          ],
        ],
        [["invoice_credit", "9000"]],
        ["paid", "6000", "5000"],
        ["paid", "11000", "10000"],
      ],
    );
  });

  test(`${store}: the usage withdrawn first, then a credit note: the note credits only what the reversal left`, async (t) => {
    const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
    const { window } = await januaryBilled(s);
    await withdrawn(s);
    // Mar 1: 1,000 − 10,000 = −9,000, granted; Feb 1's amount credited 10,000 (the old code: 0).
    t.deepEqual(
      [await march(s), await ledger(s)],
      [
        [
          "paid",
          "-9000",
          "0",
          [
            ["Seats", "1000"],
            [LATE, "-10000"],
          ],
        ],
        [["invoice_credit", "9000"]],
      ],
    );
    t.deepEqual(await credited(s, window), ["paid", "11000", "10000"]);
    // A refund of all 11,000 would give the usage back twice (the old code refunded it: 9,000 + 11,000 back, 1,000 used).
    const whole = await note(s, { invoice_id: window, amount: "11000" });
    t.is(reasonOf(whole.body), "CREDIT_EXCEEDS_INVOICE");
    t.regex(String(whole.body.message), /^11000 to credit, but 1000 of invoice .*'s total 11000 is left to credit$/);
    const usageLine = await note(s, { invoice_id: window, lines: [{ invoice_line_index: 1 }] });
    t.is(reasonOf(usageLine.body), "CREDIT_EXCEEDS_INVOICE");
    // What is left: 11,000 − 10,000 = 1,000 (the seat).
    const rest = await note(s, { invoice_id: window });
    t.is(rest.body.total?.value, "1000");
    t.deepEqual(await credited(s, window), ["paid", "11000", "11000"]);
  });

  test(`${store}: an ended subscription's window refunded in full, then its usage withdrawn: no adjustment invoice`, async (t) => {
    const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
    const { id, window } = await januaryBilled(s);
    // Cancelled now: its final invoice bills February's window (no usage), and January stays Feb 1's.
    await s.call("POST", `/subscriptions/${id}/cancel`, {});
    const refund = await note(s, { invoice_id: window });
    t.is(refund.body.total?.value, "11000");
    await withdrawn(s);
    // The ended subscription's late usage: January's −10,000 has nothing left to give back of Feb 1's refunded 11,000, so no
    // final adjustment invoice beside Jan 1's seat and Feb 1's (the old code: one of −10,000, 10,000 granted).
    const invoices = (await s.invoices()).map((i) => [i.status, i.total_amount.value]);
    t.deepEqual(
      [invoices, await ledger(s), await credited(s, window)],
      [
        [
          ["paid", "1000"],
          ["paid", "11000"],
        ],
        [],
        ["paid", "11000", "11000"],
      ],
    );
  });
}
