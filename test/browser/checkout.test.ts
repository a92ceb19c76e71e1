/**
 * The hosted checkout in a real browser (headless Chromium from Debian's package): a person
 * finds the card field by its label, a declined card shows the message, a good card returns
 * them to the success URL with the subscription started; the cancel button returns them to the
 * cancelled URL. The page uses no JavaScript.
 */
import http from "node:http";
import { existsSync } from "node:fs";
import test from "ava";
import { chromium } from "playwright-core";
import { CARD_DECLINED, Scenario } from "../helpers/scenario.js";
import { CHROMIUM, chromiumMissing } from "../helpers/chromium.js";
import { startTestServer } from "../helpers/server.js";

test("a person pays in the hosted checkout: declined first, then accepted and sent back", async (t) => {
  if (!existsSync(CHROMIUM)) throw new Error(chromiumMissing());
  const server = await startTestServer("sqlite");
  // The application the customer returns to.
  const visits: string[] = [];
  const app = http.createServer((req, res) => {
    visits.push(req.url ?? "");
    res.end("<h1>Welcome back</h1>");
  });
  await new Promise<void>((r) => app.listen(0, "127.0.0.1", r));
  const appUrl = `http://127.0.0.1:${(app.address() as { port: number }).port}`;
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ name: "Team", fixed_rates: [{ code: "seats", name: "Seats", price: { amount: { currency_code: "USD", value: 4900 } } }] });
    const r = await s.call("POST", "/subscriptions", {
      subject_id: s.subjectId,
      rate_card_id: card,
      fixed_rate_quantities: { seats: 1 },
      checkout_callback_urls: { success_url: `${appUrl}/welcome`, cancelled_url: `${appUrl}/pricing` },
    });
    const page = await browser.newPage({ javaScriptEnabled: false });
    await page.goto(r.result.action.checkout_url);
    t.is(await page.title(), "Subscribe to Team");
    t.regex(await page.locator("main").innerText(), /Due today: USD 49\.00/);

    await page.getByLabel("Card number").fill(CARD_DECLINED);
    await page.getByRole("button", { name: "Pay and subscribe" }).click();
    await page.waitForLoadState();
    t.regex(await page.getByRole("alert").innerText(), /Your card was declined/);
    t.deepEqual(await s.subscriptions(), []);

    await page.getByLabel("Card number").fill("4242 4242 4242 4242");
    await page.getByRole("button", { name: "Pay and subscribe" }).click();
    await page.waitForURL(`${appUrl}/welcome`);
    t.regex(await page.locator("h1").innerText(), /Welcome back/);
    t.deepEqual(
      visits.filter((v) => v !== "/favicon.ico"),
      ["/welcome"],
    );
    const [sub] = await s.subscriptions();
    t.is(sub?.status, "active");
    const [invoice] = await s.invoices();
    t.is(invoice?.status, "paid");

    // The invoice page reads and prints.
    await page.goto(invoice.hosted_url);
    t.regex(await page.locator("table").innerText(), /Seats\s+1\s+USD 49\.00\s+USD 49\.00/);
    const pdf = await page.pdf({ format: "A4" }).catch(() => undefined);
    if (pdf) t.true(pdf.length > 1000, "prints to a PDF");

    // Going back to the used checkout shows that it is no longer available.
    await page.goto(r.result.action.checkout_url);
    t.regex(await page.locator("h1").innerText(), /no longer available/);

    // Cancelling is a button (a POST form): it sends the customer to cancelled_url.
    const again = await s.call("POST", "/subscriptions", {
      subject_id: s.subjectId,
      rate_card_id: card,
      fixed_rate_quantities: { seats: 1 },
      create_checkout_session: "always",
      checkout_callback_urls: { success_url: `${appUrl}/welcome`, cancelled_url: `${appUrl}/pricing` },
    });
    await page.goto(again.result.action.checkout_url);
    await page.getByRole("button", { name: "Cancel and go back" }).click();
    await page.waitForURL(`${appUrl}/pricing`);
    t.deepEqual(
      visits.filter((v) => v !== "/favicon.ico"),
      ["/welcome", "/pricing"],
    );
    t.is((await s.subscriptions()).length, 1, "nothing more subscribed");
  } finally {
    await browser.close();
    app.close();
    await server.stop();
  }
});
