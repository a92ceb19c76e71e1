/**
 * The operator dashboard over plain HTTP, on both stores: sign-in with a secret key only (a
 * publishable, revoked or unknown key is refused), the session cookie's attributes, CSRF refusal
 * on every form (sign-in included), a key of one environment never seeing another's subject,
 * invoice, subscription or clock (404), sign-out ending the session on the server (the old cookie
 * no longer opens anything), and expiry. Also: rejected usage events with their reasons, the
 * webhook endpoints needing attention, and the environment switcher (a browser signed in to
 * several environments acts for the active one only).
 */
import test from "ava";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { type TestServer, startTestServer, useServer } from "../helpers/server.js";
import { keyPrefix } from "../../src/billing/keys.js";
import { createDatabase } from "../../src/db/datasource.js";
import { SqlAuthStore } from "../../src/db/stores/auth-store.js";
import { rest } from "../helpers/clients.js";
import { startReceiver } from "../helpers/receiver.js";

const usd = (value: string | number) => ({ amount: { currency_code: "USD", value } });

interface Browser {
  cookies: Map<string, string>;
  get(path: string): Promise<Response>;
  post(path: string, form: Record<string, string>): Promise<Response>;
}

/** A cookie jar over fetch (no redirects followed). */
function browser(server: TestServer): Browser {
  const cookies = new Map<string, string>();
  const remember = (res: Response) => {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";");
      const i = (pair as string).indexOf("=");
      const name = (pair as string).slice(0, i);
      const value = (pair as string).slice(i + 1);
      if (/Max-Age=0/.test(c)) cookies.delete(name);
      else cookies.set(name, value);
    }
    return res;
  };
  const header = () => [...cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  return {
    cookies,
    get: async (path) => remember(await fetch(`${server.url}${path}`, { headers: { cookie: header() }, redirect: "manual" })),
    post: async (path, form) =>
      remember(
        await fetch(`${server.url}${path}`, {
          method: "POST",
          headers: { cookie: header(), "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams(form).toString(),
          redirect: "manual",
        }),
      ),
  };
}

const csrfOf = (html: string) => /name="csrf" value="([^"]+)"/.exec(html)?.[1] ?? "";

/** Signs in with `key`; the sign-in POST's response. */
async function signIn(b: Browser, key: string): Promise<Response> {
  const form = await b.get("/dashboard/sign-in");
  return b.post("/dashboard/sign-in", { csrf: csrfOf(await form.text()), api_key: key });
}

for (const store of STORES) {
  const server = useServer(store);
  const seeded: { scenario?: Scenario; invoiceId?: string; subscriptionId?: string } = {};
  const scenario = async () => {
    if (!seeded.scenario) {
      const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
      const card = await s.card({ name: "Team", fixed_rates: [{ code: "seats", name: "Seats", price: usd(4900) }] });
      seeded.subscriptionId = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription.id;
      seeded.invoiceId = (await s.invoices())[0].id;
      seeded.scenario = s;
    }
    return seeded as Required<typeof seeded>;
  };

  test.serial(`${store}: a secret key signs in; the cookie is HttpOnly, SameSite=Strict, scoped to /dashboard and expires`, async (t) => {
    const b = browser(server);
    t.is((await b.get("/dashboard")).status, 303, "signed out: sent to the sign-in page");
    const form = await b.get("/dashboard/sign-in");
    t.is(form.status, 200);
    t.regex(form.headers.get("content-security-policy") ?? "", /default-src 'none'/);
    const res = await b.post("/dashboard/sign-in", { csrf: csrfOf(await form.text()), api_key: server.keys.a });
    t.is(res.status, 303);
    t.is(res.headers.get("location"), "/dashboard");
    const cookie = res.headers.getSetCookie().find((c) => c.startsWith("billing_dashboard="));
    t.truthy(cookie);
    t.regex(cookie as string, /; HttpOnly/);
    t.regex(cookie as string, /; SameSite=Strict/);
    t.regex(cookie as string, /; Path=\/dashboard/);
    t.regex(cookie as string, /; Max-Age=28800(;|$)/, "8 hours by default");
    const home = await b.get("/dashboard");
    t.is(home.status, 200);
    const html = await home.text();
    t.regex(html, /Environment: env-a/);
    t.notRegex(html, new RegExp(server.keys.a), "the key is never echoed");
  });

  test.serial(`${store}: publishable, revoked, unknown and empty keys are refused`, async (t) => {
    for (const [key, why] of [
      [server.keys.aPublishable, /publishable key cannot open the dashboard/],
      [server.keys.aRevoked, /not valid or has been revoked/],
      ["sk_test_nope", /not valid or has been revoked/],
      ["", /Enter a secret API key/],
    ] as const) {
      const b = browser(server);
      const res = await signIn(b, key);
      t.is(res.status, 401);
      t.regex(await res.text(), why);
      t.false(b.cookies.has("billing_dashboard"));
    }
  });

  test.serial(`${store}: a sign-in without the form's token (cross-site) is refused`, async (t) => {
    const b = browser(server);
    const res = await b.post("/dashboard/sign-in", { csrf: "forged", api_key: server.keys.a });
    t.is(res.status, 403);
    t.false(b.cookies.has("billing_dashboard"));
    await b.get("/dashboard/sign-in");
    t.is((await b.post("/dashboard/sign-in", { csrf: "forged", api_key: server.keys.a })).status, 403, "a login cookie with another token");
  });

  test.serial(`${store}: every form refuses a POST without the session's CSRF token, and changes nothing`, async (t) => {
    const { scenario: s, invoiceId, subscriptionId } = await scenario();
    const b = browser(server);
    t.is((await signIn(b, s.key)).status, 303);
    const good = csrfOf(await (await b.get(`/dashboard/subscriptions/${subscriptionId}`)).text());
    t.truthy(good);
    for (const [path, form] of [
      [`/dashboard/subscriptions/${subscriptionId}/cancel`, { when: "now" }],
      [`/dashboard/invoices/${invoiceId}/void`, {}],
      [`/dashboard/clocks/${s.clockId}/advance`, { frozen_time: "2026-03-01T00:00" }],
      ["/dashboard/sign-out", {}],
    ] as const) {
      t.is((await b.post(path, { ...form })).status, 403, `${path} without a token`);
      t.is((await b.post(path, { ...form, csrf: "x".repeat(43) })).status, 403, `${path} with a wrong token`);
    }
    t.is((await s.call("GET", `/subscriptions/${subscriptionId}`)).status, "active");
    t.is((await s.call("GET", `/invoices/${invoiceId}`)).status, "paid");
    t.is((await s.call("GET", `/test-clocks/${s.clockId}`)).frozen_time, "2026-01-15T00:00:00Z");
    t.is((await b.get("/dashboard")).status, 200, "still signed in");
  });

  test.serial(`${store}: a key of another environment sees none of this one's records (404), and lists none of them`, async (t) => {
    const { scenario: s, invoiceId, subscriptionId } = await scenario();
    const mine = browser(server);
    await signIn(mine, s.key);
    t.is((await mine.get(`/dashboard/invoices/${invoiceId}`)).status, 200);
    const subjectPage = await (await mine.get(`/dashboard/subjects/${s.subjectId}`)).text();
    t.true(subjectPage.includes(invoiceId) && subjectPage.includes(subscriptionId), "the subject's invoices and subscriptions");
    t.true((await (await mine.get(`/dashboard/subscriptions/${subscriptionId}`)).text()).includes(invoiceId), "the subscription's invoices");
    await s.call("POST", "/usage-events", { idempotency_key: "dash-evt-1", subject_id: s.subjectId, event_name: "page_view", data: { path: "<b>/home</b>" } });
    t.is((await s.call("POST", "/usage-events", { idempotency_key: "dash-evt-1", subject_id: s.subjectId, event_name: "page_view", data: { path: "<b>/home</b>" } })).status, "duplicate");
    const events = await (await mine.get("/dashboard/events")).text();
    t.regex(events, /dash-evt-1/);
    t.regex(events, /&lt;b&gt;\/home&lt;\/b&gt;/, "event data is escaped");
    const overview = await (await mine.get("/dashboard")).text();
    t.regex(overview, /Invoiced this month.*?<strong>USD 49\.00<\/strong> <span class="muted">on 1 invoice</s, "revenue by currency, exact on both stores");
    t.regex(overview, /None: every billing cycle closed/);
    t.regex(overview, /Events ingested per hour, last 7 days <span class="muted">\(1 accepted, UTC\)/, "the duplicate is not counted");
    t.regex(overview, /role="img" aria-label="Events ingested per hour, last 7 days: 168 buckets, largest 1"/);
    const other = browser(server);
    await signIn(other, await server.freshKey("test"));
    const otherOverview = await (await other.get("/dashboard")).text();
    t.regex(otherOverview, /Invoiced this month.*?Nothing invoiced/s);
    t.regex(otherOverview, /\(0 accepted, UTC\)/);
    for (const path of [`/dashboard/subjects/${s.subjectId}`, `/dashboard/invoices/${invoiceId}`, `/dashboard/subscriptions/${subscriptionId}`, `/dashboard/clocks/${s.clockId}`]) {
      t.is((await other.get(path)).status, 404, path);
    }
    const csrf = csrfOf(await (await other.get("/dashboard")).text());
    t.is((await other.post(`/dashboard/subscriptions/${subscriptionId}/cancel`, { csrf, when: "now" })).status, 404);
    t.is((await other.post(`/dashboard/invoices/${invoiceId}/void`, { csrf })).status, 404);
    for (const path of ["/dashboard/invoices", "/dashboard/subscriptions", "/dashboard/subjects", "/dashboard/clocks", "/dashboard/events", "/dashboard"]) {
      const html = await (await other.get(path)).text();
      t.false(html.includes(s.subjectId) || html.includes(invoiceId) || html.includes(subscriptionId) || html.includes(s.clockId), path);
    }
    t.is((await s.call("GET", `/subscriptions/${subscriptionId}`)).status, "active");
  });

  test.serial(`${store}: rejected usage events are kept with their reasons and shown newest first; another environment sees none`, async (t) => {
    const { scenario: s } = await scenario();
    const b = browser(server);
    await signIn(b, s.key);
    t.regex(await (await b.get("/dashboard/events?show=rejected")).text(), /No rejected events\./);
    const batch = await s.call("POST", "/usage-events/batch", {
      events: [
        { idempotency_key: "rej-ok-1", subject_id: s.subjectId, event_name: "page_view", data: {} },
        { idempotency_key: "rej-nobody", subject_id: "<i>nobody</i>", event_name: "page_view", data: {}, timestamp: "2026-01-14T10:00:00Z" },
        { idempotency_key: "", subject_id: s.subjectId, event_name: "page_view", data: {} },
      ],
    });
    t.deepEqual(
      batch.results.map((r: { status: string }) => r.status),
      ["accepted", "rejected", "rejected"],
    );
    // A single event refused with 400/404 is kept too.
    t.is((await s.raw("POST", "/usage-events", { idempotency_key: "rej-single", subject_id: "ghost", event_name: "x".repeat(300), data: {} })).status, 400);
    const page = await b.get("/dashboard/events?show=rejected");
    t.is(page.status, 200);
    const html = await page.text();
    const rows = [...html.matchAll(/<tr><td>(.*?)<\/tr>/g)].map((m) => m[1] as string);
    t.is(rows.length, 3, "three rejected events");
    t.regex(rows[0] as string, /INVALID_FIELD.*event_name: must have at most 255 characters.*>event_name<.*ghost.*x{254}…/, "newest first; the name as sent, cut");
    t.regex(rows[1] as string, /INVALID_FIELD.*events\[2\]\.idempotency_key: is required.*events\[2\]\.idempotency_key/);
    t.regex(
      rows[2] as string,
      /SUBJECT_NOT_FOUND.*events\[1\]\.subject_id: subject &quot;&lt;i&gt;nobody&lt;\/i&gt;&quot; not found.*events\[1\]\.subject_id.*&lt;i&gt;nobody&lt;\/i&gt;.*rej-nobody.*2026-01-14T10:00:00\.000Z/,
    );
    t.false(html.includes("<i>nobody</i>"), "escaped");
    t.regex(await (await b.get("/dashboard/events")).text(), /rej-ok-1/, "the accepted one is on the accepted tab");
    const other = browser(server);
    await signIn(other, await server.freshKey("test"));
    t.regex(await (await other.get("/dashboard/events?show=rejected")).text(), /No rejected events\./);
  });

  test.serial(`${store}: the overview lists webhook endpoints needing attention (failing, with the last error), not healthy ones; the endpoint's page shows its deliveries`, async (t) => {
    const fast = await startTestServer(store, { WEBHOOK_ALLOW_PRIVATE_HOSTS: "true", WEBHOOK_DELIVERY_INTERVAL_MS: "50", WEBHOOK_RETRY_BASE_MS: "100", WEBHOOK_RETRY_WINDOW_SECONDS: "1" });
    const broken = await startReceiver();
    const healthy = await startReceiver();
    try {
      broken.answer = () => 503;
      const key = await fast.freshKey("test");
      const b = browser(fast);
      await signIn(b, key);
      t.regex(await (await b.get("/dashboard")).text(), /None: every webhook endpoint is delivering\./);
      const bad = (await rest(fast.url, "POST", "/webhook-endpoints", key, { url: `${broken.url}/hooks?x=<b>` })).body;
      const good = (await rest(fast.url, "POST", "/webhook-endpoints", key, { url: `${healthy.url}/fine` })).body;
      await rest(fast.url, "POST", "/subjects", key, { name: "A" });
      for (let i = 0; ; i++) {
        const ep = (await rest(fast.url, "GET", `/webhook-endpoints/${bad.id}`, key)).body;
        if (ep.failing_since) break;
        if (i > 200) throw new Error("the endpoint never failed");
        await new Promise((r) => setTimeout(r, 100));
      }
      await healthy.until((l) => l.length >= 1);
      const html = await (await b.get("/dashboard")).text();
      const section = html.slice(html.indexOf('id="h-webhooks"'), html.indexOf('id="h-active"'));
      t.true(section.includes(`href="/dashboard/webhooks/${bad.id}"`), "linked to the endpoint's page");
      t.true(section.includes("/hooks?x=&lt;b&gt;"), "the URL, escaped");
      t.regex(section, /<span class="badge void">failing<\/span>/);
      t.regex(section, /HTTP 503/, "the last error");
      t.regex(section, /<td class="n">1<\/td><td>/, "one delivery failed in the last 24 hours");
      t.false(section.includes(good.id) || section.includes("/fine"), "a healthy endpoint is not listed");
      const page = await b.get(`/dashboard/webhooks/${bad.id}`);
      t.is(page.status, 200);
      const detail = await page.text();
      t.regex(detail, /subject\.created/);
      t.regex(detail, /<span class="badge failed">failed<\/span>/);
      t.regex(await (await b.get(`/dashboard/webhooks/${bad.id}?status=succeeded`)).text(), /No deliveries\./);
      const other = browser(fast);
      await signIn(other, await fast.freshKey("test"));
      t.is((await other.get(`/dashboard/webhooks/${bad.id}`)).status, 404, "another environment's endpoint");
      t.regex(await (await other.get("/dashboard")).text(), /None: every webhook endpoint is delivering\./);
    } finally {
      await broken.close();
      await healthy.close();
      await fast.stop();
    }
  });

  test.serial(`${store}: the pages act through the use cases: void an open invoice, cancel, advance a clock`, async (t) => {
    const { scenario: s, invoiceId, subscriptionId } = await scenario();
    const b = browser(server);
    await signIn(b, s.key);
    const evil = (await s.call("POST", "/subjects", { name: '<script>alert("x")</script>', email: "a'b@example.com" })).id;
    const found = await (await b.get(`/dashboard/subjects?q=${encodeURIComponent("<script>")}`)).text();
    t.true(found.includes(evil));
    t.false(found.includes("<script>"), "names are escaped, the search term too");
    t.regex(found, /&lt;script&gt;alert\(&quot;x&quot;\)&lt;\/script&gt;/);
    t.regex(await (await b.get(`/dashboard/subjects/${evil}`)).text(), /<h1>&lt;script&gt;/);
    const list = await (await b.get("/dashboard/invoices?status=paid")).text();
    t.true(list.includes(invoiceId));
    t.false((await (await b.get("/dashboard/invoices?status=draft")).text()).includes(invoiceId));
    t.is((await b.get("/dashboard/invoices?status=bogus")).status, 400);
    const page = await (await b.get(`/dashboard/invoices/${invoiceId}`)).text();
    t.regex(page, /USD 49\.00/);
    t.regex(page, /href="\/hosted\/invoices\/[0-9A-Za-z]+"/);
    const csrf = csrfOf(page);
    const voided = await b.post(`/dashboard/invoices/${invoiceId}/void`, { csrf });
    t.is(voided.status, 409, "a paid invoice cannot be voided");
    t.regex(await voided.text(), /only an open invoice/);

    const adv = await b.post(`/dashboard/clocks/${s.clockId}/advance`, { csrf, frozen_time: "2026-01-20T00:00" });
    t.is(adv.status, 303);
    const clock = await (await b.get(adv.headers.get("location") as string)).text();
    t.regex(clock, /Advanced from 2026-01-15 00:00 UTC to 2026-01-20 00:00 UTC/);
    t.is((await b.post(`/dashboard/clocks/${s.clockId}/advance`, { csrf, frozen_time: "2026-01-10T00:00" })).status, 400, "backwards");

    const cancel = await b.post(`/dashboard/subscriptions/${subscriptionId}/cancel`, { csrf, when: "end_of_cycle" });
    t.is(cancel.status, 303);
    const flagged = await s.call("GET", `/subscriptions/${subscriptionId}`);
    t.is(flagged.status, "active");
    t.true(flagged.cancels_at_end_of_cycle);
    const now = await b.post(`/dashboard/subscriptions/${subscriptionId}/cancel`, { csrf, when: "now" });
    t.is(now.status, 303);
    t.is((await s.call("GET", `/subscriptions/${subscriptionId}`)).status, "cancelled");
    const cancelled = await (await b.get("/dashboard/subscriptions?status=cancelled")).text();
    t.true(cancelled.includes(subscriptionId));
    t.regex(cancelled, /<span title="rc_\w+">Team<\/span>/, "the rate card by name");
    t.false((await (await b.get("/dashboard/subscriptions?status=active")).text()).includes(subscriptionId));
  });

  test.serial(`${store}: changing the rate card: the preview shows the prorated upgrade and changes nothing; the POST changes it`, async (t) => {
    const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
    const team = await s.card({ name: "Team", fixed_rates: [{ code: "seats", name: "Seats", price: usd(3100) }] });
    const business = await s.card({ name: "Business", fixed_rates: [{ code: "seats", name: "Seats", price: usd(6200) }] });
    const sub = (await s.subscribe({ rate_card_id: team, fixed_rate_quantities: { seats: 1 } })).subscription;
    await s.advance("2026-01-11T00:00:00Z");
    const b = browser(server);
    await signIn(b, s.key);
    const page = await (await b.get(`/dashboard/subscriptions/${sub.id}`)).text();
    t.regex(page, /<option value="rc_\w+">Business \(monthly, USD\)<\/option>/);
    const preview = await b.get(`/dashboard/subscriptions/${sub.id}/change?rate_card_id=${business}&behavior=prorate`);
    t.is(preview.status, 200);
    const html = await preview.text();
    t.regex(html, /Unused time on Team \(prorated: 67\.74% of the period left\)/);
    t.regex(html, /Remaining time on Business \(prorated: 67\.74% of the period left\)/);
    t.regex(html, /Total now: <strong>USD 21\.00<\/strong>/);
    t.is((await s.call("GET", `/subscriptions/${sub.id}`)).rate_card_id, team, "the preview changed nothing");
    t.is((await s.invoices()).length, 1);
    const full = await (await b.get(`/dashboard/subscriptions/${sub.id}/change?rate_card_id=${business}&behavior=rate_difference`)).text();
    t.regex(full, /Total now: <strong>USD 31\.00<\/strong>/);
    t.is((await b.get(`/dashboard/subscriptions/${sub.id}/change?rate_card_id=${team}&behavior=prorate`)).status, 409, "already on it");

    const csrf = csrfOf(html);
    t.is((await b.post(`/dashboard/subscriptions/${sub.id}/change`, { rate_card_id: business, behavior: "prorate" })).status, 403, "no token");
    const done = await b.post(`/dashboard/subscriptions/${sub.id}/change`, { csrf, rate_card_id: business, behavior: "prorate" });
    t.is(done.status, 303);
    t.is(done.headers.get("location"), `/dashboard/subscriptions/${sub.id}?done=changed`);
    t.is((await s.call("GET", `/subscriptions/${sub.id}`)).rate_card_id, business);
    const last = (await s.invoices()).at(-1);
    t.is(last.total_amount.value, "2100");
  });

  test.serial(`${store}: the switcher: signing in to another environment adds it; each request acts for the active one only; a revoked key's environment drops out; sign-out ends all`, async (t) => {
    const { scenario: s, invoiceId, subscriptionId } = await scenario();
    const liveKey = await server.freshKey("live");
    const before = await s.call("GET", `/subscriptions/${subscriptionId}`);
    const b = browser(server);
    await signIn(b, s.key);
    const first = await (await b.get("/dashboard")).text();
    t.false(first.includes('action="/dashboard/switch"'), "one environment: no switcher");
    await signIn(b, liveKey);
    t.is((b.cookies.get("billing_dashboard") as string).split(".").length, 2, "the cookie holds both sign-ins");
    const html = await (await b.get("/dashboard")).text();
    const options = [...html.matchAll(/<option value="(env_\w+)"( selected)?>([^<]+)<\/option>/g)].map((m) => ({ id: m[1] as string, selected: m[2] !== undefined, label: m[3] as string }));
    t.is(options.length, 2);
    t.true(options[0]?.selected, "the newest sign-in is active");
    t.regex(options[0]?.label as string, /\(live\)$/);
    t.regex(options[1]?.label as string, /\(test\)$/);
    t.regex(html, /<span class="badge">live<\/span>/);
    const [live, test_] = options as unknown as [{ id: string }, { id: string }];
    // The live environment is active: the test environment's records are 404, even signed in to it.
    for (const path of [`/dashboard/subjects/${s.subjectId}`, `/dashboard/invoices/${invoiceId}`, `/dashboard/subscriptions/${subscriptionId}`, `/dashboard/clocks/${s.clockId}`]) {
      t.is((await b.get(path)).status, 404, path);
    }
    const liveCsrf = csrfOf(html);
    t.is((await b.post(`/dashboard/subscriptions/${subscriptionId}/cancel`, { csrf: liveCsrf, when: "now" })).status, 404);
    // Switching needs the active session's CSRF token, and an environment the browser signed in to.
    t.is((await b.post("/dashboard/switch", { environment_id: test_.id })).status, 403);
    t.is((await b.post("/dashboard/switch", { csrf: "x".repeat(43), environment_id: test_.id })).status, 403);
    t.is((await b.post("/dashboard/switch", { csrf: liveCsrf, environment_id: "env_notmine" })).status, 404);
    const sw = await b.post("/dashboard/switch", { csrf: liveCsrf, environment_id: test_.id });
    t.is(sw.status, 303);
    t.is((await b.get(`/dashboard/subjects/${s.subjectId}`)).status, 200, "now the test environment's");
    const testHtml = await (await b.get("/dashboard")).text();
    t.regex(testHtml, new RegExp(`<option value="${test_.id}" selected>`));
    t.is((await b.post(`/dashboard/subscriptions/${subscriptionId}/cancel`, { csrf: liveCsrf, when: "now" })).status, 403, "the other environment's CSRF token is refused");
    t.deepEqual(await s.call("GET", `/subscriptions/${subscriptionId}`), before, "nothing changed");
    // Signing in again to an environment replaces its sign-in (still two).
    await signIn(b, s.key);
    t.is((b.cookies.get("billing_dashboard") as string).split(".").length, 2);
    // The live key is revoked: its environment drops out of the switcher.
    const db = await createDatabase(server.db.url, { poolSize: 1 });
    await db.dataSource.initialize();
    try {
      const auth = new SqlAuthStore(db.sql, db.entities);
      const record = (await auth.listKeys()).find((k) => k.prefix === keyPrefix(liveKey) && k.revokedAt === null);
      t.true(await auth.revokeKey((record as { id: string }).id, new Date()));
    } finally {
      await db.dataSource.destroy();
    }
    const dropped = await b.get("/dashboard/subjects");
    t.is(dropped.status, 303, "the cookie is rewritten without it");
    t.is(dropped.headers.get("location"), "/dashboard/subjects");
    t.is((b.cookies.get("billing_dashboard") as string).split(".").length, 1);
    const after = await (await b.get("/dashboard")).text();
    t.false(after.includes(live.id), "the live environment is gone");
    t.regex(after, /Environment: /);
    // Sign-out ends every sign-in of the browser.
    const tokens = (b.cookies.get("billing_dashboard") as string).split(".");
    await signIn(b, await server.freshKey("test"));
    const all = [...tokens, ...(b.cookies.get("billing_dashboard") as string).split(".")];
    t.is((await b.post("/dashboard/sign-out", { csrf: csrfOf(await (await b.get("/dashboard")).text()) })).status, 303);
    for (const token of new Set(all)) {
      const replay = await fetch(`${server.url}/dashboard`, { headers: { cookie: `billing_dashboard=${token}` }, redirect: "manual" });
      t.is(replay.headers.get("location"), "/dashboard/sign-in");
    }
  });

  test.serial(`${store}: signing out ends the session on the server; the old cookie opens nothing`, async (t) => {
    const b = browser(server);
    await signIn(b, server.keys.a);
    const stolen = b.cookies.get("billing_dashboard") as string;
    const csrf = csrfOf(await (await b.get("/dashboard")).text());
    const out = await b.post("/dashboard/sign-out", { csrf });
    t.is(out.status, 303);
    t.regex(out.headers.getSetCookie().join("\n"), /billing_dashboard=; .*Max-Age=0/);
    const replay = await fetch(`${server.url}/dashboard`, { headers: { cookie: `billing_dashboard=${stolen}` }, redirect: "manual" });
    t.is(replay.status, 303);
    t.is(replay.headers.get("location"), "/dashboard/sign-in");
  });

  test.serial(`${store}: a session expires (DASHBOARD_SESSION_SECONDS)`, async (t) => {
    const short = await startTestServer(store, { DASHBOARD_SESSION_SECONDS: "1" });
    try {
      const b = browser(short);
      const res = await signIn(b, short.keys.a);
      t.regex(res.headers.getSetCookie().join("\n"), /Max-Age=1(;|$)/m);
      const cookie = b.cookies.get("billing_dashboard") as string;
      await new Promise((r) => setTimeout(r, 1_100));
      // The server refuses it itself, whatever the browser does with Max-Age.
      const late = await fetch(`${short.url}/dashboard`, { headers: { cookie: `billing_dashboard=${cookie}` }, redirect: "manual" });
      t.is(late.status, 303);
      t.is(late.headers.get("location"), "/dashboard/sign-in");
    } finally {
      await short.stop();
    }
  });

  test.serial(`${store}: revoking the key ends its sessions`, async (t) => {
    const key = await server.freshKey("test");
    const b = browser(server);
    await signIn(b, key);
    t.is((await b.get("/dashboard")).status, 200);
    const db = await createDatabase(server.db.url, { poolSize: 1 });
    await db.dataSource.initialize();
    try {
      const auth = new SqlAuthStore(db.sql, db.entities);
      const record = (await auth.listKeys()).find((k) => key.startsWith(k.prefix) && k.revokedAt === null && k.kind === "secret" && k.prefix === keyPrefix(key));
      t.truthy(record);
      t.true(await auth.revokeKey((record as { id: string }).id, new Date()));
    } finally {
      await db.dataSource.destroy();
    }
    t.is((await b.get("/dashboard")).status, 303);
  });
}
