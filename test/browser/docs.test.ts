/**
 * The API reference at /docs in a real browser (headless Chromium from Debian's package), with
 * JavaScript off: it renders, lists every documented path with its method, each operation's
 * tables and example, reads on a phone-sized screen without sideways scrolling of the page, and
 * prints. A screenshot is kept for a person to look at (the test's log says where).
 */
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { chromium } from "playwright-core";
import { loadOpenApi } from "../../src/pages/docs.js";
import { CHROMIUM, chromiumMissing } from "../helpers/chromium.js";
import { startTestServer } from "../helpers/server.js";

test("the API reference page renders every documented operation, on a phone too, and prints", async (t) => {
  if (!existsSync(CHROMIUM)) throw new Error(chromiumMissing());
  const doc = loadOpenApi();
  const server = await startTestServer("sqlite");
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const outside: string[] = [];
  try {
    const page = await browser.newPage({ javaScriptEnabled: false, viewport: { width: 1200, height: 900 } });
    page.on("request", (r) => {
      if (!r.url().startsWith(server.url)) outside.push(r.url());
    });
    const res = await page.goto(`${server.url}/docs`);
    t.is(res?.status(), 200);
    t.is(await page.title(), doc.info.title);

    // Every documented path and method is in the operations list and has its section.
    const listed = await page.locator("nav li li").allInnerTexts();
    const expected = Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${path}`));
    t.deepEqual(listed.map((x) => x.replace(/\s+/g, " ").trim()).sort(), expected.sort());
    for (const item of Object.values(doc.paths)) {
      for (const op of Object.values(item)) t.is(await page.locator(`#op-${op.operationId} h3`).count(), 1, op.operationId);
    }

    // One operation read in full: parameters, request and response fields, errors, the curl.
    const create = page.locator("#op-CreateSubscription");
    t.regex(await create.locator("h3").innerText(), /POST\s+\/subscriptions/);
    t.regex(
      await create.getByRole("table", { name: /^Request body \(JSON\)/ }).innerText(),
      /any field may be left out or null[\s\S]*fixed_rate_quantities\s+map of string → decimal string \| number\s/,
    );
    t.regex(await create.locator("table", { hasText: "Response 200" }).innerText(), /every field is always present[\s\S]*result\s+CreateSubscriptionResult\s*$/);
    t.regex(await create.getByRole("table", { name: /^Errors/ }).innerText(), /404\s+not_found/);
    t.regex(await create.locator("pre").innerText(), /curl -X POST "\$BASE_URL\/subscriptions" \\\n\s+-H "X-API-Key: \$API_KEY"/);
    const list = page.locator("#op-ListSubscriptions table", { hasText: "Parameters" });
    t.regex(await list.innerText(), /subject_id\s+query\s+string/);
    // A link from a type to its schema's table.
    await create.getByRole("link", { name: "CreateSubscriptionResult" }).first().click();
    t.regex(page.url(), /#schema-CreateSubscriptionResult$/);

    const dir = mkdtempSync(join(tmpdir(), "docs-page-"));
    const wide = join(dir, "docs.png");
    await page.goto(`${server.url}/docs`);
    await page.screenshot({ path: wide });

    // A phone: the page itself does not scroll sideways (wide tables scroll in their own box).
    const phone = await browser.newPage({ javaScriptEnabled: false, viewport: { width: 375, height: 740 } });
    await phone.goto(`${server.url}/docs#op-CreateSubscription`);
    const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    t.true(overflow <= 1, `the page is ${overflow}px wider than a phone`);
    const narrow = join(dir, "docs-phone.png");
    await phone.screenshot({ path: narrow });
    t.log(`screenshots: ${wide}, ${narrow}`);

    const pdf = await page.pdf({ format: "A4" }).catch(() => undefined);
    if (pdf) t.true(pdf.length > 10_000, "prints to a PDF");
    t.deepEqual(outside, [], "nothing is fetched from another site");
  } finally {
    await browser.close();
    await server.stop();
  }
});
