/**
 * Credit notes through the REST API (DESIGN §15), on MariaDB and SQLite, on a real server: the
 * whole of an open invoice with reduce_amount_due (paid at 0 due), per line, credit_balance on a
 * paid invoice (a grant, its ledger entry, spent by the next invoice), a refund through the test
 * provider (an Idempotency-Key replay answers the same note and refunds once), bad input (400
 * naming each field, nothing written), refusals (status, outcome, over-crediting), numbers
 * PREFIX-CN-000001, -000002, and the `credit_note.created` event. Amounts in cents (USD): each
 * invoice has Seats 1000 and Support 500 (no tax, no discount).
 */
import test from "ava";
import type { ConnectError } from "@connectrpc/connect";
import { CreditNoteService } from "../../src/gen/billing/v1/credit_note_service_pb.js";
import { seats } from "../helpers/catalog-bodies.js";
import { PROTOCOLS, reasonOf, rpcClient, violatedFields } from "../helpers/clients.js";
import { creditState } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { CARD_FAILS_LATER, CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const AT = "2026-01-15T00:00:00Z";
const usd = (value: string) => ({ currency_code: "USD", value });

/** A subscription of Seats 1000 + Support 500 a month through a checkout paid with `card`; its first invoice (paid with CARD_OK, open with CARD_FAILS_LATER). */
async function firstInvoice(s: Scenario, card: string, cardBody: Json = {}): Promise<Json> {
  const rc = await s.card({ fixed_rates: [seats(1000), seats(500, "support", "Support")], ...cardBody });
  await s.subscribe({ rate_card_id: rc, fixed_rate_quantities: { seats: 1, support: 1 } }, card);
  const [inv] = await s.invoices();
  return inv;
}

const lines = (n: Json) => (n.lines as Json[]).map((l) => [l.invoice_line_index, l.description, l.amount.value, l.tax_amount.value]);
const invoiceState = async (s: Scenario, id: string) => {
  const i = await s.call("GET", `/invoices/${id}`);
  return [i.status, i.amount_due.value, i.amount_credited.value];
};

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: the whole of an open invoice, reduce_amount_due: the invoice is paid at 0 due; the note reads back and is announced`, async (t) => {
    const s = await Scenario.start(server, AT);
    const inv = await firstInvoice(s, CARD_FAILS_LATER);
    t.deepEqual([inv.status, inv.total_amount.value], ["open", "1500"]);
    const note = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "order_change", outcome: "reduce_amount_due", memo: "Cancelled order", metadata: { k: "v" } });
    t.regex(note.id, /^cn_[0-9A-Za-z]{22}$/);
    t.like(note, {
      number: "INV-CN-000001",
      invoice_id: inv.id,
      invoice_number: inv.number,
      subject_id: s.subjectId,
      reason: "order_change",
      memo: "Cancelled order",
      outcome: "reduce_amount_due",
      subtotal: usd("1500"),
      total_tax: usd("0"),
      total: usd("1500"),
      status: "issued",
      created_at: AT,
      credit_grant_id: null,
      refund_id: null,
      // The public base, as invoices' hosted URLs have it.
      pdf_url: `${new URL(inv.hosted_url).origin}/credit-notes/${note.id}/pdf`,
      metadata: { k: "v" },
    });
    t.deepEqual(lines(note), [
      [0, "Seats", "1000", "0"],
      [1, "Support", "500", "0"],
    ]);
    t.deepEqual(await s.call("GET", `/credit-notes/${note.id}`), note);
    t.deepEqual(await invoiceState(s, inv.id), ["paid", "0", "1500"]);
    const events = (await s.call("GET", "/events?limit=100")).events as Json[];
    const created = events.filter((e) => e.type === "credit_note.created");
    t.is(created.length, 1);
    t.deepEqual(created[0]?.data, note);
    const paid = events.filter((e) => e.type === "invoice.paid");
    t.deepEqual(
      paid.map((e) => [e.data.id, e.data.amount_due.value, e.data.amount_credited.value]),
      [[inv.id, "0", "1500"]],
    );
  });

  test(`${store}: per line on an open invoice: part of one line, then all of another; numbers follow; beyond a line is refused by field`, async (t) => {
    const s = await Scenario.start(server, AT);
    const inv = await firstInvoice(s, CARD_FAILS_LATER);
    const first = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "product_unsatisfactory", outcome: "reduce_amount_due", lines: [{ invoice_line_index: 1, amount: "200" }] });
    t.is(first.number, "INV-CN-000001");
    t.deepEqual(lines(first), [[1, "Support", "200", "0"]]);
    t.deepEqual(await invoiceState(s, inv.id), ["open", "1300", "200"]);
    const second = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due", lines: [{ invoice_line_index: 0 }] });
    t.is(second.number, "INV-CN-000002");
    t.deepEqual(lines(second), [[0, "Seats", "1000", "0"]]);
    t.deepEqual(await invoiceState(s, inv.id), ["open", "300", "1200"]);
    const beyond = await s.raw("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due", lines: [{ invoice_line_index: 1, amount: "301" }] });
    t.is(beyond.status, 400);
    t.deepEqual(violatedFields(beyond.body), ["lines[0].amount"]);
    const again = await s.raw("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due", lines: [{ invoice_line_index: 0 }] });
    t.deepEqual(violatedFields(again.body), ["lines[0].invoice_line_index"]);
    const byInvoice = await s.call("GET", `/credit-notes?invoice_id=${inv.id}`);
    t.deepEqual(
      byInvoice.credit_notes.map((n: Json) => n.number),
      ["INV-CN-000001", "INV-CN-000002"],
    );
    t.false(byInvoice.has_more);
    const page = await s.call("GET", `/credit-notes?subject_id=${s.subjectId}&limit=1&offset=1`);
    t.deepEqual([page.credit_notes.map((n: Json) => n.id), page.has_more], [[second.id], false]);
    t.deepEqual((await s.call("GET", "/credit-notes?subject_id=nobody")).credit_notes, []);
    t.deepEqual(await invoiceState(s, inv.id), ["open", "300", "1200"], "the refusals changed nothing");
  });

  test(`${store}: credit_balance on a paid invoice: a grant with its ledger entry, spent by the next invoice`, async (t) => {
    const s = await Scenario.start(server, AT);
    const inv = await firstInvoice(s, CARD_OK);
    t.is(inv.status, "paid");
    const note = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "duplicate", outcome: "credit_balance", amount: "600" });
    // 600 over Seats 1000 and Support 500 in proportion: 400 and 200.
    t.deepEqual(lines(note), [
      [0, "Seats", "400", "0"],
      [1, "Support", "200", "0"],
    ]);
    t.truthy(note.credit_grant_id);
    const grant = await s.call("GET", `/credit-grants/${note.credit_grant_id}`);
    t.like(grant, { subject_id: s.subjectId, amount: usd("600"), remaining_amount: usd("600"), category: "promotional", priority: 50, expires_at: null, status: "active" });
    const ledger = (await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`)).entries as Json[];
    t.deepEqual(
      ledger.map((e) => [e.entry_type, e.amount.value, e.credit_grant_id, e.invoice_id]),
      [["credit_note", "600", grant.id, inv.id]],
    );
    t.deepEqual(await invoiceState(s, inv.id), ["paid", "1500", "600"]);
    await s.advance("2026-02-15T00:00:00Z");
    const next = (await s.invoices()).at(-1) as Json;
    t.not(next.id, inv.id);
    t.deepEqual([next.total_amount.value, (next.credits_applied as Json[]).map((c) => [c.credit_grant_id, c.amount.value]), next.amount_due.value], ["1500", [[grant.id, "600"]], "900"]);
  });

  test(`${store}: credit_balance on an open invoice is refused (INVOICE_NOT_PAID naming outcome) and writes nothing: dunning then makes it uncollectible with no credit given for it`, async (t) => {
    const s = await Scenario.start(server, AT);
    await s.call("PATCH", "/payment-settings", { retry_schedule_days: [1], set_retry_schedule: true, after_last_attempt: "leave_active", mark_uncollectible: true });
    const inv = await firstInvoice(s, CARD_FAILS_LATER);
    t.deepEqual([inv.status, inv.amount_due.value], ["open", "1500"]);
    const nothing = async () => ({
      state: await invoiceState(s, inv.id),
      notes: (await s.call("GET", `/credit-notes?invoice_id=${inv.id}`)).credit_notes.length,
      grants: (await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants.length,
      ledger: (await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`)).entries.length,
    });
    const before = await nothing();
    t.deepEqual(before, { state: ["open", "1500", "0"], notes: 0, grants: 0, ledger: 0 });
    // The whole invoice (1500) and a part of it (1000): both refused, pointing to reduce_amount_due.
    for (const ask of [{}, { amount: "1000" }]) {
      const r = await s.raw("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "credit_balance", ...ask });
      t.is(r.status, 400, JSON.stringify(r.body));
      t.is(r.body.code, "failed_precondition");
      t.is(reasonOf(r.body), "INVOICE_NOT_PAID");
      t.deepEqual(violatedFields(r.body), ["outcome"]);
      t.regex(String(r.body.message), /^outcome: credit_balance cannot credit invoice .* is open, not paid yet .*outcome reduce_amount_due instead/);
    }
    const err = await t.throwsAsync(rpcClient(CreditNoteService, server.url, "connect", s.key).createCreditNote({ invoiceId: inv.id, reason: "other", outcome: "credit_balance" }));
    t.regex((err as ConnectError).rawMessage, /^outcome: credit_balance cannot credit invoice/);
    t.deepEqual(await nothing(), before, "nothing written");
    // The charge is retried a day later and fails again: uncollectible, and no credit on the balance for it.
    await s.advance("2026-01-17T00:00:00Z");
    t.deepEqual(await nothing(), { ...before, state: ["uncollectible", "1500", "0"] });
    t.deepEqual(await creditState(s), ["0", "0"]);
  });

  test(`${store}: a refund through the test provider; a replay with the same Idempotency-Key answers the same note and refunds once`, async (t) => {
    const s = await Scenario.start(server, AT);
    const inv = await firstInvoice(s, CARD_OK);
    const send = () =>
      fetch(`${server.url}/credit-notes`, {
        method: "POST",
        headers: { "x-api-key": s.key, "content-type": "application/json", "idempotency-key": "refund-once" },
        body: JSON.stringify({ invoice_id: inv.id, reason: "fraudulent", outcome: "refund", amount: "1000" }),
      });
    const first = await send();
    const second = await send();
    t.is(first.status, 200);
    t.is(second.headers.get("idempotent-replayed"), "true");
    const note = await first.json();
    t.deepEqual(await second.json(), note);
    t.regex(note.refund_id, /^re_test_/);
    t.like(note, { outcome: "refund", total: usd("1000"), credit_grant_id: null });
    t.deepEqual(await invoiceState(s, inv.id), ["paid", "1500", "1000"]);
    // The provider refunded 1000 of the 1500 charged: the 500 left can still be refunded (it could not after a second 1000).
    const rest = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "fraudulent", outcome: "refund" });
    t.like(rest, { number: "INV-CN-000002", total: usd("500") });
    t.not(rest.refund_id, note.refund_id);
    t.is((await s.call("GET", `/credit-notes?invoice_id=${inv.id}`)).credit_notes.length, 2);
  });

  test(`${store}: bad input is a 400 naming each field, and writes nothing`, async (t) => {
    const s = await Scenario.start(server, AT);
    const inv = await firstInvoice(s, CARD_FAILS_LATER);
    const cases: [Json, string[]][] = [
      [{ invoice_id: "", reason: "because", outcome: "cash" }, ["invoice_id", "reason", "outcome"]],
      [{ invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due", amount: "12.5" }, ["amount"]],
      [{ invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due", amount: "0" }, ["amount"]],
      [{ invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due", amount: "10", lines: [{ invoice_line_index: 0 }] }, ["amount"]],
      [
        { invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due", lines: [{ invoice_line_index: 0, amount: "-5" }, { invoice_line_index: 0 }] },
        ["lines[0].amount", "lines[1].invoice_line_index"],
      ],
      [{ invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due", lines: [{ invoice_line_index: 2 }] }, ["lines[0].invoice_line_index"]],
    ];
    for (const [body, fields] of cases) {
      const r = await s.raw("POST", "/credit-notes", body);
      t.is(r.status, 400, JSON.stringify(body));
      t.is(r.body.code, "invalid_argument");
      t.deepEqual(violatedFields(r.body), fields, JSON.stringify(body));
    }
    const missing = await s.raw("POST", "/credit-notes", { invoice_id: "inv_nope", reason: "other", outcome: "refund" });
    t.is(missing.status, 404);
    t.is((await s.raw("GET", "/credit-notes/cn_nope")).status, 404);
    t.deepEqual((await s.call("GET", `/credit-notes?invoice_id=${inv.id}`)).credit_notes, []);
    t.deepEqual(await invoiceState(s, inv.id), ["open", "1500", "0"]);
  });

  test(`${store}: refusals: over-crediting, an outcome the invoice's status does not allow, an invoice neither open nor paid`, async (t) => {
    const s = await Scenario.start(server, AT);
    const open = await firstInvoice(s, CARD_FAILS_LATER);
    const refuse = async (body: Json, reason: string) => {
      const r = await s.raw("POST", "/credit-notes", { reason: "other", ...body });
      t.is(r.status, 400, JSON.stringify(body));
      t.is(r.body.code, "failed_precondition");
      t.is(reasonOf(r.body), reason, JSON.stringify(body));
    };
    await refuse({ invoice_id: open.id, outcome: "reduce_amount_due", amount: "1501" }, "CREDIT_EXCEEDS_INVOICE");
    await refuse({ invoice_id: open.id, outcome: "refund" }, "INVOICE_NOT_REFUNDABLE");
    await refuse({ invoice_id: open.id, outcome: "credit_balance" }, "INVOICE_NOT_PAID");
    await s.call("POST", "/credit-notes", { invoice_id: open.id, reason: "other", outcome: "reduce_amount_due", amount: "1000" });
    await refuse({ invoice_id: open.id, outcome: "reduce_amount_due", amount: "501" }, "CREDIT_EXCEEDS_INVOICE");
    t.deepEqual(await invoiceState(s, open.id), ["open", "500", "1000"]); // 1500 − 1000 = 500 due
    // The 500 left lowers the amount due to 0: paid, and nothing is left to credit another way.
    await s.call("POST", "/credit-notes", { invoice_id: open.id, reason: "other", outcome: "reduce_amount_due" });
    t.deepEqual(await invoiceState(s, open.id), ["paid", "0", "1500"]);
    await refuse({ invoice_id: open.id, outcome: "credit_balance" }, "CREDIT_EXCEEDS_INVOICE");

    const paid = await Scenario.start(server, AT);
    const paidInvoice = await firstInvoice(paid, CARD_OK);
    const notOpen = await paid.raw("POST", "/credit-notes", { invoice_id: paidInvoice.id, reason: "other", outcome: "reduce_amount_due" });
    t.is(reasonOf(notOpen.body), "INVOICE_NOT_OPEN");

    const other = await Scenario.start(server, AT);
    const voided = await firstInvoice(other, CARD_FAILS_LATER);
    await other.call("POST", `/invoices/${voided.id}/void`, {});
    const r = await other.raw("POST", "/credit-notes", { invoice_id: voided.id, reason: "other", outcome: "credit_balance" });
    t.is(reasonOf(r.body), "INVOICE_NOT_CREDITABLE");
    const foreign = await other.raw("GET", `/credit-notes?invoice_id=${open.id}`);
    t.deepEqual(foreign.body.credit_notes, [], "another environment sees none");
  });

  test(`${store}: Connect, gRPC and gRPC-Web issue, read and list the same notes, and name the same fields`, async (t) => {
    const s = await Scenario.start(server, AT);
    const inv = await firstInvoice(s, CARD_OK);
    for (const [i, protocol] of PROTOCOLS.entries()) {
      const client = rpcClient(CreditNoteService, server.url, protocol, s.key);
      const made = await client.createCreditNote({ invoiceId: inv.id, reason: "other", outcome: "credit_balance", amount: "100" });
      t.like(made.creditNote, { number: `INV-CN-00000${i + 1}`, total: { currencyCode: "USD", value: "100" }, outcome: "credit_balance" }, protocol);
      const read = await client.getCreditNote({ creditNoteId: made.creditNote?.id ?? "" });
      t.is(read.creditNote?.id, made.creditNote?.id, protocol);
      const listed = await client.listCreditNotes({ invoiceId: inv.id });
      t.is(listed.creditNotes.length, i + 1, protocol);
      const err = await t.throwsAsync(client.createCreditNote({ invoiceId: inv.id, reason: "other", outcome: "credit_balance", lines: [{ invoiceLineIndex: 5 }] }));
      t.regex((err as ConnectError).rawMessage, /lines\[0\]\.invoice_line_index/, protocol);
    }
    t.is((await s.call("GET", `/invoices/${inv.id}`)).amount_credited.value, String(100 * PROTOCOLS.length));
  });

  test(`${store}: a taxed invoice: each credited line's tax part in proportion; the environment's prefix numbers the notes`, async (t) => {
    const s = await Scenario.start(server, AT);
    await s.call("PATCH", "/invoice-settings", { number_prefix: "ACME" });
    const vat = await s.call("POST", "/tax-rates", { display_name: "VAT DE", percentage: "19", country: "DE" });
    await s.call("PUT", `/subjects/${s.subjectId}`, { billing_details: { address: { country: "DE" } } });
    const inv = await firstInvoice(s, CARD_OK, { default_tax_rate_ids: [vat.id] });
    // Seats 1000 + 190 VAT, Support 500 + 95 VAT.
    t.deepEqual([inv.number, inv.total_amount.value, inv.total_tax.value], ["ACME-000001", "1785", "285"]);
    const part = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "credit_balance", lines: [{ invoice_line_index: 0, amount: "595" }] });
    t.like(part, { number: "ACME-CN-000001", invoice_number: "ACME-000001", subtotal: usd("500"), total_tax: usd("95"), total: usd("595") });
    t.deepEqual(lines(part), [[0, "Seats", "595", "95"]]);
    t.is((await s.call("GET", `/credit-grants/${part.credit_grant_id}`)).amount.value, "595", "the grant is the note's total, tax included");
    const rest = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "credit_balance" });
    t.like(rest, { number: "ACME-CN-000002", subtotal: usd("1000"), total_tax: usd("190"), total: usd("1190") });
    t.deepEqual(lines(rest), [
      [0, "Seats", "595", "95"],
      [1, "Support", "595", "95"],
    ]);
    t.deepEqual(await invoiceState(s, inv.id), ["paid", "1785", "1785"]);
  });
}
