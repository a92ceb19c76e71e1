/**
 * Voiding an open invoice voids its credit notes with it (DESIGN §15): its reduce_amount_due notes
 * only lowered what it asked, and the void cancels all of it, so that the books reverse it once. The
 * old code left the note issued: +10000 invoiced, −3000 (the note), −10000 (the void) = −3000 where
 * 0 is right. Through the real server (REST), on MariaDB and SQLite. Amounts in cents (USD).
 */
import test from "ava";
import { seats } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { CARD_FAILS_LATER, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const AT = "2026-01-15T00:00:00Z";

/** A subscription of Seats 10000 a month whose first invoice is open (the card fails later). */
async function openInvoice(s: Scenario): Promise<Json> {
  const rc = await s.card({ fixed_rates: [seats(10000)] });
  await s.subscribe({ rate_card_id: rc, fixed_rate_quantities: { seats: 1 } }, CARD_FAILS_LATER);
  const [inv] = await s.invoices();
  return inv;
}

const state = (i: Json) => [i.status, i.total_amount.value, i.amount_due.value, i.amount_credited.value];
const note = (n: Json) => [n.number, n.outcome, n.total.value, n.status];

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: an open invoice of 10000 with a reduce_amount_due note of 3000, voided: the note is void too; the books net 0`, async (t) => {
    const s = await Scenario.start(server, AT);
    const inv = await openInvoice(s);
    t.deepEqual(state(inv), ["open", "10000", "10000", "0"]);
    const cn = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "order_change", outcome: "reduce_amount_due", amount: "3000" });
    // 10000 − 3000 = 7000 due; 3000 credited.
    t.deepEqual(state(await s.call("GET", `/invoices/${inv.id}`)), ["open", "10000", "7000", "3000"]);
    const voided = await s.call("POST", `/invoices/${inv.id}/void`, {});
    // The void cancels the invoice whole: +10000 − 10000 = 0, the note (−3000) void with it, amount_credited 3000 − 3000 = 0.
    // The old code: the note stayed issued, +10000 − 3000 − 10000 = −3000, amount_credited 3000.
    t.is(voided.status, "void");
    t.is(voided.amount_credited.value, "0");
    // What the note took off amount_due goes back with it: total 10000 − credits applied 0 = 10000, as an invoice voided
    // without notes keeps (the old code: 7000 due on a void invoice that nothing credits).
    t.deepEqual(state(voided), ["void", "10000", "10000", "0"]);
    t.deepEqual(state(await s.call("GET", `/invoices/${inv.id}`)), ["void", "10000", "10000", "0"]);
    t.deepEqual(note(await s.call("GET", `/credit-notes/${cn.id}`)), ["INV-CN-000001", "reduce_amount_due", "3000", "void"]);
    const listed = await s.call("GET", `/credit-notes?invoice_id=${inv.id}`);
    t.deepEqual(listed.credit_notes.map(note), [["INV-CN-000001", "reduce_amount_due", "3000", "void"]]);
    // What the issued notes still credit of the invoice: nothing.
    const issued = listed.credit_notes.filter((n: Json) => n.status === "issued");
    t.is(
      issued.reduce((a: number, n: Json) => a + Number(n.total.value), 0),
      0,
    );
    // A voided invoice takes no note.
    const again = await s.raw("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due" });
    t.is(again.status, 400);
  });

  test(`${store}: an open invoice with no credit note voids as before`, async (t) => {
    const s = await Scenario.start(server, AT);
    const inv = await openInvoice(s);
    const voided = await s.call("POST", `/invoices/${inv.id}/void`, {});
    t.deepEqual(state(voided), ["void", "10000", voided.amount_due.value, "0"]);
    t.deepEqual((await s.call("GET", `/credit-notes?invoice_id=${inv.id}`)).credit_notes, []);
  });
}
