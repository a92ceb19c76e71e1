/**
 * Every page people see sends the same security headers from one place (src/pages/shell.ts
 * pageHeaders): the hosted checkout (its form, its cancel confirmation), the hosted invoice, the
 * customer portal, the dashboard, and their error pages. A Content-Security-Policy that runs no
 * script but the invoice's Print button, loads nothing from elsewhere, lets forms post only here
 * (and, for the checkout, end at the application's callbacks), and forbids framing; nosniff;
 * no referrer; no caching.
 */
import { createHash } from "node:crypto";
import test from "ava";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";

// The headers do not depend on the store.
const server = useServer("sqlite");
const usd = (value: string | number) => ({ amount: { currency_code: "USD", value } });
const callbacks = { success_url: "https://app.example/welcome", cancelled_url: "https://shop.example:8443/pricing" };
const printHash = `'sha256-${createHash("sha256").update("window.print()").digest("base64")}'`;

function directives(csp: string): Map<string, string> {
  return new Map(
    csp
      .split(";")
      .map((d) => d.trim())
      .filter((d) => d !== "")
      .map((d) => [d.split(" ")[0] as string, d.slice(d.indexOf(" ") + 1)]),
  );
}

test("the checkout, invoice, portal and dashboard pages, and their error pages, send the CSP, nosniff and the other page headers", async (t) => {
  const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
  const card = await s.card({ name: "Team", fixed_rates: [{ code: "seats", name: "Seats", price: usd(4900) }] });
  await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, CARD_OK);
  const [invoice] = await s.invoices();
  const checkout = (await s.raw("POST", "/checkout", { subject_id: s.subjectId, rate_card_id: card, checkout_callback_urls: callbacks })).body.url as string;
  const portal = (await s.raw("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: "https://app.example/account" })).body.url as string;
  const path = (url: string) => new URL(url).pathname;

  const pages: [string, string, number][] = [
    ["checkout", path(checkout), 200],
    ["checkout cancel confirmation", `${path(checkout)}/cancel`, 200],
    ["invoice", path(invoice.hosted_url), 200],
    ["portal", path(portal), 200],
    ["portal card form", `${path(portal)}/card`, 200],
    ["dashboard sign-in", "/dashboard/sign-in", 200],
    ["unknown checkout", "/hosted/checkout/0123456789abcdefXYZ", 404],
    ["unknown invoice", "/hosted/invoices/0123456789abcdefXYZ", 404],
    ["unknown portal", "/hosted/portal/0123456789abcdefXYZ", 404],
  ];
  for (const [name, url, status] of pages) {
    const res = await fetch(`${server.url}${url}`, { redirect: "manual" });
    const html = await res.text();
    t.is(res.status, status, name);
    t.is(res.headers.get("x-content-type-options"), "nosniff", name);
    t.is(res.headers.get("x-frame-options"), "DENY", name);
    t.is(res.headers.get("referrer-policy"), "no-referrer", name);
    t.is(res.headers.get("cache-control"), "no-store", name);
    const csp = directives(res.headers.get("content-security-policy") ?? "");
    t.is(csp.get("default-src"), "'none'", name);
    t.is(csp.get("script-src"), `'unsafe-hashes' ${printHash}`, `${name}: no script but the Print button's handler`);
    t.is(csp.get("frame-ancestors"), "'none'", name);
    t.is(csp.get("base-uri"), "'none'", name);
    const formAction = name.startsWith("checkout") ? "'self' https://app.example https://shop.example:8443" : "'self'";
    t.is(csp.get("form-action"), formAction, `${name}: forms post here (a checkout's end at the application's callbacks)`);
    if (name === "invoice") t.true(html.includes('onclick="window.print()"'), "the Print button's handler is the hashed one");
  }
});
