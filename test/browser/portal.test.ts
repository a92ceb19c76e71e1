/**
 * The customer portal in a real browser (headless Chromium from Debian's package), with
 * JavaScript off: a customer opens the portal their application sent them to, sees their plan,
 * usage and invoices, replaces a failing card (declined first, then accepted), cancels at the end
 * of the cycle through the confirmation step, opens an invoice, and returns to the application.
 * Also: it reads on a phone (no sideways scrolling) and prints without its buttons. Screenshots
 * are written to TEST_ARTIFACTS_DIR (default: a directory under the OS temp dir) and logged.
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { chromium } from "playwright-core";
import { CHROMIUM, chromiumMissing } from "../helpers/chromium.js";
import { CARD_DECLINED, CARD_FAILS_LATER, Scenario } from "../helpers/scenario.js";
import { startTestServer } from "../helpers/server.js";

const ARTIFACTS = process.env.TEST_ARTIFACTS_DIR ?? join(tmpdir(), "billing-test-artifacts");
const usd = (value: string | number) => ({ amount: { currency_code: "USD", value } });

test("a customer uses the portal: sees billing, replaces the card, cancels at the end of the cycle, opens an invoice, returns", async (t) => {
  if (!existsSync(CHROMIUM)) throw new Error(chromiumMissing());
  mkdirSync(ARTIFACTS, { recursive: true });
  const server = await startTestServer("sqlite");
  // The application the customer returns to.
  const visits: string[] = [];
  const app = http.createServer((req, res) => {
    visits.push(req.url ?? "");
    res.end("<h1>Your account</h1>");
  });
  await new Promise<void>((r) => app.listen(0, "127.0.0.1", r));
  const appUrl = `http://127.0.0.1:${(app.address() as { port: number }).port}`;
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    // Given a customer on the Team plan who paid with a card whose charges now fail, and used
    // more API calls than included.
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    await s.call("PUT", `/subjects/${s.subjectId}`, { name: "Ada Lovelace", email: "ada@example.com" });
    const m = await s.metric();
    const card = await s.card({
      name: "Team",
      fixed_rates: [{ code: "seats", name: "Seats", price: usd(4900) }],
      usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: m, included_units: 1000, price: usd("0.5") }],
    });
    const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, CARD_FAILS_LATER)).subscription;
    await s.events([["2026-01-15T00:00:00Z", "1250"]]);
    const session = await s.call("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: `${appUrl}/account` });

    // When they open the portal.
    const page = await browser.newPage({ javaScriptEnabled: false, viewport: { width: 1024, height: 900 } });
    await page.goto(session.url);
    t.is(await page.title(), "Billing");
    const main = await page.locator("main").innerText();
    t.regex(main, /Ada Lovelace/);
    t.regex(main, /Team/);
    t.regex(main, /Active, renews automatically/);
    t.regex(main, /Current period: 2026-01-15 – 2026-02-15/);
    t.regex(main, /API calls\s+1250\s+1000/);
    t.regex(main, /Visa ending in 0341/);
    t.regex(main, /open\s+USD 49\.00/);
    const shot = await page.screenshot({ fullPage: true });
    t.true(shot.length > 10_000, "the screenshot shows a rendered page");
    writeFileSync(join(ARTIFACTS, "portal-desktop.png"), shot);
    t.log(`screenshot: ${join(ARTIFACTS, "portal-desktop.png")}`);

    // They replace the card: a declined card first, then a good one.
    await page.getByRole("link", { name: "Replace card" }).click();
    await page.waitForLoadState();
    t.regex(await page.locator("h1").innerText(), /Replace your card/);
    await page.getByLabel("Card number").fill(CARD_DECLINED);
    await page.getByRole("button", { name: "Save card" }).click();
    await page.waitForLoadState();
    t.regex(await page.getByRole("alert").innerText(), /Your card was declined/);
    await page.getByLabel("Card number").fill("4242 4242 4242 4242");
    await page.getByRole("button", { name: "Save card" }).click();
    await page.waitForURL(/\/hosted\/portal\/[0-9A-Za-z]{40}\?done=card$/);
    t.regex(await page.getByRole("status").innerText(), /Your card was saved/);
    t.regex(await page.locator("main").innerText(), /Visa ending in 4242/);

    // They cancel at the end of the cycle, confirming on the second page.
    await page.getByRole("link", { name: "Cancel at the end of the period…" }).click();
    await page.waitForLoadState();
    t.is(await page.locator("h1").innerText(), "Cancel Team?");
    t.false((await s.call("GET", `/subscriptions/${sub.id}`)).cancels_at_end_of_cycle, "the confirmation page changed nothing");
    await page.getByRole("button", { name: "Yes, cancel at the end of the period" }).click();
    await page.waitForURL(/\?done=cancel$/);
    t.regex(await page.getByRole("status").innerText(), /will end at the end of its current period/);
    t.regex(await page.locator("main").innerText(), /Active, ends on 2026-02-15/);
    const after = await s.call("GET", `/subscriptions/${sub.id}`);
    t.deepEqual([after.status, after.cancels_at_end_of_cycle, after.id], ["active", true, sub.id]);

    // They open their invoice from the list.
    const [invoice] = await s.invoices();
    await page
      .getByRole("link", { name: /View invoice/ })
      .first()
      .click();
    await page.waitForURL(invoice.hosted_url);
    t.is(await page.locator("h1").innerText(), `Invoice ${invoice.number}`);
    t.regex(await page.locator("table").innerText(), /Seats\s+1\s+USD 49\.00\s+USD 49\.00/);

    // And return to the application.
    await page.goBack();
    await page.getByRole("link", { name: /Return to 127\.0\.0\.1/ }).click();
    await page.waitForURL(`${appUrl}/account`);
    t.regex(await page.locator("h1").innerText(), /Your account/);
    t.deepEqual(
      visits.filter((v) => v !== "/favicon.ico"),
      ["/account"],
    );

    // Printed, the buttons and links to act are left out.
    const print = await browser.newPage({ javaScriptEnabled: false });
    await print.goto(session.url);
    await print.emulateMedia({ media: "print" });
    t.false(await print.getByRole("link", { name: "Replace card" }).isVisible());
    t.true(await print.getByRole("heading", { name: "Invoices" }).isVisible());
    const pdf = await print.pdf({ format: "A4" }).catch(() => undefined);
    if (pdf) t.true(pdf.length > 1000, "prints to a PDF");
  } finally {
    await browser.close();
    app.close();
    await server.stop();
  }
});

test("the portal reads on a phone: no sideways scrolling, text at a readable size", async (t) => {
  if (!existsSync(CHROMIUM)) throw new Error(chromiumMissing());
  mkdirSync(ARTIFACTS, { recursive: true });
  const server = await startTestServer("sqlite");
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"] });
  try {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    await s.call("PUT", `/subjects/${s.subjectId}`, { name: "A customer with a rather long name, as they sometimes have" });
    const m = await s.metric();
    const card = await s.card({
      name: "Enterprise plan with a long name for small screens",
      fixed_rates: [{ code: "seats", name: "Seats", price: usd(123456) }],
      usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API calls to the inference endpoint", pricing_metric_id: m, included_units: 1000000, price: usd("0.5") }],
    });
    await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 12 } });
    const session = await s.call("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: "https://app.example/account" });
    // A phone: 360 CSS pixels wide, touch, device scale 3 (JavaScript on here only to measure).
    const context = await browser.newContext({ viewport: { width: 360, height: 740 }, deviceScaleFactor: 3, isMobile: true, hasTouch: true });
    const page = await context.newPage();
    await page.goto(session.url);
    t.regex(await page.locator("main").innerText(), /Enterprise plan with a long name/);
    const layout = await page.evaluate(() => ({
      inner: window.innerWidth,
      scroll: document.documentElement.scrollWidth,
      font: Number.parseFloat(getComputedStyle(document.body).fontSize),
    }));
    t.is(layout.inner, 360, "the viewport meta makes the page lay out at the phone's width");
    t.true(layout.scroll <= 360, `no sideways scrolling (content is ${layout.scroll}px wide)`);
    t.true(layout.font >= 16, "body text at least 16px");
    const shot = await page.screenshot({ fullPage: true });
    t.true(shot.length > 10_000);
    writeFileSync(join(ARTIFACTS, "portal-phone.png"), shot);
    t.log(`screenshot: ${join(ARTIFACTS, "portal-phone.png")}`);
    await context.close();
  } finally {
    await browser.close();
    await server.stop();
  }
});
