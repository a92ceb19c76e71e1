/**
 * Prices on the pages, through a real server on both stores: the dashboard's catalog writes each
 * amount with its currency's exponent (JPY whole yen, KWD three decimals), a tiered price as a
 * table, a percentage price with its fee per event, and marks archived cards and metrics; the
 * dashboard's invoice page and the hosted invoice write a JPY or KWD invoice's amounts likewise.
 */
import test from "ava";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { type TestServer, useServer } from "../helpers/server.js";

const price = (value: string | number, currency: string) => ({ amount: { currency_code: currency, value } });

/** The text a reader sees: tags dropped, entities of the template decoded, white space collapsed. */
const text = (h: string) =>
  h
    .replace(/<[^>]+>/g, " ")
    .replace(/&#39;/g, "'")
    .replace(/&quot;/g, '"')
    .replace(/&amp;/g, "&")
    .replace(/\s+/g, " ")
    .trim();

/** A dashboard session for `key`: GET a dashboard path, its HTML. */
async function dashboard(server: TestServer, key: string): Promise<(path: string) => Promise<string>> {
  const jar = new Map<string, string>();
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join("; ");
  const keep = (res: Response) => {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";") as [string];
      jar.set(pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1));
    }
    return res;
  };
  const form = await keep(await fetch(`${server.url}/dashboard/sign-in`, { redirect: "manual" })).text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(form)?.[1] ?? "";
  const signedIn = keep(
    await fetch(`${server.url}/dashboard/sign-in`, {
      method: "POST",
      headers: { cookie: cookie(), "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ csrf, api_key: key }).toString(),
      redirect: "manual",
    }),
  );
  if (signedIn.status !== 303) throw new Error(`sign-in: ${signedIn.status}`);
  return async (path) => {
    const res = await fetch(`${server.url}${path}`, { headers: { cookie: cookie() }, redirect: "manual" });
    if (res.status !== 200) throw new Error(`GET ${path}: ${res.status}`);
    return res.text();
  };
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: the catalog page writes JPY in whole yen and KWD with three decimals, and marks archived cards and metrics`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const m = await s.metric(undefined, [], "calls");
    const old = await s.metric(undefined, [], "old_calls");
    await s.card({
      name: "Tokyo",
      fixed_rates: [{ code: "seats", name: "Seats", price: price(1000, "JPY") }],
      usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: m, included_units: 0, price: price("0.5", "JPY") }],
    });
    const kuwait = await s.card({ name: "Kuwait", fixed_rates: [{ code: "seats", name: "Seats", price: price(1250, "KWD") }] });
    await s.call("POST", `/rate-cards/${kuwait}/archive`, {});
    await s.call("POST", `/pricing-metrics/${old}/archive`, {});
    const page = text(await (await dashboard(server, s.key))("/dashboard/catalog"));
    t.regex(page, /Tokyo rc_\S+ monthly · JPY Rates of Tokyo Code Name Kind Price Included seats Seats fixed, in advance JPY 1000 api API calls usage \(simple\), in arrears JPY 0\.5 0/);
    t.regex(page, new RegExp(`Kuwait ${kuwait} archived monthly · KWD · archived \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d UTC: no new subscriptions; those on it continue`));
    t.regex(page, /seats Seats fixed, in advance KWD 1\.250 /);
    t.regex(page, new RegExp(`${old} old_calls archived old_calls sum of n`));
    t.regex(page, new RegExp(`${m} calls calls sum of n`), "a metric that is not archived is not marked");
  });

  test(`${store}: the catalog page shows a tiered price as a table, a percentage price with its fee per event, and a rate's minimum and maximum`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const calls = await s.metric(undefined, [], "calls");
    const payments = await s.metric({ aggregation_type: "sum", value_field: "amount" }, [], "payment");
    const tier = (up_to: string | null, unit: string | number, flat?: number) => ({
      up_to,
      unit_amount: { currency_code: "KWD", value: unit },
      flat_amount: flat === undefined ? null : { currency_code: "KWD", value: flat },
    });
    await s.card({
      name: "Tiers",
      fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "tiered", tiers_mode: "volume", tiers: [tier("5", 10000), tier(null, 8000, 2500)] } }],
      usage_based_rates: [
        {
          usage_based_rate_type: "simple",
          code: "api",
          name: "API calls",
          pricing_metric_id: calls,
          included_units: 0,
          price: { price_type: "tiered", tiers_mode: "graduated", tiers: [tier("1000", 2, 500), tier(null, "1.5")] },
          minimum_amount: { currency_code: "KWD", value: 5000 },
          maximum_amount: { currency_code: "KWD", value: 250000 },
        },
        {
          usage_based_rate_type: "simple",
          code: "fees",
          name: "Fees",
          pricing_metric_id: payments,
          included_units: 0,
          price: { price_type: "percentage", percent: "2.9", fixed_amount_per_event: { currency_code: "KWD", value: 100 } },
        },
      ],
    });
    const html = await (await dashboard(server, s.key))("/dashboard/catalog");
    t.is(html.match(/<table class="tiers">/g)?.length, 2, "one table per tiered price");
    const page = text(html);
    t.regex(page, /Seats fixed, in advance Volume: every unit at the price of the tier the total reaches \(volume\) Up to Per unit Flat fee 5 KWD 10\.000 — and above KWD 8\.000 KWD 2\.500 /);
    t.regex(
      page,
      /API calls usage \(simple\), in arrears Graduated: each unit at the price of the tier it falls in \(graduated\) Up to Per unit Flat fee 1000 KWD 0\.002 KWD 0\.500 and above KWD 0\.0015 — Minimum KWD 5\.000 per period Maximum KWD 250\.000 per period 0 /,
    );
    t.regex(page, /Fees usage \(simple\), in arrears 2\.9% \+ KWD 0\.100 per event 0/);
  });

  test(`${store}: the dashboard's invoice page and the hosted invoice write a KWD invoice with three decimals and a JPY one in whole yen`, async (t) => {
    for (const [currency, unit, expected] of [
      ["KWD", 1250, /Seats 2 KWD 1\.250 KWD 2\.500/],
      ["JPY", 1500, /Seats 2 JPY 1500 JPY 3000/],
    ] as const) {
      const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
      const card = await s.card({ name: "Plan", fixed_rates: [{ code: "seats", name: "Seats", price: price(unit, currency) }] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 2 } });
      const [inv] = await s.invoices();
      const hosted = text(await (await fetch(`${server.url}${new URL(inv.hosted_url).pathname}`)).text());
      t.regex(hosted, expected, `${currency}: hosted`);
      t.regex(hosted, new RegExp(`Total ${currency} ${currency === "KWD" ? "2\\.500" : "3000"}`), `${currency}: hosted total`);
      const dash = text(await (await dashboard(server, s.key))(`/dashboard/invoices/${inv.id}`));
      t.regex(dash, expected, `${currency}: dashboard`);
    }
  });

  test(`${store}: minimum, maximum and proration lines on the hosted invoice, reached from the portal, in KWD: named, negative amounts marked`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const calls = await s.metric(undefined, [], "calls");
    const storage = await s.metric(undefined, [], "storage");
    const kwd = (value: string | number) => ({ currency_code: "KWD", value });
    const usage = (code: string, name: string, metric: string, limits: Record<string, unknown>) => ({
      usage_based_rate_type: "simple",
      code,
      name,
      pricing_metric_id: metric,
      included_units: 0,
      price: { amount: kwd(100) },
      ...limits,
    });
    const card = await s.card({
      fixed_rates: [{ code: "seats", name: "Seats", price: { amount: kwd(1000) } }],
      usage_based_rates: [usage("api", "API calls", calls, { minimum_amount: kwd(5000) }), usage("gb", "Storage", storage, { maximum_amount: kwd(5000) })],
    });
    const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 5 } })).subscription;
    await s.events([["2026-01-20T00:00:00Z", "20"]], "calls");
    await s.events([["2026-01-20T00:00:00Z", "80"]], "storage");
    // Feb 15 → Mar 15; on Mar 1, 14 of 28 days are left: 5 → 2 seats credits 3 × 1.000 × 14/28 = 1.500 on Mar 15's invoice.
    await s.advance("2026-03-01T00:00:00Z");
    await s.call("PATCH", `/subscriptions/${sub.id}`, { fixed_rate_quantities: { seats: 2 } });
    await s.advance("2026-03-15T00:00:00Z");
    const invoices = await s.invoices();
    const portal = await s.call("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: "https://app.example/account" });
    const portalPage = await (await fetch(`${server.url}${new URL(portal.url).pathname}`)).text();
    const links = [...portalPage.matchAll(/href="(\/hosted\/invoices\/[0-9A-Za-z]+)"/g)].map((m) => m[1] as string);
    const paths = invoices.map((i) => new URL(i.hosted_url).pathname);
    // Links: each invoice in the invoice list, and again beside the credit it had applied (the ledger).
    t.deepEqual([...new Set(links)].sort(), [...paths].sort(), "the portal links every invoice");
    t.regex(text(portalPage), /KWD 5\.000/, "the portal writes totals with three decimals");
    const page = async (path: string) => (await fetch(`${server.url}${path}`)).text();
    // Jan 15: 5 seats; Feb 15: the usage of Jan 15 → Feb 15 and 5 seats; Mar 15: 2 seats, paid in
    // part by the seat decrease's credit (a grant on the subject's balance, DESIGN §13 and §14).
    const [feb, mar] = [await page(paths[1] as string), await page(paths[2] as string)];
    // API calls: 20 × 0.100 = 2.000, raised to 5.000 by a minimum line of 3.000; storage: 80 × 0.100 = 8.000, capped at 5.000 by −3.000.
    t.regex(text(feb), /API calls 20 KWD 0\.100 KWD 2\.000 API calls \(minimum per period\) 1 KWD 3\.000 KWD 3\.000 /);
    t.regex(text(feb), /Storage 80 KWD 0\.100 KWD 8\.000 Storage \(maximum per period\) 1 KWD -3\.000 KWD -3\.000 /);
    t.regex(feb, /<span class="credit">KWD -3\.000<\/span>/, "a negative amount is marked");
    // The decrease of Mar 1 (5 → 2 seats) gave back 1.500 of this invoice (3 seats × 1.000 × 14/28), recorded on it (given-back.ts).
    t.regex(text(feb), /Total KWD 15\.000 Amount credited KWD -1\.500 A negative amount is a credit\./, "5 seats 5.000 + 2.000 + 3.000 + 8.000 − 3.000 = 15.000");
    // 2 seats 2.000 + usage 5.000 = 7.000; the decrease's credit: 3 seats × 1.000 × 14/28 = 1.500; due 5.500.
    t.regex(text(mar), /Total KWD 7\.000 Credit applied cg_\w+ KWD -1\.500 Amount due KWD 5\.500/);
  });
}
