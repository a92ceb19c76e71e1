/**
 * Invoices by number in a real browser (headless Chromium, JavaScript off; DESIGN §15): the
 * customer portal lists the customer's invoice by its number with a PDF link, and not the empty
 * invoice kept internal (a usage plan's start billed nothing); the hosted invoice page shows the
 * number, the buyer and the total, and its Download PDF link answers a PDF.
 */
import { existsSync } from "node:fs";
import test from "ava";
import { chromium } from "playwright-core";
import { CHROMIUM, chromiumMissing } from "../helpers/chromium.js";
import { Scenario } from "../helpers/scenario.js";
import { startTestServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

test("the portal lists invoices by number with their PDF, not an empty one; the hosted page shows the number and total", async (t) => {
  if (!existsSync(CHROMIUM)) throw new Error(chromiumMissing());
  const server = await startTestServer("sqlite");
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    // A usage plan: its start billed nothing (kept internal); a month of usage bills 3 × 2 cents.
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    await s.call("PUT", `/subjects/${s.subjectId}`, { name: "Ada Lovelace", email: "ada@example.com" });
    const m = await s.metric();
    const card = await s.card({
      usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: m, included_units: 0, price: { amount: { currency_code: "USD", value: 2 } } }],
    });
    await s.subscribe({ rate_card_id: card });
    await s.events([["2026-02-20T00:00:00Z", "3"]]);
    await s.advance("2026-03-15T00:00:00Z");
    const [internal, inv] = (await s.invoices()) as [Json, Json];
    t.is(internal.number, "");
    t.regex(inv.number, /^INV-\d{6}$/);
    const session = await s.call("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: "https://app.example/account" });

    const page = await browser.newPage({ javaScriptEnabled: false, viewport: { width: 1024, height: 900 } });
    await page.goto(session.url);
    const rows = page.locator("table", { has: page.locator("th", { hasText: "Invoice" }) }).locator("tbody tr");
    t.is(await rows.count(), 1, "one invoice listed: the empty one is not");
    t.regex(await rows.first().innerText(), new RegExp(`${inv.number}\\s+\\d{4}-\\d{2}-\\d{2}\\s+open\\s+USD 0\\.06`));
    const pdfLink = page.getByRole("link", { name: `PDF of invoice ${inv.number}` });
    const href = (await pdfLink.getAttribute("href")) as string;
    t.regex(href, /^\/hosted\/invoices\/[0-9A-Za-z]+\/pdf$/);
    const pdf = await page.request.get(new URL(href, session.url).toString());
    t.is(pdf.headers()["content-type"], "application/pdf");
    t.is((await pdf.body()).subarray(0, 5).toString(), "%PDF-");
    t.false((await page.content()).includes(new URL(internal.hosted_url).pathname), "no link to the internal invoice");

    // The hosted page, from the portal's link.
    await page.getByRole("link", { name: /View invoice/ }).click();
    await page.waitForURL(inv.hosted_url);
    t.is(await page.locator("h1").innerText(), `Invoice ${inv.number}`);
    const main = await page.locator("main").innerText();
    t.regex(main, /Bill to\s+Ada Lovelace/);
    t.regex(main, /Total\s+USD 0\.06/);
    t.is(await page.getByRole("link", { name: "Download PDF" }).getAttribute("href"), href);
  } finally {
    await browser.close();
    await server.stop();
  }
});
