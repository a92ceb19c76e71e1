/**
 * Taxes through the REST API (DESIGN §15), on MariaDB and SQLite: tax rates (create, get, list
 * with the archived filter, archive) and bad input; billing details on subjects (create, update,
 * clear, validation with full paths); rate cards' default tax rates; invoice settings; and
 * invoices taxed end to end: exclusive rates by the buyer's country, a reverse-charge buyer, an
 * inclusive rate. Amounts in cents (USD).
 */
import test from "ava";
import type { ConnectError } from "@connectrpc/connect";
import { InvoiceService } from "../../src/gen/billing/v1/invoice_service_pb.js";
import { SubjectService } from "../../src/gen/billing/v1/subject_service_pb.js";
import { TaxRateService } from "../../src/gen/billing/v1/tax_rate_service_pb.js";
import { PROTOCOLS, rpcClient, violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { type TestServer, useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const AT = "2026-01-15T00:00:00Z";
const usd = (value: string) => ({ currency_code: "USD", value });
const base = (amount: string) => ({ fixed_rates: [{ code: "base", name: "Base", price: { price_type: "flat", amount: usd(amount) } }] });

async function rate(s: Scenario, body: Json): Promise<Json> {
  return s.call("POST", "/tax-rates", body);
}

/** What a 400 names, or a failure naming the status. */
async function fieldsOf(s: Scenario, method: string, path: string, body: unknown): Promise<string[] | string> {
  const r = await s.raw(method, path, body);
  return r.status === 400 ? violatedFields(r.body as Json) : `status ${r.status}: ${JSON.stringify(r.body)}`;
}

/** The subject's first invoice after subscribing to `card` with a card on file (a paid checkout). */
async function firstInvoice(s: Scenario, card: string): Promise<Json> {
  const r = await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { base: 1 }, create_checkout_session: "always" });
  if (!String(r.result_type).startsWith("success")) throw new Error(`not subscribed: ${JSON.stringify(r)}`);
  const invoices = await s.call("GET", `/invoices?subject_id=${s.subjectId}`);
  return invoices.invoices[0];
}

/** The dashboard page at `path` as its reader sees it (signed in with `key`): tags dropped, white space collapsed. */
async function dashboardText(server: TestServer, key: string, path: string): Promise<string> {
  const jar = new Map<string, string>();
  const keep = (res: Response) => {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";") as [string];
      jar.set(pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1));
    }
    return res;
  };
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join("; ");
  const form = await keep(await fetch(`${server.url}/dashboard/sign-in`, { redirect: "manual" })).text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(form)?.[1] ?? "";
  keep(
    await fetch(`${server.url}/dashboard/sign-in`, {
      method: "POST",
      headers: { cookie: cookie(), "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ csrf, api_key: key }).toString(),
      redirect: "manual",
    }),
  );
  const page = await fetch(`${server.url}${path}`, { headers: { cookie: cookie() }, redirect: "manual" });
  if (page.status !== 200) throw new Error(`${path}: ${page.status}`);
  return (await page.text())
    .replace(/<[^>]+>/g, " ")
    .replace(/&#39;/g, "'")
    .replace(/\s+/g, " ");
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: tax rates are created, read, listed by archived and archived once`, async (t) => {
    const s = await Scenario.start(server, AT);
    const vat = await rate(s, { display_name: "VAT", percentage: "19", inclusive: false, country: "de", metadata: { k: "v" } });
    t.regex(vat.id, /^txr_[0-9A-Za-z]{22}$/);
    t.like(vat, { display_name: "VAT", percentage: "19", inclusive: false, country: "DE", region: null, description: null, archived: false, metadata: { k: "v" } });
    t.false(Number.isNaN(Date.parse(vat.created_at)), "created at the environment's real time (a rate has no test clock)");
    const sales = await rate(s, { display_name: "Sales tax", percentage: 8.875, inclusive: false, country: "US", region: "ny", description: "NYC" });
    t.like(sales, { percentage: "8.875", region: "NY", description: "NYC" });
    const any = await rate(s, { display_name: "Flat", percentage: "0.0001", inclusive: true });
    t.like(any, { percentage: "0.0001", inclusive: true, country: null });
    t.deepEqual(await s.call("GET", `/tax-rates/${vat.id}`), vat);
    const archived = await s.call("POST", `/tax-rates/${sales.id}/archive`, {});
    t.true(archived.archived);
    t.deepEqual(await s.call("POST", `/tax-rates/${sales.id}/archive`, {}), archived, "archiving twice changes nothing");
    const ids = async (q: string) => ((await s.call("GET", `/tax-rates${q}`)).tax_rates as Json[]).map((r) => r.id);
    t.deepEqual(await ids(""), [vat.id, sales.id, any.id]);
    t.deepEqual(await ids("?archived=true"), [sales.id]);
    t.deepEqual(await ids("?archived=false"), [vat.id, any.id]);
    const page = await s.call("GET", "/tax-rates?limit=1&offset=1");
    t.deepEqual([page.tax_rates.map((r: Json) => r.id), page.has_more], [[sales.id], true]);
    t.is((await s.raw("GET", "/tax-rates/txr_nope")).status, 404);
    t.is((await s.raw("POST", "/tax-rates/txr_nope/archive", {})).status, 404);
    // Another environment's rate is not found.
    const other = await Scenario.start(server, AT);
    t.is((await other.raw("GET", `/tax-rates/${vat.id}`)).status, 404);
  });

  test(`${store}: a bad tax rate is a 400 naming each field, nothing written`, async (t) => {
    const s = await Scenario.start(server, AT);
    t.deepEqual(await fieldsOf(s, "POST", "/tax-rates", { display_name: "", percentage: "100.5", country: "XX", metadata: {} }), ["display_name", "percentage", "country"]);
    t.deepEqual(await fieldsOf(s, "POST", "/tax-rates", { display_name: "x".repeat(51), percentage: "19.12345", region: "CA" }), ["display_name", "percentage", "region"]);
    t.deepEqual(await fieldsOf(s, "POST", "/tax-rates", { display_name: "VAT", percentage: "-1" }), ["percentage"]);
    t.deepEqual(await fieldsOf(s, "POST", "/tax-rates", { display_name: "VAT", percentage: "abc" }), ["percentage"]);
    t.deepEqual(await fieldsOf(s, "POST", "/tax-rates", { display_name: "VAT" }), ["percentage"]);
    t.deepEqual((await s.call("GET", "/tax-rates")).tax_rates, []);
    t.like(await rate(s, { display_name: "x".repeat(50), percentage: "100" }), { percentage: "100" });
  });

  test(`${store}: billing details are set on create, replaced and cleared on update, null when never set`, async (t) => {
    const s = await Scenario.start(server, AT);
    t.is((await s.call("GET", `/subjects/${s.subjectId}`)).billing_details, null);
    const vat = await rate(s, { display_name: "VAT", percentage: "19", country: "DE" });
    const details = {
      legal_name: "Acme GmbH",
      email: "billing@acme.example",
      address: { line1: "Hauptstr. 1", city: "Berlin", postal_code: "10115", country: "de" },
      tax_ids: [
        { type: "eu_vat", value: "de 123.456.789" },
        { type: "au_abn", value: "51 824 753 556" },
      ],
      tax_rate_ids: [vat.id],
    };
    const created = await s.call("POST", "/subjects", { name: "Acme", billing_details: details });
    t.deepEqual(created.billing_details, {
      legal_name: "Acme GmbH",
      email: "billing@acme.example",
      address: { line1: "Hauptstr. 1", line2: null, city: "Berlin", postal_code: "10115", state: null, country: "DE" },
      tax_ids: [
        { type: "eu_vat", value: "DE123456789" },
        { type: "au_abn", value: "51824753556" },
      ],
      tax_exempt: "none",
      tax_rate_ids: [vat.id],
    });
    t.deepEqual((await s.call("GET", `/subjects/${created.id}`)).billing_details, created.billing_details);
    const shown = await dashboardText(server, s.key, `/dashboard/subjects/${created.id}`);
    for (const part of ["Acme GmbH", "Hauptstr. 1", "10115 Berlin", "DE123456789 (eu_vat)", "51824753556 (au_abn)", "none (taxed)", vat.id]) t.true(shown.includes(part), part);
    // Replaced whole; other fields left alone.
    const updated = await s.call("PUT", `/subjects/${created.id}`, { billing_details: { address: { country: "FR" }, tax_exempt: "reverse" } });
    t.like(updated, { name: "Acme" });
    t.deepEqual(updated.billing_details, {
      legal_name: null,
      email: null,
      address: { line1: null, line2: null, city: null, postal_code: null, state: null, country: "FR" },
      tax_ids: [],
      tax_exempt: "reverse",
      tax_rate_ids: [],
    });
    t.deepEqual((await s.call("PUT", `/subjects/${created.id}`, { name: "Acme SAS" })).billing_details, updated.billing_details, "not named: unchanged");
    t.deepEqual((await s.call("GET", `/subjects?limit=100`)).subjects.find((x: Json) => x.id === created.id).billing_details, updated.billing_details);
    const page = await dashboardText(server, s.key, `/dashboard/subjects/${created.id}`);
    for (const shown of ["Billing details", "Legal name", "FR", "reverse charge"]) t.true(page.includes(shown), shown);
    t.true((await dashboardText(server, s.key, `/dashboard/subjects/${s.subjectId}`)).includes("None set"));
    t.is((await s.call("PUT", `/subjects/${created.id}`, { billing_details: null })).billing_details, null, "null clears them");
    t.is((await s.call("GET", `/subjects/${created.id}`)).billing_details, null);
  });

  test(`${store}: bad billing details are a 400 naming the full path, nothing written`, async (t) => {
    const s = await Scenario.start(server, AT);
    const archived = await rate(s, { display_name: "Old", percentage: "5" });
    await s.call("POST", `/tax-rates/${archived.id}/archive`, {});
    const active = await rate(s, { display_name: "VAT", percentage: "19" });
    const bad = {
      legal_name: "x".repeat(256),
      email: "not-an-email",
      address: { city: "Nowhere", country: "ZZ" },
      tax_ids: [
        { type: "eu_vat", value: "DE12345678" },
        { type: "eu_vat", value: "US123456789" },
        { type: "gb_vat", value: "GB12345" },
        { type: "au_abn", value: "51 824 753 557" },
        { type: "vat", value: "1" },
        { type: "other", value: "" },
      ],
      tax_exempt: "maybe",
      tax_rate_ids: [active.id, "txr_nope", archived.id, active.id],
    };
    t.deepEqual(await fieldsOf(s, "POST", "/subjects", { name: "Bad", billing_details: bad }), [
      "billing_details.tax_ids[0].value",
      "billing_details.tax_ids[1].value",
      "billing_details.tax_ids[2].value",
      "billing_details.tax_ids[3].value",
      "billing_details.tax_ids[4].type",
      "billing_details.tax_ids[5].value",
      "billing_details.tax_exempt",
      "billing_details.legal_name",
      "billing_details.email",
      "billing_details.address.country",
      "billing_details.tax_rate_ids[1]",
      "billing_details.tax_rate_ids[2]",
      "billing_details.tax_rate_ids[3]",
    ]);
    t.deepEqual(await fieldsOf(s, "PUT", `/subjects/${s.subjectId}`, { billing_details: { address: { line1: "x" } } }), ["billing_details.address.country"]);
    t.is((await s.call("GET", `/subjects/${s.subjectId}`)).billing_details, null);
    const subjects = (await s.call("GET", "/subjects?limit=100")).subjects as Json[];
    t.false(subjects.some((x) => x.name === "Bad"));
  });

  test(`${store}: a rate card's default tax rates: set on create, replaced, checked`, async (t) => {
    const s = await Scenario.start(server, AT);
    const de = await rate(s, { display_name: "VAT DE", percentage: "19", country: "DE" });
    const fr = await rate(s, { display_name: "VAT FR", percentage: "20", country: "FR" });
    const card = await s.call("POST", "/rate-cards", { billing_interval: "monthly", name: "Plan", ...base("10000"), default_tax_rate_ids: [de.id, fr.id] });
    t.deepEqual(card.default_tax_rate_ids, [de.id, fr.id]);
    t.deepEqual((await s.call("GET", `/rate-cards/${card.id}`)).default_tax_rate_ids, [de.id, fr.id]);
    const plain = await s.call("POST", "/rate-cards", { billing_interval: "monthly", name: "Plain", ...base("100") });
    t.deepEqual(plain.default_tax_rate_ids, []);
    const set = await s.call("POST", `/rate-cards/${card.id}/default_tax_rates`, { tax_rate_ids: [fr.id] });
    t.deepEqual(set.default_tax_rate_ids, [fr.id]);
    t.deepEqual((await s.call("GET", `/rate-cards/${card.id}`)).default_tax_rate_ids, [fr.id]);
    await s.call("POST", `/tax-rates/${de.id}/archive`, {});
    t.deepEqual(await fieldsOf(s, "POST", `/rate-cards/${card.id}/default_tax_rates`, { tax_rate_ids: [de.id, "txr_nope", fr.id, fr.id] }), ["tax_rate_ids[0]", "tax_rate_ids[1]", "tax_rate_ids[3]"]);
    t.deepEqual(await fieldsOf(s, "POST", "/rate-cards", { billing_interval: "monthly", name: "Bad", ...base("100"), default_tax_rate_ids: [fr.id, de.id] }), ["default_tax_rate_ids[1]"]);
    t.is((await s.raw("POST", "/rate-cards/rc_nope/default_tax_rates", { tax_rate_ids: [] })).status, 404);
    t.deepEqual((await s.call("POST", `/rate-cards/${card.id}/default_tax_rates`, { tax_rate_ids: [] })).default_tax_rate_ids, []);
  });

  test(`${store}: invoice settings: defaults, a new prefix and seller, bad input`, async (t) => {
    const s = await Scenario.start(server, AT);
    t.deepEqual(await s.call("GET", "/invoice-settings"), { number_prefix: "INV", next_invoice_sequence: "1", seller: null });
    const seller = { legal_name: "Seller Ltd", address: { line1: "1 Main St", city: "Dublin", country: "ie" }, tax_id: "IE1234567T", email: "ar@seller.example", footer: "IBAN IE00 0000" };
    const updated = await s.call("PATCH", "/invoice-settings", { number_prefix: "ACME-2026", seller });
    t.deepEqual(updated, {
      number_prefix: "ACME-2026",
      next_invoice_sequence: "1",
      seller: { ...seller, address: { line1: "1 Main St", line2: null, city: "Dublin", postal_code: null, state: null, country: "IE" } },
    });
    t.deepEqual(await s.call("GET", "/invoice-settings"), updated);
    t.deepEqual(await s.call("PATCH", "/invoice-settings", { number_prefix: "B" }), { ...updated, number_prefix: "B" }, "the seller left out is unchanged");
    t.deepEqual(await fieldsOf(s, "PATCH", "/invoice-settings", { number_prefix: "acme", seller: { address: { country: "XX" }, email: "nope", footer: "x".repeat(501) } }), [
      "number_prefix",
      "seller.address.country",
      "seller.email",
      "seller.footer",
    ]);
    t.deepEqual(await fieldsOf(s, "PATCH", "/invoice-settings", { number_prefix: "ABCDEFGHIJKLM" }), ["number_prefix"]);
    t.deepEqual(await fieldsOf(s, "PATCH", "/invoice-settings", { number_prefix: "" }), ["number_prefix"]);
    t.like(await s.call("GET", "/invoice-settings"), { number_prefix: "B" });
  });

  test(`${store}: Connect, gRPC and gRPC-Web serve tax rates, billing details (with update_mask) and invoice settings`, async (t) => {
    const s = await Scenario.start(server, AT);
    for (const protocol of PROTOCOLS) {
      const rates = rpcClient(TaxRateService, server.url, protocol, s.key);
      const made = await rates.createTaxRate({ displayName: "VAT", percentage: "20.5", country: "fr" });
      t.like(made.taxRate, { percentage: "20.5", country: "FR", archived: false }, protocol);
      t.is((await rates.archiveTaxRate({ taxRateId: made.taxRate?.id ?? "" })).taxRate?.archived, true, protocol);
      const err = await t.throwsAsync(rates.createTaxRate({ displayName: "VAT", percentage: "101" }));
      t.regex((err as ConnectError).rawMessage, /percentage/, protocol);
      const subjects = rpcClient(SubjectService, server.url, protocol, s.key);
      const set = await subjects.updateSubject({ subjectId: s.subjectId, billingDetails: { address: { country: "DE" }, taxExempt: "exempt", taxIds: [], taxRateIds: [] } });
      t.like(set.subject?.billingDetails, { taxExempt: "exempt", address: { country: "DE" } }, protocol);
      // Named in the mask and absent: cleared.
      const cleared = await subjects.updateSubject({ subjectId: s.subjectId, updateMask: { paths: ["billing_details"] } });
      t.is(cleared.subject?.billingDetails, undefined, protocol);
      const invoices = rpcClient(InvoiceService, server.url, protocol, s.key);
      const settings = await invoices.updateInvoiceSettings({ numberPrefix: `P-${protocol.toUpperCase()}` });
      t.like(settings.invoiceSettings, { numberPrefix: `P-${protocol.toUpperCase()}`, nextInvoiceSequence: 1n }, protocol);
      t.is((await invoices.getInvoiceSettings({})).invoiceSettings?.numberPrefix, `P-${protocol.toUpperCase()}`, protocol);
    }
  });

  test(`${store}: a buyer in DE on a card with DE and FR VAT pays 19% on top; the invoice is numbered and names both parties`, async (t) => {
    const s = await Scenario.start(server, AT);
    await s.call("PATCH", "/invoice-settings", { number_prefix: "ACME", seller: { legal_name: "Seller Ltd", address: { country: "IE" }, tax_id: "IE1234567T" } });
    const de = await rate(s, { display_name: "VAT DE", percentage: "19", country: "DE" });
    const fr = await rate(s, { display_name: "VAT FR", percentage: "20", country: "FR" });
    const card = await s.card({ ...base("10000"), default_tax_rate_ids: [de.id, fr.id] });
    await s.call("PUT", `/subjects/${s.subjectId}`, { billing_details: { legal_name: "Kunde GmbH", address: { country: "DE" }, tax_ids: [{ type: "eu_vat", value: "DE123456789" }] } });
    const inv = await firstInvoice(s, card);
    t.like(inv, { number: "ACME-000001", subtotal: usd("10000"), total_tax: usd("1900"), total_amount: usd("11900"), customer_name: "Customer", notes: [] });
    const tax = { tax_rate_id: de.id, display_name: "VAT DE", percentage: "19", inclusive: false, taxable_amount: usd("10000"), amount: usd("1900") };
    t.deepEqual(inv.tax_amounts, [tax]);
    t.deepEqual(
      inv.line_items.map((l: Json) => l.tax_amounts),
      [[tax]],
    );
    t.like(inv.customer, { legal_name: "Kunde GmbH", address: { country: "DE" }, tax_ids: [{ type: "eu_vat", value: "DE123456789" }] });
    t.like(inv.seller, { legal_name: "Seller Ltd", address: { country: "IE" }, tax_id: "IE1234567T" });
    t.like(await s.call("GET", "/invoice-settings"), { number_prefix: "ACME", next_invoice_sequence: "2" });
  });

  test(`${store}: a reverse-charge buyer is not taxed and its invoice carries the legal note`, async (t) => {
    const s = await Scenario.start(server, AT);
    const de = await rate(s, { display_name: "VAT DE", percentage: "19", country: "DE" });
    const card = await s.card({ ...base("10000"), default_tax_rate_ids: [de.id] });
    await s.call("PUT", `/subjects/${s.subjectId}`, { billing_details: { address: { country: "DE" }, tax_exempt: "reverse" } });
    const inv = await firstInvoice(s, card);
    t.like(inv, { number: "INV-000001", total_tax: usd("0"), total_amount: usd("10000"), tax_amounts: [] });
    t.is(inv.notes.length, 1);
    t.regex(inv.notes[0], /^Reverse charge/);
  });

  test(`${store}: an inclusive rate of 20% on 12000 is 2000 of tax inside a total of 12000`, async (t) => {
    const s = await Scenario.start(server, AT);
    const vat = await rate(s, { display_name: "VAT", percentage: "20", inclusive: true });
    const card = await s.card(base("12000"));
    await s.call("PUT", `/subjects/${s.subjectId}`, { billing_details: { address: { country: "GB" }, tax_rate_ids: [vat.id] } });
    const inv = await firstInvoice(s, card);
    t.like(inv, { total_tax: usd("2000"), total_amount: usd("12000") });
    t.like(inv.tax_amounts, [{ tax_rate_id: vat.id, inclusive: true, amount: usd("2000") }]);
  });
}
