/**
 * Credits on the pages (DESIGN §14), through a real server on both stores: the hosted invoice
 * and the dashboard's invoice page show what each grant paid (negative) and the amount due under
 * the total; the customer portal shows the balance per currency and the ledger, newest first, by
 * pages; the dashboard's subject page grants promotional credit through its form (a good post
 * grants, a bad one shows each error beside its field and writes nothing, a post without the
 * CSRF token is refused and writes nothing) and voids a grant; JPY and KWD credit is written with
 * the currency's exponent everywhere.
 */
import test from "ava";
import { ledger, paid, promo } from "../helpers/credit-bodies.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { fixedRate, flat, money, usageRate } from "../helpers/price-bodies.js";
import { Scenario } from "../helpers/scenario.js";
import { type TestServer, useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

/** The text a reader sees: tags dropped, entities of the template decoded, white space collapsed. */
const text = (h: string) =>
  h
    .replace(/<[^>]+>/g, " ")
    .replace(/&#39;/g, "'")
    .replace(/&quot;/g, '"')
    .replace(/&amp;/g, "&")
    .replace(/\s+/g, " ")
    .trim();

interface Dashboard {
  get(path: string): Promise<Response>;
  post(path: string, form: Record<string, string>): Promise<Response>;
  csrf: string;
}

/** A dashboard session for `key` (cookies kept, no redirect followed), and its CSRF token. */
async function dashboard(server: TestServer, key: string): Promise<Dashboard> {
  const jar = new Map<string, string>();
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join("; ");
  const keep = (res: Response) => {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";") as [string];
      jar.set(pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1));
    }
    return res;
  };
  const csrfOf = (h: string) => /name="csrf" value="([^"]+)"/.exec(h)?.[1] ?? "";
  const form = await keep(await fetch(`${server.url}/dashboard/sign-in`, { redirect: "manual" })).text();
  const signedIn = keep(
    await fetch(`${server.url}/dashboard/sign-in`, {
      method: "POST",
      headers: { cookie: cookie(), "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ csrf: csrfOf(form), api_key: key }).toString(),
      redirect: "manual",
    }),
  );
  if (signedIn.status !== 303) throw new Error(`sign-in: ${signedIn.status}`);
  const get = async (path: string) => keep(await fetch(`${server.url}${path}`, { headers: { cookie: cookie() }, redirect: "manual" }));
  const post = async (path: string, body: Record<string, string>) =>
    keep(
      await fetch(`${server.url}${path}`, {
        method: "POST",
        headers: { cookie: cookie(), "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams(body).toString(),
        redirect: "manual",
      }),
    );
  const csrf = csrfOf(await (await get("/dashboard")).text());
  return { get, post, csrf };
}

/** A usage plan at `price` per unit in `currency`; subscribed (free: no card on file). */
async function onUsagePlan(s: Scenario, price: string | number = 10, currency = "USD"): Promise<void> {
  const m = await s.metric();
  await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, flat(price, currency))] }) });
}

async function portalPath(s: Scenario): Promise<string> {
  const r = await s.call("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: "https://app.example/account" });
  return new URL(r.url).pathname;
}

const grantsOf = async (s: Scenario): Promise<Json[]> => (await s.call("GET", `/credit-grants?subject_id=${s.subjectId}&limit=100`)).credit_grants;

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: the hosted invoice and the dashboard's invoice page show each grant's part, negative, and the amount due under the total`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    await onUsagePlan(s);
    const first = await promo(s, "first", 2000, { priority: 10 });
    const second = await promo(s, "second", 3000);
    await s.events([["2026-01-20T00:00:00Z", "800"]]);
    await s.advance("2026-02-15T00:00:00Z");
    const inv = (await s.invoices()).find((i) => i.credits_applied.length > 0);
    // 800 × 10 = 8,000; priority 10 first (2,000), then 3,000; 8,000 − 5,000 = 3,000 due.
    t.deepEqual([inv.total_amount.value, inv.amount_due.value], ["8000", "3000"]);
    const hosted = text(await (await fetch(`${server.url}${new URL(inv.hosted_url).pathname}`)).text());
    t.regex(hosted, new RegExp(`Total USD 80\\.00 Credit applied ${first} USD -20\\.00 Credit applied ${second} USD -30\\.00 Amount due USD 30\\.00`));
    const dash = await dashboard(server, s.key);
    const page = text(await (await dash.get(`/dashboard/invoices/${inv.id}`)).text());
    t.regex(page, new RegExp(`Total USD 80\\.00 Credits applied ${first} USD -20\\.00 ${second} USD -30\\.00 Amount due USD 30\\.00`));
  });

  test(`${store}: a draft says what credit it would apply when finalized; finalized, what it applied`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z", { invoiceGraceSeconds: 3600 });
    await onUsagePlan(s);
    const grant = await promo(s, "promo", 1000);
    await s.events([["2026-01-20T00:00:00Z", "30"]]);
    await s.advance("2026-02-15T00:00:00Z");
    const inv = (await s.invoices()).find((i) => i.line_items.length > 0);
    t.is(inv.status, "draft");
    const hosted = async () => text(await (await fetch(`${server.url}${new URL(inv.hosted_url).pathname}`)).text());
    // 30 × 10 = 300, all paid by the grant: nothing due.
    t.regex(await hosted(), new RegExp(`Total USD 3\\.00 Credit to apply ${grant} USD -3\\.00 Amount due USD 0\\.00`));
    const dash = await dashboard(server, s.key);
    t.regex(text(await (await dash.get(`/dashboard/invoices/${inv.id}`)).text()), new RegExp(`Credits to apply ${grant} USD -3\\.00 Amount due USD 0\\.00`));
    await s.call("POST", `/invoices/${inv.id}/finalize`, {});
    t.regex(await hosted(), new RegExp(`Status: paid .*Total USD 3\\.00 Credit applied ${grant} USD -3\\.00 Amount due USD 0\\.00`));
  });

  test(`${store}: a credit purchase line and a commitment true-up line are named on the hosted invoice, in KWD`, async (t) => {
    const hosted = async (i: Json) => text(await (await fetch(`${server.url}${new URL(i.hosted_url).pathname}`)).text());
    // A paid plan subscribed through a checkout puts a card on file; a paid grant is then invoiced and charged.
    const buyer = await Scenario.start(server, "2026-01-15T00:00:00Z");
    await buyer.subscribe({ rate_card_id: await buyer.card({ fixed_rates: [fixedRate(flat(1000, "KWD"))] }), fixed_rate_quantities: { seats: 1 } });
    const bought = await paid(buyer, "bought", 1250, {}, "KWD");
    t.like(bought.credit_grant, { status: "active" });
    const purchase = await buyer.call("GET", `/invoices/${bought.credit_grant.invoice_id}`);
    t.regex(await hosted(purchase), /Credit purchase: KWD 1\.250 1 KWD 1\.250 KWD 1\.250 Total KWD 1\.250/);
    // A usage plan at 0.100 a unit with a commitment of KWD 10.000 a period.
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const m = await s.metric();
    await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, flat(100, "KWD"))] }), minimum_commitment: money(10000, "KWD") });
    await s.events([["2026-01-20T00:00:00Z", "20"]]);
    await s.advance("2026-02-15T00:00:00Z");
    const feb = (await s.invoices()).find((i) => i.line_items.some((l: Json) => l.kind === "commitment_true_up"));
    // Jan 15 → Feb 15: usage 20 × 0.100 = 2.000 of a 10.000 commitment: a true-up of 8.000.
    t.regex(await hosted(feb), /Minimum commitment KWD 10\.000: charges of the period KWD 2\.000 \(true-up\) 1 KWD 8\.000 KWD 8\.000 Total KWD 10\.000/);
  });

  test(`${store}: an invoice without credit shows no credit rows and no amount due`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    await onUsagePlan(s);
    await s.events([["2026-01-20T00:00:00Z", "5"]]);
    await s.advance("2026-02-15T00:00:00Z");
    const inv = (await s.invoices()).find((i) => i.line_items.length > 0);
    const hosted = text(await (await fetch(`${server.url}${new URL(inv.hosted_url).pathname}`)).text());
    t.regex(hosted, /Total USD 0\.50/);
    t.notRegex(hosted, /Credit applied|Amount due/);
  });

  test(`${store}: the portal shows the balance per currency and the ledger newest first, by pages of 20`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    await onUsagePlan(s);
    for (let i = 1; i <= 21; i++) await promo(s, `g${i}`, 100 * i, { priority: i });
    await promo(s, "yen", 1500, {}, "JPY");
    await promo(s, "fils", 1250, {}, "KWD");
    await s.events([["2026-01-20T00:00:00Z", "250"]]);
    await s.advance("2026-02-15T00:00:00Z");
    // 21 grants of 100 × i (sum 23,100); 250 × 10 = 2,500 spent from priority 1 up: g1..g6 (2,100) and 400 of g7.
    t.deepEqual((await ledger(s, "USD")).slice(-2), [
      ["application", "-600"],
      ["application", "-400"],
    ]);
    const path = await portalPath(s);
    const html = await (await fetch(`${server.url}${path}`)).text();
    const page = text(html);
    t.regex(page, /Credit Credit balance per currency Currency Balance JPY JPY 1500 KWD KWD 1\.250 USD USD 206\.00/, "23,100 − 2,500 = 20,600 cents");
    t.regex(html, /<caption>Credit ledger, newest first<\/caption>/);
    // Newest first: the last application (g7's 400), then the others, then the KWD and JPY grants.
    t.regex(page, /Date Movement Description Amount 2026-02-15 Applied to an invoice .*? USD -4\.00 2026-02-15 Applied to an invoice .*? USD -6\.00/);
    const rows = (h: string) => (h.match(/<tr>/g) ?? []).length;
    const ledgerOf = (h: string) => h.slice(h.indexOf('class="credit-ledger"'), h.indexOf("</table>", h.indexOf('class="credit-ledger"')));
    // 21 + 2 grants and 7 applications: 30 entries, 20 on the first page (+ the head row).
    t.is(rows(ledgerOf(html)), 21);
    t.regex(html, /href="[^"]+\?ledger_offset=20#credit">Older →/);
    const second = await (await fetch(`${server.url}${path}?ledger_offset=20`)).text();
    t.is(rows(ledgerOf(second)), 11);
    t.regex(text(ledgerOf(second)), /Credit granted .*? USD 1\.00$/, "the oldest entry, g1's grant, is last");
    t.regex(second, /href="[^"]+#credit">← Newer/);
  });

  test(`${store}: past 5,000 ledger entries the portal still shows the newest first`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const first = await promo(s, "first", 100);
    // 5,100 older movements written straight into the ledger (one per made-up invoice: the ledger's unique key).
    await withDatabase(server.db.url, async (db) => {
      const [row] = (await db.dataSource.query("SELECT environment_id, subject_id FROM credit_grants WHERE id = ?", [first])) as { environment_id: string; subject_id: string }[];
      for (let part = 0; part < 5100; part += 300) {
        const values = Array.from({ length: 300 }, (_, i) => [
          `cle_bulk${part + i}`,
          row?.environment_id,
          row?.subject_id,
          first,
          "application",
          "USD",
          "0",
          `inv_bulk${part + i}`,
          "",
          "older",
          "2026-01-15 00:00:00.000",
        ]);
        await db.dataSource.query(
          `INSERT INTO credit_ledger (id, environment_id, subject_id, grant_id, entry_type, currency, amount, invoice_id, credit_note_id, description, created_at) VALUES ${values.map(() => "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)").join(", ")}`,
          values.flat(),
        );
      }
    });
    await promo(s, "latest", 4200);
    const html = await (await fetch(`${server.url}${await portalPath(s)}`)).text();
    t.regex(text(html), /Date Movement Description Amount 2026-01-15 Credit granted Promotional credit USD 42\.00/, "the newest entry first");
  });

  test(`${store}: the dashboard grants promotional credit through its form; the balance, grant and ledger show on the subject's page`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const dash = await dashboard(server, s.key);
    const res = await dash.post(`/dashboard/subjects/${s.subjectId}/credit-grants`, { csrf: dash.csrf, amount: "12.50", currency: "usd", expires_at: "2026-06-01T00:00", priority: "5" });
    t.is(res.status, 303);
    t.regex(res.headers.get("location") ?? "", /\?done=credit_granted/);
    const [g] = await grantsOf(s);
    t.like(g, { category: "promotional", priority: 5, status: "active", expires_at: "2026-06-01T00:00:00Z", amount: { currency_code: "USD", value: "1250" } });
    const page = text(await (await dash.get(`/dashboard/subjects/${s.subjectId}?done=credit_granted`)).text());
    t.regex(page, /The credit was granted\./);
    t.regex(page, /Credit balance per currency Currency Balance Available \(less current usage\) USD USD 12\.50 USD 12\.50/);
    t.regex(page, new RegExp(`${g.id} Promotional active 5 USD 12\\.50 USD 12\\.50 2026-06-01 00:00 UTC Void`));
    t.regex(page, /Credit ledger, newest first Date Movement Description Amount 2026-01-15 Credit granted .*? USD 12\.50/);
  });

  test(`${store}: a bad grant form is shown again with each error beside its field, and writes nothing`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const dash = await dashboard(server, s.key);
    const cases: [Record<string, string>, RegExp][] = [
      [{ amount: "abc", currency: "XYZ", priority: "50" }, /amount: must be a number, as 12\.50; currency: must be an active ISO 4217 code/],
      [{ amount: "1.5", currency: "JPY", priority: "50" }, /amount: JPY has no decimals/],
      [{ amount: "1.2345", currency: "KWD", priority: "50" }, /amount: KWD has at most 3 decimals/],
      [{ amount: "0", currency: "USD", priority: "50" }, /No credit was granted: amount: /],
      [{ amount: "10", currency: "USD", priority: "101" }, /No credit was granted: priority: /],
      [{ amount: "10", currency: "USD", expires_at: "2025-01-01T00:00", priority: "50" }, /No credit was granted: expires_at: /],
    ];
    for (const [form, error] of cases) {
      const res = await dash.post(`/dashboard/subjects/${s.subjectId}/credit-grants`, { csrf: dash.csrf, ...form });
      const html = await res.text();
      t.is(res.status, 400, JSON.stringify(form));
      t.regex(text(html), error, JSON.stringify(form));
      t.regex(html, /aria-invalid="true" aria-describedby="grant-\w+-error"/, "the field is marked");
      t.regex(html, new RegExp(`name="amount" inputmode="decimal" required value="${form.amount?.replace(".", "\\.")}"`), "the form keeps what was typed");
    }
    t.deepEqual(await grantsOf(s), [], "nothing was granted");
    t.deepEqual(await ledger(s), []);
  });

  test(`${store}: the grant and void forms need the session's CSRF token; without it nothing is written`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const dash = await dashboard(server, s.key);
    for (const csrf of ["", "not-the-token"]) {
      const res = await dash.post(`/dashboard/subjects/${s.subjectId}/credit-grants`, { csrf, amount: "10", currency: "USD", priority: "50" });
      t.is(res.status, 403);
    }
    t.deepEqual(await grantsOf(s), []);
    const id = await promo(s, "promo", 1000);
    t.is((await dash.post(`/dashboard/subjects/${s.subjectId}/credit-grants/${id}/void`, { csrf: "" })).status, 403);
    t.is((await s.call("GET", `/credit-grants/${id}`)).status, "active");
    const voided = await dash.post(`/dashboard/subjects/${s.subjectId}/credit-grants/${id}/void`, { csrf: dash.csrf });
    t.is(voided.status, 303);
    t.like(await s.call("GET", `/credit-grants/${id}`), { status: "voided", remaining_amount: { value: "0" } });
    t.deepEqual(await ledger(s), [
      ["grant", "1000"],
      ["void", "-1000"],
    ]);
    const page = text(await (await dash.get(`/dashboard/subjects/${s.subjectId}?done=credit_voided`)).text());
    t.regex(page, /The grant was voided/);
    t.regex(page, /Voided .*? USD -10\.00/);
    // Voiding again is refused on a page with a link back; another subject's grant is not found.
    t.is((await dash.post(`/dashboard/subjects/${s.subjectId}/credit-grants/${id}/void`, { csrf: dash.csrf })).status, 409);
    const other = (await s.call("POST", "/subjects", { name: "Other" })).id;
    t.is((await dash.post(`/dashboard/subjects/${other}/credit-grants/${id}/void`, { csrf: dash.csrf })).status, 404);
  });

  test(`${store}: JPY credit in whole yen and KWD credit with three decimals, on the dashboard's form, its page and the portal`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const dash = await dashboard(server, s.key);
    for (const [amount, currency] of [
      ["1500", "JPY"],
      ["1.25", "KWD"],
    ]) {
      t.is((await dash.post(`/dashboard/subjects/${s.subjectId}/credit-grants`, { csrf: dash.csrf, amount: amount as string, currency: currency as string, priority: "50" })).status, 303);
    }
    t.deepEqual(
      (await grantsOf(s)).map((g) => [g.amount.currency_code, g.amount.value]),
      [
        ["JPY", "1500"],
        ["KWD", "1250"],
      ],
    );
    const page = text(await (await dash.get(`/dashboard/subjects/${s.subjectId}`)).text());
    t.regex(page, /JPY JPY 1500 JPY 1500 KWD KWD 1\.250 KWD 1\.250/);
    t.regex(page, /Credit granted .*? KWD 1\.250/);
    const portal = text(await (await fetch(`${server.url}${await portalPath(s)}`)).text());
    t.regex(portal, /Credit balance per currency Currency Balance JPY JPY 1500 KWD KWD 1\.250/);
    t.regex(portal, /Credit granted .*? KWD 1\.250 .*Credit granted .*? JPY 1500/, "newest first");
  });
}
