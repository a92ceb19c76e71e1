/**
 * `npm run screenshots`: the operator dashboard's screenshots for the README. Starts the service
 * on a throw-away SQLite database with a bootstrap key, builds a small test environment through
 * the public REST API (a test clock, customers on two plans, usage, events refused, a webhook
 * endpoint that cannot be reached, a cycle closed into draft invoices) and a second, live
 * environment, then signs in to both with headless Chromium (Debian's, or CHROMIUM_PATH) and writes one PNG
 * per page to docs/screenshots/ (or the directory given as the first argument); and the first page
 * of a finalized invoice's PDF as invoice-pdf.png, rendered with poppler's pdftoppm.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { chromium } from "playwright-core";
import { startApp } from "../src/app.js";
import { ensureEnvironment } from "../src/billing/bootstrap.js";
import { generateKey, storeKey } from "../src/billing/keys.js";
import { createDatabase } from "../src/db/datasource.js";
import { SqlAuthStore } from "../src/db/stores/auth-store.js";
import { loadConfig } from "../src/config.js";
import { createLogger } from "../src/log.js";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const OUT = resolve(process.argv[2] ?? "docs/screenshots");
const DAY = 86_400_000;
const usd = (value: string | number) => ({ amount: { currency_code: "USD", value } });

// biome-ignore lint/suspicious/noExplicitAny: the API's JSON, read loosely here
type Json = any;

async function main(): Promise<void> {
  if (!existsSync(CHROMIUM)) throw new Error(`Chromium is not at ${CHROMIUM}: install it (apt-get install chromium) or set CHROMIUM_PATH`);
  mkdirSync(OUT, { recursive: true });
  const dir = mkdtempSync(join(tmpdir(), "billing-screenshots-"));
  const key = generateKey("secret", "test");
  const url = `sqlite:${join(dir, "billing.db")}`;
  // Webhooks to a closed local port: the overview shows the endpoint needing attention.
  const app = await startApp(
    loadConfig({
      DATABASE_URL: url,
      PORT: "0",
      LOG_LEVEL: "error",
      BILLING_BOOTSTRAP_API_KEY: key,
      WEBHOOK_ALLOW_PRIVATE_HOSTS: "true",
      WEBHOOK_DELIVERY_INTERVAL_MS: "200",
      WEBHOOK_RETRY_BASE_MS: "500",
    }),
    createLogger("error"),
  );
  // A second environment (live), as the CLI makes one: the switcher lists both.
  const liveKey = generateKey("secret", "live");
  const db = await createDatabase(url, { poolSize: 1 });
  await db.dataSource.initialize();
  try {
    const auth = new SqlAuthStore(db.sql, db.entities);
    await storeKey(auth, (await ensureEnvironment(auth, "production", "live", new Date())).id, "secret", liveKey, new Date());
  } finally {
    await db.dataSource.destroy();
  }
  const call = async (method: string, path: string, body?: unknown): Promise<Json> => {
    const res = await fetch(`${app.url}${path}`, { method, headers: { "x-api-key": key, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text);
  };
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-sync"] });
  try {
    // A clock 32 days back, so that advancing it to today closes every monthly cycle once.
    const start = new Date(Math.floor((Date.now() - 32 * DAY) / DAY) * DAY);
    await call("POST", "/webhook-endpoints", { url: "http://127.0.0.1:9/billing-hooks", description: "CRM sync" });
    // The seller the invoices and their PDFs print.
    await call("PATCH", "/invoice-settings", {
      seller: {
        legal_name: "Example Analytics Ltd",
        address: { line1: "1 Harbour Street", city: "Dublin", postal_code: "D02 X285", country: "IE" },
        tax_id: "IE1234567T",
        email: "billing@example.com",
        footer: "Example Analytics Ltd · Registered in Ireland",
      },
    });
    const clock = await call("POST", "/test-clocks", { name: "demo", frozen_time: start.toISOString() });
    const metric = await call("POST", "/pricing-metrics", { event_name: "api_call", name: "API calls", unit: "call", dimensions: [], aggregation: { aggregation_type: "count" } });
    const team = await call("POST", "/rate-cards", {
      name: "Team",
      billing_interval: "monthly",
      fixed_rates: [{ code: "seats", name: "Seats", price: usd(4900) }],
      usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: metric.id, included_units: 100, price: usd("2") }],
    });
    const starter = await call("POST", "/rate-cards", {
      name: "Starter",
      billing_interval: "monthly",
      usage_based_rates: [
        {
          usage_based_rate_type: "simple",
          code: "api",
          name: "API calls",
          pricing_metric_id: metric.id,
          included_units: 50,
          price: { price_type: "package", ...usd(500), package_units: 100, rounding_behavior: "round_up" },
        },
      ],
    });
    const people = ["Ada Lovelace", "Grace Hopper", "Alan Turing", "Katherine Johnson", "Edsger Dijkstra", "Barbara Liskov"];
    let seq = 0;
    for (const [i, name] of people.entries()) {
      const subject = await call("POST", "/subjects", { name, email: `${name.split(" ")[0]?.toLowerCase()}@example.com`, external_id: `cust-${1000 + i}`, test_clock_id: clock.id });
      const paid = i % 3 !== 2;
      const r = await call("POST", "/subscriptions", {
        subject_id: subject.id,
        rate_card_id: paid ? team.id : starter.id,
        ...(paid ? { fixed_rate_quantities: { seats: String(1 + (i % 3)) } } : {}),
        checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" },
      });
      if (r.result.result_type === "requires_action") {
        const path = new URL(r.result.action.checkout_url).pathname;
        const res = await fetch(`${app.url}${path}`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "card_number=4242+4242+4242+4242", redirect: "manual" });
        if (res.status !== 303) throw new Error(`checkout: ${res.status}`);
      }
      // Usage over the month, more towards its end, different per customer.
      const events = [];
      for (let d = 0; d < 31; d++) {
        const n = Math.round((1 + i) * (2 + Math.sin(d / 3 + i) + d / 10));
        for (let k = 0; k < n; k++)
          events.push({ idempotency_key: `e${seq++}`, subject_id: subject.id, event_name: "api_call", timestamp: new Date(start.getTime() + d * DAY + k * 60_000 * 7).toISOString(), data: {} });
      }
      for (let j = 0; j < events.length; j += 1000) await call("POST", "/usage-events/batch", { events: events.slice(j, j + 1000) });
    }
    // Events refused: an unknown customer, a missing idempotency key.
    await call("POST", "/usage-events/batch", {
      events: [
        { idempotency_key: "imp-77", subject_id: "cust-9999", event_name: "api_call", data: {} },
        { idempotency_key: "", subject_id: "cust-1000", event_name: "api_call", data: {} },
      ],
    });
    // Half an hour past the cycle end (a month on, clamped to the month's last day): the closed
    // cycles' invoices are drafts for the environment's grace period (1 hour by default).
    const y = start.getUTCFullYear();
    const m = start.getUTCMonth();
    const cycleEnd = new Date(Date.UTC(y, m + 1, Math.min(start.getUTCDate(), new Date(Date.UTC(y, m + 2, 0)).getUTCDate())));
    await call("POST", `/test-clocks/${clock.id}/advance`, { frozen_time: new Date(cycleEnd.getTime() + 30 * 60_000).toISOString() });

    const page = await browser.newPage({ javaScriptEnabled: false, viewport: { width: 1280, height: 800 } });
    const shot = async (name: string, path?: string) => {
      if (path) await page.goto(`${app.url}${path}`);
      await page.screenshot({ path: join(OUT, `dashboard-${name}.png`), fullPage: true });
      console.log(join(OUT, `dashboard-${name}.png`));
    };
    await page.goto(`${app.url}/dashboard/sign-in`);
    await shot("sign-in");
    // Signed in to both environments, the test one active.
    for (const k of [liveKey, key]) {
      await page.goto(`${app.url}/dashboard/sign-in`);
      await page.getByLabel("Secret API key").fill(k);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.waitForURL(`${app.url}/dashboard`);
    }
    await shot("overview");
    await shot("subjects", "/dashboard/subjects");
    const subjects = (await call("GET", "/subjects?limit=10")).subjects;
    await shot("subject", `/dashboard/subjects/${subjects[0].id}?days=30`);
    await shot("subscriptions", "/dashboard/subscriptions");
    const subs = (await call("GET", `/subscriptions?subject_id=${subjects[0].id}`)).subscriptions;
    await shot("subscription", `/dashboard/subscriptions/${subs[0].id}`);
    await shot("invoices", "/dashboard/invoices");
    const drafts = (await call("GET", `/invoices?subject_id=${subjects[0].id}`)).invoices.filter((x: Json) => x.status === "draft");
    if (drafts[0]) await shot("invoice", `/dashboard/invoices/${drafts[0].id}`);
    await shot("invoice-settings", "/dashboard/invoice-settings");
    await shot("events", "/dashboard/events");
    await shot("events-rejected", "/dashboard/events?show=rejected");
    await shot("change-preview", `/dashboard/subscriptions/${subs[0].id}/change?rate_card_id=${subs[0].rate_card_id === team.id ? starter.id : team.id}&behavior=prorate`);
    await shot("catalog", "/dashboard/catalog");
    await shot("clock", `/dashboard/clocks/${clock.id}`);
    await page.setViewportSize({ width: 390, height: 844 });
    await shot("overview-phone", "/dashboard");
    // A finalized invoice's PDF (GET /invoices/{id}/pdf), its first page as a PNG.
    const finalized = (await call("GET", `/invoices?subject_id=${subjects[0].id}`)).invoices.find((x: Json) => x.number !== "");
    if (finalized) {
      const res = await fetch(`${app.url}/invoices/${finalized.id}/pdf`, { headers: { "x-api-key": key } });
      if (res.status !== 200) throw new Error(`GET /invoices/${finalized.id}/pdf: ${res.status}`);
      const pdf = join(dir, "invoice.pdf");
      writeFileSync(pdf, Buffer.from(await res.arrayBuffer()));
      execFileSync("pdftoppm", ["-png", "-r", "60", "-singlefile", pdf, join(OUT, "invoice-pdf")]);
      console.log(join(OUT, "invoice-pdf.png"));
    }
  } finally {
    await browser.close();
    await app.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
