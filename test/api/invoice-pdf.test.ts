/**
 * Invoice PDFs (DESIGN §15) through the real server, on MariaDB and SQLite: GET /invoices/{id}/pdf
 * with the API key is a PDF whose text (pdftotext -layout) has the number, the parties, each line
 * and the totals as the hosted page prints them; JPY and KWD amounts with 0 and 3 decimals; A4 and
 * Letter differ in page size (pdfinfo); the same invoice twice gives the same bytes; a draft is
 * 400, no key 401, an unknown or other environment's ID 404; the hosted token's PDF needs no key.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { STORES } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const AT = "2026-01-15T00:00:00Z";
const dir = mkdtempSync(join(tmpdir(), "invoice-pdf-"));
let files = 0;

/** Runs a poppler tool on the PDF's bytes. */
function poppler(tool: "pdftotext" | "pdfinfo", pdf: Buffer): string {
  const file = join(dir, `${files++}.pdf`);
  writeFileSync(file, pdf);
  return execFileSync(tool, tool === "pdftotext" ? ["-layout", file, "-"] : [file], { encoding: "utf8" });
}

async function get(url: string, key?: string): Promise<{ status: number; type: string | null; disposition: string | null; body: Buffer }> {
  const res = await fetch(url, { headers: key ? { "x-api-key": key } : {} });
  return { status: res.status, type: res.headers.get("content-type"), disposition: res.headers.get("content-disposition"), body: Buffer.from(await res.arrayBuffer()) };
}

/** A paid invoice of one fixed charge of `value` smallest units of `currency` (a checkout puts the card on file); the invoice's JSON. */
async function invoiceOf(s: Scenario, currency: string, value: string, name = "Base plan"): Promise<Json> {
  const card = await s.card({ fixed_rates: [{ code: "base", name, price: { amount: { currency_code: currency, value } } }] });
  await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { base: 1 }, create_checkout_session: "always" }, CARD_OK);
  return (await s.invoices()).at(-1) as Json;
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a finalized invoice's PDF has its number, parties, lines and totals as the hosted page shows them`, async (t) => {
    const s = await Scenario.start(server, AT);
    const inv = await invoiceOf(s, "USD", "11900");
    t.regex(inv.number, /^INV-\d{6}$/);
    t.is(new URL(inv.pdf_url).pathname, `/invoices/${inv.id}/pdf`);
    const r = await get(`${server.url}/invoices/${inv.id}/pdf`, s.key);
    t.is(r.status, 200);
    t.is(r.type, "application/pdf");
    t.is(r.disposition, `inline; filename="${inv.number}.pdf"`);
    t.is(r.body.subarray(0, 5).toString(), "%PDF-");
    const text = poppler("pdftotext", r.body);
    const hosted = await (await fetch(`${server.url}${new URL(inv.hosted_url).pathname}`)).text();
    t.true(hosted.includes("USD 119.00"), "the hosted page prints the total so");
    for (const want of ["Invoice", inv.number, "Bill to", "Customer", "Base plan", "USD 119.00", "Subtotal", "Total", "Amount due", `Issued ${inv.finalized_at.slice(0, 10)}`]) {
      t.true(text.includes(want), `the PDF's text has ${want}:\n${text}`);
    }
    t.regex(text, /Total\s+USD 119\.00/);
    t.regex(text, /Amount due\s+USD 119\.00/);
    t.regex(text, /Base plan\s+1\s+USD 119\.00\s+USD 119\.00/);
  });

  test(`${store}: JPY and KWD amounts are printed with 0 and 3 decimals`, async (t) => {
    const jpy = await Scenario.start(server, AT);
    const a = await invoiceOf(jpy, "JPY", "1500", "Yen plan");
    const ta = poppler("pdftotext", (await get(`${server.url}/invoices/${a.id}/pdf`, jpy.key)).body);
    t.regex(ta, /Yen plan\s+1\s+JPY 1500\s+JPY 1500/);
    t.regex(ta, /Amount due\s+JPY 1500\n/);
    const kwd = await Scenario.start(server, AT);
    const b = await invoiceOf(kwd, "KWD", "7250", "Dinar plan");
    const tb = poppler("pdftotext", (await get(`${server.url}/invoices/${b.id}/pdf`, kwd.key)).body);
    t.regex(tb, /Dinar plan\s+1\s+KWD 7\.250\s+KWD 7\.250/);
    t.regex(tb, /Amount due\s+KWD 7\.250/);
  });

  test(`${store}: A4 and Letter differ in page size; the same invoice gives the same bytes twice`, async (t) => {
    const s = await Scenario.start(server, AT);
    const inv = await invoiceOf(s, "USD", "2500");
    const url = `${server.url}/invoices/${inv.id}/pdf`;
    const [plain, again, a4, letter] = await Promise.all([get(url, s.key), get(url, s.key), get(`${url}?paper=a4`, s.key), get(`${url}?paper=letter`, s.key)]);
    t.true(plain.body.equals(again.body), "same bytes");
    // No seller address: A4 by default.
    t.true(plain.body.equals(a4.body));
    t.regex(poppler("pdfinfo", a4.body), /Page size:\s+595\.2\d? x 841\.8\d? pts \(A4\)/);
    t.regex(poppler("pdfinfo", letter.body), /Page size:\s+612 x 792 pts \(letter\)/);
    const bad = await s.raw("GET", `/invoices/${inv.id}/pdf?paper=legal`);
    t.is(bad.status, 400);
    t.like(bad.body, { code: "invalid_argument" });
    t.true(JSON.stringify(bad.body).includes("paper"));
  });

  test(`${store}: a draft has no PDF (400); no key 401; unknown or another environment's ID 404; the hosted token's PDF needs no key`, async (t) => {
    const s = await Scenario.start(server, AT, { invoiceGraceSeconds: 3600 });
    const m = await s.metric();
    const card = await s.card({
      usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: m, included_units: 0, price: { amount: { currency_code: "USD", value: 1 } } }],
    });
    await s.subscribe({ rate_card_id: card });
    await s.events([["2026-01-20T00:00:00Z", "5"]]);
    await s.advance("2026-02-15T00:00:00Z");
    const draft = (await s.invoices()).find((i) => i.status === "draft") as Json;
    t.truthy(draft, "a draft in its grace period");
    t.is(draft.pdf_url, "");
    const refused = await s.raw("GET", `/invoices/${draft.id}/pdf`);
    t.is(refused.status, 400);
    t.like(refused.body, { code: "failed_precondition" });
    t.true(JSON.stringify(refused.body).includes("INVOICE_NOT_FINALIZED"));
    const hostedDraft = await get(`${server.url}${new URL(draft.hosted_url).pathname}/pdf`);
    t.is(hostedDraft.status, 400);

    const paid = await invoiceOf(await Scenario.start(server, AT), "USD", "900");
    t.is((await get(`${server.url}/invoices/${paid.id}/pdf`)).status, 401);
    t.is((await get(`${server.url}/invoices/${paid.id}/pdf`, "sk_test_nope")).status, 401);
    t.is((await get(`${server.url}/invoices/in_unknown/pdf`, s.key)).status, 404);
    // Another environment's invoice: not found, as if it did not exist.
    t.is((await get(`${server.url}/invoices/${paid.id}/pdf`, s.key)).status, 404);
    const hosted = await get(`${server.url}${new URL(paid.hosted_url).pathname}/pdf`);
    t.is(hosted.status, 200);
    t.is(hosted.type, "application/pdf");
    t.true(poppler("pdftotext", hosted.body).includes(paid.number));
    t.is((await get(`${server.url}/hosted/invoices/${"x".repeat(32)}/pdf`)).status, 404);
  });
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: the hosted page, the portal and the dashboard show numbers, names and PDF links; the portal hides an empty internal invoice`, async (t) => {
    const s = await Scenario.start(server, AT);
    const m = await s.metric();
    const card = await s.card({
      usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: m, included_units: 0, price: { amount: { currency_code: "USD", value: 2 } } }],
    });
    await s.subscribe({ rate_card_id: card });
    await s.events([["2026-02-20T00:00:00Z", "3"]]);
    await s.advance("2026-03-15T00:00:00Z");
    const [internal, inv] = (await s.invoices()) as [Json, Json];
    // The start billed nothing (no fixed rate): an empty invoice kept internal, no number.
    t.deepEqual([internal.number, internal.line_items.length, internal.total_amount.value], ["", 0, "0"]);
    t.deepEqual([inv.status, inv.total_amount.value], ["open", "6"]);
    const token = (i: Json) => new URL(i.hosted_url).pathname.split("/").pop() as string;

    const hosted = await (await fetch(`${server.url}/hosted/invoices/${token(inv)}`)).text();
    t.regex(hosted, new RegExp(`<h1>Invoice ${inv.number}</h1>`));
    t.regex(hosted, /Bill to<\/div><div>Customer<\/div>/);
    t.regex(hosted, /Total<\/td><td class="n">USD 0\.06</);
    t.true(hosted.includes(`<a href="/hosted/invoices/${token(inv)}/pdf">Download PDF</a>`));

    const portal = await s.call("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: "https://app.example/account" });
    const page = await (await fetch(`${server.url}${new URL(portal.url).pathname}`)).text();
    t.regex(page, new RegExp(`<span class="number">${inv.number}</span>`));
    t.true(page.includes(`href="/hosted/invoices/${token(inv)}/pdf"`), "a PDF link");
    t.false(page.includes(token(internal)), "the empty internal invoice is not listed");
    const pdf = await fetch(`${server.url}/hosted/invoices/${token(inv)}/pdf`);
    t.is(pdf.headers.get("content-type"), "application/pdf");

    // The dashboard, signed in with the key: the number, the subject's name, the PDF link.
    const cookies: string[] = [];
    const jar = (res: Response) => {
      for (const c of res.headers.getSetCookie()) cookies.push((c.split(";")[0] as string).trim());
      return res;
    };
    const dash = (path: string, form?: Record<string, string>) =>
      fetch(`${server.url}${path}`, {
        method: form ? "POST" : "GET",
        headers: { cookie: cookies.join("; "), ...(form ? { "content-type": "application/x-www-form-urlencoded" } : {}) },
        body: form ? new URLSearchParams(form).toString() : undefined,
        redirect: "manual",
      }).then(jar);
    const csrf = /name="csrf" value="([^"]+)"/.exec(await (await dash("/dashboard/sign-in")).text())?.[1] ?? "";
    t.is((await dash("/dashboard/sign-in", { csrf, api_key: s.key })).status, 303);
    const list = await (await dash("/dashboard/invoices")).text();
    t.true(list.includes(`>${inv.number}</a>`), "the list shows the number");
    t.true(list.includes(`title="${s.subjectId}">Customer</a>`), "and the subject's name");
    t.true(list.includes(`href="/hosted/invoices/${token(inv)}/pdf"`), "and the PDF link");
    const detail = await (await dash(`/dashboard/invoices/${inv.id}`)).text();
    t.regex(detail, new RegExp(`<h1>Invoice <span class="mono">${inv.number}</span></h1>`));
    t.true(detail.includes("Download PDF"));
  });
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a discounted, taxed invoice's PDF has the seller, the buyer's details, discounts and taxes with rates; its credit note's PDF too`, async (t) => {
    const s = await Scenario.start(server, AT);
    const seller = {
      legal_name: "Acme Billing Inc.",
      address: { line1: "1 Main St", city: "Springfield", postal_code: "12345", state: "IL", country: "US" },
      tax_id: "US-EIN-12-3456789",
      email: "billing@acme.example",
      footer: "Thank you for your business",
    };
    await s.call("PATCH", "/invoice-settings", { seller });
    const tax = await s.call("POST", "/tax-rates", { display_name: "Sales tax", percentage: "10", country: "US" });
    const coupon = await s.call("POST", "/coupons", { name: "Launch 20%", percent_off: "20", duration: "forever" });
    await s.call("PUT", `/subjects/${s.subjectId}`, {
      billing_details: { legal_name: "Buyer LLC", address: { line1: "9 Elm Rd", city: "Austin", country: "US", state: "TX" }, tax_ids: [{ type: "us_ein", value: "98-7654321" }] },
    });
    const card = await s.card({ fixed_rates: [{ code: "base", name: "Base plan", price: { amount: { currency_code: "USD", value: "10000" } } }], default_tax_rate_ids: [tax.id] });
    await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { base: 1 }, create_checkout_session: "always", coupon_id: coupon.id }, CARD_OK);
    const [inv] = (await s.invoices()) as [Json];
    // 10000 − 20% = 8000; 10% tax on it: 800; total 8800.
    t.deepEqual([inv.subtotal.value, inv.total_tax.value, inv.total_amount.value], ["8000", "800", "8800"]);
    const pdf = await get(`${server.url}/invoices/${inv.id}/pdf`, s.key);
    t.regex(poppler("pdfinfo", pdf.body), /Page size:\s+612 x 792 pts \(letter\)/, "a US seller: Letter");
    const text = poppler("pdftotext", pdf.body);
    for (const want of [
      "Acme Billing Inc.",
      "1 Main St",
      "12345 Springfield",
      "Tax ID: US-EIN-12-3456789",
      "billing@acme.example",
      "Buyer LLC",
      "9 Elm Rd",
      "98-7654321",
      "Thank you for your business",
    ]) {
      t.true(text.includes(want), `has ${want}:\n${text}`);
    }
    t.regex(text, /Base plan\s+1\s+USD 100\.00\s+USD 100\.00/);
    t.regex(text, /Discount: Launch 20%\s+USD -20\.00/);
    t.regex(text, /Sales tax 10%\s+USD 8\.00/);
    t.regex(text, /Subtotal\s+USD 80\.00/);
    t.regex(text, /Sales tax 10% on USD 80\.00\s+USD 8\.00/);
    t.regex(text, /Total tax\s+USD 8\.00/);
    t.regex(text, /Total\s+USD 88\.00/);
    t.regex(text, /Amount due\s+USD 88\.00/);

    // The hosted page says the same.
    const hosted = await (await fetch(`${server.url}${new URL(inv.hosted_url).pathname}`)).text();
    for (const want of ["Acme Billing Inc.", "Buyer LLC", "Discount: Launch 20%", "USD -20.00", "Sales tax 10% on USD 80.00", "USD 88.00"])
      t.true(hosted.includes(want), `the hosted page has ${want}`);

    // A credit note of the whole invoice to the balance: its PDF, and the invoice's amount credited.
    const note = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "order_change", outcome: "credit_balance", memo: "Plan cancelled" });
    const cn = await get(`${server.url}/credit-notes/${note.id}/pdf`, s.key);
    t.is(cn.status, 200);
    t.is(cn.type, "application/pdf");
    t.is(cn.disposition, `inline; filename="${note.number}.pdf"`);
    const cnText = poppler("pdftotext", cn.body);
    for (const want of ["Credit note", note.number, `For invoice ${inv.number}`, "Reason Order change", "Acme Billing Inc.", "Buyer LLC", "Plan cancelled", "Credited to the customer's balance"]) {
      t.true(cnText.includes(want), `the credit note has ${want}:\n${cnText}`);
    }
    t.regex(cnText, /Total credited\s+USD 88\.00/);
    t.true((await get(`${server.url}/credit-notes/${note.id}/pdf`, s.key)).body.equals(cn.body), "same bytes twice");
    t.regex(poppler("pdftotext", (await get(`${server.url}/invoices/${inv.id}/pdf`, s.key)).body), /Amount credited\s+USD -88\.00/);
    t.is((await get(`${server.url}/credit-notes/cn_unknown/pdf`, s.key)).status, 404);
    t.is((await get(`${server.url}/credit-notes/${note.id}/pdf`)).status, 401);
    t.is((await get(`${server.url}/credit-notes/${note.id}/pdf`, await server.freshKey())).status, 404, "another environment's note");
  });
}
