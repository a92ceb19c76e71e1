/**
 * The operator dashboard in a real browser (headless Chromium from Debian's package), with
 * JavaScript off (the pages have none): an operator signs in with a secret key, walks every page
 * (overview, subjects, a subject, events, catalog, clocks, invoices, an invoice, subscriptions),
 * advances a test clock past a cycle end (a draft invoice appears), finalizes that draft,
 * cancels the subscription, reads the rejected events with their reasons, signs in to a second
 * environment and switches back with the switcher, and signs out; after that the dashboard sends them to the sign-in
 * page. Also: the pages read on a phone without sideways scrolling of the page itself, and the
 * charts carry accessible labels. Screenshots go to TEST_ARTIFACTS_DIR.
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { chromium } from "playwright-core";
import { CHROMIUM, chromiumMissing } from "../helpers/chromium.js";
import { Scenario } from "../helpers/scenario.js";
import { startTestServer } from "../helpers/server.js";

const ARTIFACTS = process.env.TEST_ARTIFACTS_DIR ?? join(tmpdir(), "billing-test-artifacts");
const usd = (value: string | number) => ({ amount: { currency_code: "USD", value } });

test("an operator signs in, walks every page, advances a clock, finalizes a draft, cancels, and signs out", async (t) => {
  if (!existsSync(CHROMIUM)) throw new Error(chromiumMissing());
  mkdirSync(ARTIFACTS, { recursive: true });
  const server = await startTestServer("sqlite");
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    // Given a test environment whose cycle invoices stay drafts for an hour, a customer on Team
    // (a seat and API calls), and some usage.
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z", { invoiceGraceSeconds: 3600 });
    await s.call("PUT", `/subjects/${s.subjectId}`, { name: "Ada Lovelace", email: "ada@example.com" });
    const m = await s.metric();
    const card = await s.card({
      name: "Team",
      fixed_rates: [{ code: "seats", name: "Seats", price: usd(4900) }],
      usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: m, included_units: 1000, price: usd("0.5") }],
    });
    await s.card({ name: "Business", fixed_rates: [{ code: "seats", name: "Seats", price: usd(9900) }] });
    const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription;
    await s.events([
      ["2026-01-15T00:00:00Z", "700"],
      ["2026-01-14T12:00:00Z", "1"],
    ]);
    await s.events([["2026-01-15T00:00:00Z", "550"]]);
    // And an event refused: its subject does not exist.
    t.is((await s.raw("POST", "/usage-events", { idempotency_key: "lost-1", subject_id: "cus_unknown", event_name: "usage", data: { n: "3" } })).status, 404);

    const page = await browser.newPage({ javaScriptEnabled: false, viewport: { width: 1280, height: 900 } });
    const shot = async (name: string) => {
      const png = await page.screenshot({ fullPage: true });
      t.true(png.length > 10_000, `${name}: a rendered page`);
      writeFileSync(join(ARTIFACTS, `dashboard-${name}.png`), png);
    };
    const main = () => page.locator("main").innerText();

    // Signed out, the dashboard sends them to the sign-in page; a wrong key is refused there.
    await page.goto(`${server.url}/dashboard`);
    t.is(new URL(page.url()).pathname, "/dashboard/sign-in");
    await page.getByLabel("Secret API key").fill(server.keys.aPublishable);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForLoadState();
    t.regex(await page.getByRole("alert").innerText(), /publishable key cannot open the dashboard/);
    await page.getByLabel("Secret API key").fill(s.key);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(`${server.url}/dashboard`);
    t.is(await page.locator("h1").innerText(), "Overview");
    t.regex(await page.getByLabel("Environment").innerText(), /test/);
    t.regex(await main(), new RegExp(sub.id));
    t.regex(await main(), /Events ingested per hour, last 7 days \(3 accepted, UTC\)/);
    t.is(await page.getByRole("img", { name: /^Events ingested per hour, last 7 days: 168 buckets, largest [1-3]$/ }).count(), 1);
    await shot("overview");

    // Subjects: search, then the subject's page with its billing state and usage chart.
    await page.getByRole("link", { name: "Subjects" }).click();
    await page.getByLabel("Search").fill("Ada");
    await page.getByRole("button", { name: "Search" }).click();
    await page.waitForURL(/\/dashboard\/subjects\?q=Ada$/);
    await page.getByRole("link", { name: s.subjectId }).click();
    await page.waitForURL(`${server.url}/dashboard/subjects/${s.subjectId}`);
    t.is(await page.locator("h1").innerText(), "Ada Lovelace");
    t.regex(await main(), /API calls\s+1250\s+1000/);
    t.regex(await main(), /over an included amount/);
    const chart = page.getByRole("img", { name: /usage per day: \d+ buckets, largest 1250/ });
    t.is(await chart.count(), 1, "the usage chart is labelled");
    await shot("subject");

    // Events: the newest stored events.
    await page.getByRole("link", { name: "Events" }).click();
    await page.waitForURL(`${server.url}/dashboard/events`);
    t.regex(await main(), /e2\s+\{"n":"550"\}/);
    await shot("events");
    // The rejected ones, with their reasons.
    await page.getByRole("navigation", { name: "Which events" }).getByRole("link", { name: "Rejected" }).click();
    await page.waitForURL(`${server.url}/dashboard/events?show=rejected`);
    t.regex(await main(), /SUBJECT_NOT_FOUND\s+subject_id: subject "cus_unknown" not found\s+subject_id\s+cus_unknown\s+usage\s+lost-1/);
    await shot("events-rejected");

    // Catalog: the card's rates and prices.
    await page.getByRole("link", { name: "Catalog" }).click();
    await page.waitForURL(`${server.url}/dashboard/catalog`);
    t.regex(await main(), /Seats\s+fixed, in advance\s+USD 49\.00/);
    t.regex(await main(), /API calls\s+usage \(simple\), in arrears\s+USD 0\.005\s+1000/);
    await shot("catalog");

    // Test clocks: advance past the cycle end; the result is shown.
    await page.getByRole("link", { name: "Test clocks" }).click();
    await page.getByRole("link", { name: s.clockId }).click();
    await page.getByLabel("Advance to (UTC)").fill("2026-02-15T00:30");
    await page.getByRole("button", { name: "Advance" }).click();
    await page.waitForURL(/\/dashboard\/clocks\/clk_\w+\?from=/);
    t.regex(await page.getByRole("status").innerText(), /Advanced from 2026-01-15 00:00 UTC to 2026-02-15 00:30 UTC/);
    await shot("clock");

    // Invoices: the draft of the cycle that ended, finalized from its page.
    await page.getByRole("link", { name: "Invoices" }).click();
    await page.getByLabel("Status").selectOption("draft");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.waitForURL(/\/dashboard\/invoices\?status=draft$/);
    const drafts = (await s.invoices()).filter((i) => i.status === "draft");
    t.is(drafts.length, 1);
    await shot("invoices");
    await page.getByRole("link", { name: drafts[0].id }).click();
    t.regex(await main(), /API calls\s+250\s+USD 0\.005\s+USD 1\.25/);
    await page.getByRole("button", { name: "Finalize now" }).click();
    await page.waitForURL(/\?done=finalized$/);
    t.regex(await page.getByRole("status").innerText(), /finalized/);
    t.not((await s.call("GET", `/invoices/${drafts[0].id}`)).status, "draft");
    t.is(await page.getByRole("link", { name: "Open the hosted page" }).getAttribute("href"), new URL(drafts[0].hosted_url).pathname);
    await shot("invoice");

    // Subscriptions: filter, open, cancel now.
    await page.getByRole("link", { name: "Subscriptions" }).click();
    await page.getByLabel("Status").selectOption("active");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.getByRole("link", { name: sub.id }).first().click();
    await page.waitForURL(`${server.url}/dashboard/subscriptions/${sub.id}`);
    await shot("subscription");
    // The proration preview: nothing changes until the operator confirms (they do not, here).
    await page.getByRole("button", { name: "Preview the change" }).click();
    await page.waitForURL(/\/change\?rate_card_id=rc_\w+&behavior=prorate$/);
    t.regex(await page.locator("h1").innerText(), /from Team to Business\?/);
    await shot("change-preview");
    await page.getByRole("link", { name: "Keep Team" }).click();
    await page.waitForURL(`${server.url}/dashboard/subscriptions/${sub.id}`);
    await page.getByRole("button", { name: "Cancel now" }).click();
    await page.waitForURL(/\?done=cancelled$/);
    t.regex(await page.getByRole("status").innerText(), /was cancelled/);
    t.is((await s.call("GET", `/subscriptions/${sub.id}`)).status, "cancelled");

    // Another environment (live): signing in adds it; the switcher lists both and switches back.
    await page.getByRole("link", { name: "add an environment" }).click();
    await page.getByLabel("Secret API key").fill(server.keys.b);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(`${server.url}/dashboard`);
    t.regex(await page.getByLabel("Environment", { exact: true }).innerText(), /env-b live/);
    const envs = page.getByLabel("Switch environment");
    t.deepEqual(
      (await envs.locator("option").allInnerTexts()).map((x) => x.replace(/^env_\w+/, "env_…")),
      ["env-b (live)", "env_… (test)"],
    );
    await page.goto(`${server.url}/dashboard/subscriptions/${sub.id}`);
    t.is(await page.locator("h1").innerText(), "Not found", "the test environment's subscription, with the live one active");
    await page.getByLabel("Switch environment").selectOption({ index: 1 });
    await page.getByRole("button", { name: "Switch" }).click();
    await page.waitForURL(`${server.url}/dashboard`);
    t.regex(await page.getByLabel("Environment", { exact: true }).innerText(), /test/);
    await page.goto(`${server.url}/dashboard/subscriptions/${sub.id}`);
    t.regex(await page.locator("h1").innerText(), new RegExp(sub.id));

    // On a phone: the page itself never scrolls sideways (wide tables scroll in their box).
    await page.setViewportSize({ width: 375, height: 800 });
    for (const path of ["/dashboard", `/dashboard/subjects/${s.subjectId}`, "/dashboard/catalog", "/dashboard/invoices"]) {
      await page.goto(`${server.url}${path}`);
      const [scroll, client] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
      t.true((scroll as number) <= (client as number), `${path}: ${scroll} <= ${client}`);
    }
    await page.goto(`${server.url}/dashboard`);
    await shot("overview-phone");

    // Sign out: back to the sign-in page, and the dashboard stays closed.
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL(`${server.url}/dashboard/sign-in`);
    await page.goto(`${server.url}/dashboard/invoices`);
    t.is(new URL(page.url()).pathname, "/dashboard/sign-in");
    t.log(`screenshots: ${ARTIFACTS}/dashboard-*.png`);
  } finally {
    await browser.close();
    await server.stop();
  }
});
