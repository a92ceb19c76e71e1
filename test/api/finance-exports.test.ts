/**
 * The finance exports for the documents an invoice's first export cannot show (DESIGN §15):
 * `billing credit-notes export` lists the credit notes dated in its range, one row per note line
 * with its tax and net, and `billing invoices export --by voided|uncollectible` the invoices voided
 * or written off in its range, however long after they were finalized (and exported). Through the
 * real server and the CLI on its database, on MariaDB and SQLite; figures worked out beside them.
 */
import test from "ava";
import { run as runCli } from "../../src/cli/billing.js";
import { taxRate } from "../helpers/booking-bodies.js";
import { STORES } from "../helpers/db.js";
import { CARD_FAILS_LATER, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const JAN_15 = "2026-01-15T00:00:00Z";

/** Runs the CLI against `url`; its exit code and CSV rows as objects by column. */
async function exported(url: string, args: string[]): Promise<{ code: number; rows: Record<string, string>[]; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await runCli(args, { out: (l) => (stdout += `${l}\n`), err: (l) => (stderr += `${l}\n`) }, { DATABASE_URL: url });
  const [head = "", ...records] = stdout.split("\r\n").filter((l) => l.trim() !== "");
  const names = head.split(",");
  // No cell asserted here holds a comma or a quote.
  const rows = records.map((r) =>
    Object.fromEntries(
      r
        .replace(/^\n/, "")
        .split(",")
        .map((v, i) => [names[i] as string, v]),
    ),
  );
  return { code, rows, stderr };
}

/** A subscription to 2 fixed rates (base 10,000 and support 5,000) taxed at 20%: its first invoice, paid by card. */
async function taxedInvoice(s: Scenario): Promise<Json> {
  const vat = await taxRate(s, "VAT", "20");
  const card = await s.card({
    fixed_rates: [
      { code: "base", name: "Base plan", price: { amount: { currency_code: "USD", value: "10000" } } },
      { code: "support", name: "Support", price: { amount: { currency_code: "USD", value: "5000" } } },
    ],
    default_tax_rate_ids: [vat],
  });
  await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { base: 1, support: 1 } });
  const [inv] = (await s.invoices()) as [Json];
  return inv;
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: credit-notes export: one row per note line, its tax and net, dated by the note`, async (t) => {
    const s = await Scenario.start(server, JAN_15);
    const inv = await taxedInvoice(s);
    // 10,000 + 5,000 = 15,000; tax 20%: 2,000 + 1,000 = 3,000; total 18,000.
    t.deepEqual([inv.subtotal.value, inv.total_tax.value, inv.total_amount.value], ["15000", "3000", "18000"]);
    await s.advance("2026-02-03T00:00:00Z");
    // Support credited in full (6,000 with its 1,000 tax) to the balance on Feb 3.
    const note = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "order_change", outcome: "credit_balance", lines: [{ invoice_line_index: 1, amount: "6000" }] });
    t.deepEqual([note.subtotal.value, note.total_tax.value, note.total.value], ["5000", "1000", "6000"]);

    const feb = await exported(server.db.url, ["credit-notes", "export", "--from", "2026-02-01T00:00:00Z", "--to", "2026-03-01T00:00:00Z"]);
    t.is(feb.code, 0, feb.stderr);
    const rows = feb.rows.filter((r) => r.invoice_id === inv.id);
    t.deepEqual(
      rows.map((r) => [
        r.number,
        r.status,
        r.invoice_number,
        r.created_at,
        r.reason,
        r.outcome,
        r.refund_status,
        r.line_index,
        r.invoice_line_index,
        r.line_amount,
        r.line_tax,
        r.line_net,
        r.note_subtotal,
        r.note_total_tax,
        r.note_total,
        r.note_total_major,
      ]),
      // 6,000 tax included: 1,000 tax, 5,000 net; 60.00 dollars.
      [[note.number, "issued", inv.number, "2026-02-03T00:00:00.000Z", "order_change", "credit_balance", "", "0", "1", "6000", "1000", "5000", "5000", "1000", "6000", "60.00"]],
    );
    // January's export of notes has none of it: the note is dated Feb 3, when it was booked.
    const jan = await exported(server.db.url, ["credit-notes", "export", "--from", "2026-01-01T00:00:00Z", "--to", "2026-02-01T00:00:00Z"]);
    t.is(jan.rows.filter((r) => r.invoice_id === inv.id).length, 0);
  });

  test(`${store}: invoices export --by voided / uncollectible: each invoice in the range it was voided or written off in`, async (t) => {
    const s = await Scenario.start(server, JAN_15);
    const vat = await taxRate(s, "VAT", "20");
    const fixed = (code: string, value: string) => ({ code, name: code, price: { amount: { currency_code: "USD", value } } });
    // A card that fails after the checkout: each first invoice stays open (10,000 + 20% = 12,000; 5,000 + 20% = 6,000).
    const a = await s.card({ name: "A", fixed_rates: [fixed("a", "10000")], default_tax_rate_ids: [vat] });
    const b = await s.card({ name: "B", fixed_rates: [fixed("b", "5000")], default_tax_rate_ids: [vat] });
    await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { a: 1 } }, CARD_FAILS_LATER);
    await s.subscribe({ rate_card_id: b, fixed_rate_quantities: { b: 1 } }, CARD_FAILS_LATER);
    const [ia, ib] = (await s.invoices()) as [Json, Json];
    t.deepEqual([ia.status, ia.total_amount.value, ib.status, ib.total_amount.value], ["open", "12000", "open", "6000"]);
    const finalizedBy = new Date();
    await new Promise((r) => setTimeout(r, 20));
    const voidFrom = new Date();
    await s.call("POST", `/invoices/${ia.id}/void`, {});
    await s.call("POST", `/invoices/${ib.id}/mark_uncollectible`, {});
    const to = new Date(Date.now() + 1000).toISOString();
    const range = ["--from", voidFrom.toISOString(), "--to", to];

    const voided = await exported(server.db.url, ["invoices", "export", ...range, "--by", "voided"]);
    t.is(voided.code, 0, voided.stderr);
    const mine = (r: Record<string, string>) => r.invoice_id === ia.id || r.invoice_id === ib.id;
    const rowsOf = (rows: Record<string, string>[]) =>
      rows.filter(mine).map((r) => [r.invoice_id, r.status, r.invoice_total, r.invoice_total_tax, r.voided_at !== "", r.marked_uncollectible_at !== ""]);
    // Finalized before the range: by finalization neither is in it; by void, A (12,000, 2,000 tax) only.
    t.deepEqual(rowsOf(voided.rows), [[ia.id, "void", "12000", "2000", true, false]]);
    const written = await exported(server.db.url, ["invoices", "export", ...range, "--by", "uncollectible"]);
    t.deepEqual(rowsOf(written.rows), [[ib.id, "uncollectible", "6000", "1000", false, true]]);
    const finalized = await exported(server.db.url, ["invoices", "export", ...range]);
    t.deepEqual(rowsOf(finalized.rows), []);
    t.true(new Date(ia.finalized_at ?? ia.created_at).getTime() <= finalizedBy.getTime());
    const bad = await exported(server.db.url, ["invoices", "export", ...range, "--by", "paid"]);
    t.deepEqual([bad.code, bad.stderr.split("\n")[0]], [2, "--by: paid is not one of finalized, voided, uncollectible"]);
  });

  test(`${store}: credit-notes export --by voided: a note voided with its invoice later is in the range it was voided in`, async (t) => {
    const s = await Scenario.start(server, JAN_15);
    const card = await s.card({ fixed_rates: [{ code: "base", name: "Base plan", price: { amount: { currency_code: "USD", value: "10000" } } }] });
    await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { base: 1 } }, CARD_FAILS_LATER);
    const [inv] = (await s.invoices()) as [Json];
    // Open, 10,000 due: a note lowers it by 3,000 (7,000 due), then the invoice is voided, the note with it.
    const note = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "order_change", outcome: "reduce_amount_due", amount: "3000" });
    const voidFrom = new Date();
    await s.call("POST", `/invoices/${inv.id}/void`, {});
    const range = ["--from", voidFrom.toISOString(), "--to", new Date(Date.now() + 1000).toISOString()];
    const voided = await exported(server.db.url, ["credit-notes", "export", ...range, "--by", "voided"]);
    t.is(voided.code, 0, voided.stderr);
    // Booked as undoing the note of 3,000 (its date is Jan 15, the clock's, outside the range: not listed by date).
    t.deepEqual(
      voided.rows.filter((r) => r.invoice_id === inv.id).map((r) => [r.number, r.status, r.note_total, r.voided_at !== ""]),
      [[note.number, "void", "3000", true]],
    );
    const dated = await exported(server.db.url, ["credit-notes", "export", ...range]);
    t.deepEqual(
      dated.rows.filter((r) => r.invoice_id === inv.id),
      [],
    );
    const bad = await exported(server.db.url, ["credit-notes", "export", ...range, "--by", "refunded"]);
    t.deepEqual([bad.code, bad.stderr.split("\n")[0]], [2, "--by: refunded is not one of created, voided"]);
  });

  test(`${store}: credit-notes export refuses a bad command line before opening the database (exit 2)`, async (t) => {
    const bad = await exported("mysql://nobody@127.0.0.1:1/none", ["credit-notes", "export", "--from", "2026-02-01T00:00:00Z", "--to", "2026-01-01T00:00:00Z"]);
    t.deepEqual([bad.code, bad.stderr.split("\n")[0]], [2, "--to must be after --from"]);
    const json = await exported("mysql://nobody@127.0.0.1:1/none", ["credit-notes", "export", "--from", "2026-01-01T00:00:00Z", "--to", "2026-02-01T00:00:00Z", "--json"]);
    t.is(json.code, 2);
  });
}
