/**
 * The customer portal (sdk-compat §3.8) against the real server, on both stores: opening a
 * session over REST and Connect (secret keys only; bad input a 400 naming the field, writing
 * nothing), what the hosted page shows, and what it lets the customer do. A GET never changes
 * anything; the card is replaced and a subscription cancelled at the end of its cycle only by the
 * POST of a form. Unknown tokens are 404, expired sessions (and deleted subjects) 410.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import test from "ava";
import { CustomerPortalService } from "../../src/gen/billing/v1/customer_portal_service_pb.js";
import { PORTAL_SESSION_TTL_MS } from "../../src/billing/subscriptions/portal.js";
import { type Database, createDatabase } from "../../src/db/datasource.js";
import { reasonOf, rest, rpcClient, violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { CARD_DECLINED, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const usd = (value: string | number) => ({ amount: { currency_code: "USD", value } });
const RETURN_URL = "https://app.example/account";

/** A page's text without its tags (for what a reader sees). */
const plain = (html: string) => html.replace(/<[^>]+>/g, "");

for (const store of STORES) {
  let db: Database;
  const server = useServer(store, {}, async (started) => {
    db = await createDatabase(started.db.url, { poolSize: 2 });
    await db.dataSource.initialize();
    return () => db.dataSource.destroy();
  });

  /** Sessions written for these subjects (tests of a file run at once: each counts its own). */
  const sessionCount = async (...subjects: string[]) =>
    Number((await db.dataSource.query(`SELECT COUNT(*) AS n FROM customer_portal_sessions WHERE subject_id IN (${subjects.map(() => "?").join(", ")})`, subjects))[0].n);

  /** A subject on a test clock with a paid subscription (card on file), usage over its included units and one paid invoice. */
  async function customer() {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const m = await s.metric();
    const card = await s.card({
      name: "Team <Pro>",
      fixed_rates: [{ code: "seats", name: "Seats", price: usd(4900) }],
      usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: m, included_units: 100, price: usd("0.5") }],
    });
    const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription;
    await s.events([["2026-01-15T00:00:00Z", "150"]]);
    return { s, card, sub };
  }

  async function open(s: Scenario, subjectId = s.subjectId) {
    const r = await s.raw("POST", "/customer-portal/sessions", { subject_id: subjectId, return_url: RETURN_URL });
    if (r.status !== 200) throw new Error(`portal session: ${r.status} ${JSON.stringify(r.body)}`);
    return { ...r.body, path: new URL(r.body.url).pathname as string };
  }

  const get = (path: string) => fetch(`${server.url}${path}`, { redirect: "manual" });
  const post = (path: string, form: Record<string, string> = {}) =>
    fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams(form).toString(), redirect: "manual" });

  test(`${store}: POST /customer-portal/sessions returns {url, subject_id, expires_at}: one hour of real time, by ID or external ID`, async (t) => {
    const { s } = await customer();
    const before = Date.now();
    const r = await s.raw("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: RETURN_URL });
    t.is(r.status, 200);
    t.deepEqual(Object.keys(r.body).sort(), ["expires_at", "subject_id", "url"]);
    t.is(r.body.subject_id, s.subjectId);
    t.regex(r.body.url, /^http:\/\/localhost:\d+\/hosted\/portal\/[0-9A-Za-z]{40}$/);
    // Real time, although the subject lives on a test clock frozen in January.
    const expires = Date.parse(r.body.expires_at);
    t.true(expires >= before + PORTAL_SESSION_TTL_MS && expires <= Date.now() + PORTAL_SESSION_TTL_MS, r.body.expires_at);

    const ext = (await s.call("POST", "/subjects", { name: "Ext", external_id: "cust_42" })).id;
    const byExternal = await s.raw("POST", "/customer-portal/sessions", { subject_id: "cust_42", return_url: RETURN_URL });
    t.deepEqual([byExternal.status, byExternal.body.subject_id], [200, ext]);
    t.not(byExternal.body.url, r.body.url, "every session has its own URL");
    t.is((await s.raw("POST", "/customer-portal/sessions", { subject_id: "CUST_42", return_url: RETURN_URL })).status, 404, "external IDs compare byte for byte");

    // Connect, with the same answer and the same errors.
    const client = rpcClient(CustomerPortalService, server.url, "connect", s.key);
    const res = await client.createCustomerPortalSession({ subjectId: s.subjectId, returnUrl: RETURN_URL });
    t.is(res.session?.subjectId, s.subjectId);
    t.regex(res.session?.url ?? "", /\/hosted\/portal\/[0-9A-Za-z]{40}$/);
    const err = await t.throwsAsync(client.createCustomerPortalSession({ subjectId: "", returnUrl: "" }));
    t.is(ConnectError.from(err).code, Code.InvalidArgument);
  });

  test(`${store}: bad session input is a 400 naming each field, an unknown subject 404, and nothing is written`, async (t) => {
    const { s } = await customer();
    const cases: [Json, string[]][] = [
      [{}, ["return_url", "subject_id"]],
      [{ subject_id: s.subjectId }, ["return_url"]],
      [{ return_url: RETURN_URL }, ["subject_id"]],
      [{ subject_id: s.subjectId, return_url: "not a url" }, ["return_url"]],
      [{ subject_id: s.subjectId, return_url: "javascript:alert(1)" }, ["return_url"]],
      [{ subject_id: s.subjectId, return_url: "ftp://files.example/x" }, ["return_url"]],
      [{ subject_id: s.subjectId, return_url: "/relative/path" }, ["return_url"]],
      [{ subject_id: s.subjectId, return_url: "https://app.example/a b" }, ["return_url"]],
      [{ subject_id: s.subjectId, return_url: `https://app.example/${"x".repeat(2000)}` }, ["return_url"]],
      [{ subject_id: "", return_url: "nope" }, ["return_url", "subject_id"]],
    ];
    for (const [body, fields] of cases) {
      const r = await s.raw("POST", "/customer-portal/sessions", body);
      t.is(r.status, 400, JSON.stringify(body).slice(0, 80));
      t.deepEqual(violatedFields(r.body).sort(), fields, JSON.stringify(body).slice(0, 80));
    }
    const missing = await s.raw("POST", "/customer-portal/sessions", { subject_id: "subj_nobody", return_url: RETURN_URL });
    t.deepEqual([missing.status, reasonOf(missing.body)], [404, "SUBJECT_NOT_FOUND"]);
    // Another environment's key cannot open a portal for this subject.
    t.is((await rest(server.url, "POST", "/customer-portal/sessions", server.keys.b, { subject_id: s.subjectId, return_url: RETURN_URL })).status, 404);
    t.is(await sessionCount(s.subjectId, "subj_nobody"), 0);
  });

  test(`${store}: publishable keys cannot open a portal (403); no key is 401`, async (t) => {
    const subject = (await rest(server.url, "POST", "/subjects", server.keys.a, { name: "P" })).body.id;
    const body = { subject_id: subject, return_url: RETURN_URL };
    const pk = await rest(server.url, "POST", "/customer-portal/sessions", server.keys.aPublishable, body);
    t.deepEqual([pk.status, reasonOf(pk.body)], [403, "PUBLISHABLE_KEY_NOT_ALLOWED"]);
    t.is((await rest(server.url, "POST", "/customer-portal/sessions", undefined, body)).status, 401);
    t.is((await rest(server.url, "POST", "/customer-portal/sessions", server.keys.aRevoked, body)).status, 401);
    const err = await t.throwsAsync(rpcClient(CustomerPortalService, server.url, "grpc", server.keys.aPublishable).createCustomerPortalSession({ subjectId: subject, returnUrl: RETURN_URL }));
    t.is(ConnectError.from(err).code, Code.PermissionDenied);
    t.is(await sessionCount(subject), 0);
    t.is((await rest(server.url, "POST", "/customer-portal/sessions", server.keys.a, body)).status, 200, "a secret key of the same environment can");
  });

  test(`${store}: the portal page shows subscriptions, usage, the card and invoices, escaped, without JavaScript`, async (t) => {
    const { s, sub } = await customer();
    await s.call("PUT", `/subjects/${s.subjectId}`, { name: "Ada <Lovelace>", email: "ada@example.com" });
    const p = await open(s);
    const res = await get(p.path);
    const html = await res.text();
    t.is(res.status, 200);
    t.is(res.headers.get("cache-control"), "no-store");
    t.is(res.headers.get("referrer-policy"), "no-referrer", "the token never leaks to the return URL or elsewhere");
    t.regex(res.headers.get("content-security-policy") ?? "", /default-src 'none'.*form-action 'self'/, "no script can run, forms post only to the portal");
    t.regex(html, /<meta name="viewport" content="width=device-width,initial-scale=1">/);
    t.regex(html, /@media print/);
    t.false(/<script/i.test(html), "works without JavaScript");
    t.regex(html, /Ada &lt;Lovelace&gt;/);
    t.false(html.includes("<Lovelace>"));
    t.regex(html, /Team &lt;Pro&gt;/, "rate card names are escaped");
    t.regex(html, /Active, renews automatically/);
    t.regex(plain(html), /Current period: 2026-01-15 – 2026-02-15/);
    t.regex(html, /<td>API calls<\/td><td class="n over">150<\/td><td class="n">100<\/td>/, "used vs included, over marked");
    t.regex(html, /Visa ending in 4242/);
    const [inv] = await s.invoices();
    t.true(html.includes(`href="/hosted/invoices/${new URL(inv.hosted_url).pathname.split("/").pop()}"`), "links the hosted invoice");
    t.regex(html, /USD 49\.00/);
    t.regex(html, new RegExp(`<a href="${RETURN_URL}">← Return to app\\.example</a>`));
    t.regex(html, new RegExp(`href="${p.path}/subscriptions/${sub.id}/cancel"`));
    t.regex(html, new RegExp(`href="${p.path}/card"`));
    // The portal's usage is billing state's.
    const state = await s.call("GET", `/customer-access/${s.subjectId}/billing-state`);
    t.is(state.usage_data[0].used_units, "150");
  });

  test(`${store}: GET never changes anything; cancelling at the end of the cycle is a confirmed POST`, async (t) => {
    const { s, sub } = await customer();
    const p = await open(s);
    const cancelPath = `${p.path}/subscriptions/${sub.id}/cancel`;
    // Every GET of the portal, however often (prefetching, scanners), changes nothing.
    for (const path of [p.path, cancelPath, `${p.path}/card`, `${p.path}?done=cancel`]) {
      t.is((await get(path)).status, 200, path);
      t.is((await get(path)).status, 200, path);
    }
    t.false((await s.call("GET", `/subscriptions/${sub.id}`)).cancels_at_end_of_cycle);
    const confirm = await (await get(cancelPath)).text();
    t.regex(confirm, /Cancel Team &lt;Pro&gt;\?/);
    t.regex(plain(confirm), /until the end of the current period, 2026-02-15, and then ends/);
    t.regex(confirm, new RegExp(`<form method="post" action="${cancelPath}"><button type="submit">Yes, cancel at the end of the period</button></form>`));
    t.regex(confirm, new RegExp(`<a href="${p.path}">No, keep my subscription</a>`));

    const done = await post(cancelPath);
    t.deepEqual([done.status, done.headers.get("location")], [303, `${p.path}?done=cancel`]);
    const after = await s.call("GET", `/subscriptions/${sub.id}`);
    t.deepEqual([after.status, after.cancels_at_end_of_cycle], ["active", true]);
    const page = await (await get(done.headers.get("location") as string)).text();
    t.regex(page, /role="status">Your subscription will end at the end of its current period\./);
    t.regex(plain(page), /Active, ends on 2026-02-15 \(cancelled at the end of the period\)/);
    t.false(page.includes(cancelPath), "no cancel button any more");

    // Again: refused, as the API refuses it, and nothing changes.
    const again = await post(cancelPath);
    t.is(again.status, 409);
    t.regex(await again.text(), /already ends at the end of its period/);
    t.is((await get(cancelPath)).status, 409, "the confirmation says it cannot be cancelled");

    // At the end of the cycle it is cancelled, with the final usage invoice.
    await s.advance("2026-02-15T00:00:00Z");
    t.is((await s.call("GET", `/subscriptions/${sub.id}`)).status, "cancelled");
    t.regex(plain(await (await get(p.path)).text()), /Cancelled on 2026-02-15/);
  });

  test(`${store}: a portal reaches only its own subject's subscriptions`, async (t) => {
    const { s, card } = await customer();
    const otherSubject = (await s.call("POST", "/subjects", { name: "Other", test_clock_id: s.clockId })).id;
    const mine = await open(s);
    const other = new Scenario(server);
    Object.assign(other, { key: s.key, clockId: s.clockId, subjectId: otherSubject });
    const theirs = (await other.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription;
    for (const id of [theirs.id, "sub_nope", "x"]) {
      t.is((await get(`${mine.path}/subscriptions/${id}/cancel`)).status, 404, id);
      t.is((await post(`${mine.path}/subscriptions/${id}/cancel`)).status, 404, id);
    }
    t.false((await s.call("GET", `/subscriptions/${theirs.id}`)).cancels_at_end_of_cycle);
    t.false((await (await get(mine.path)).text()).includes(theirs.id));
  });

  test(`${store}: replacing the card: declined changes nothing, a good card is saved and used from then on`, async (t) => {
    // A subject without a card, on a free plan: the portal offers to add one.
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const p = await open(s);
    let html = await (await get(p.path)).text();
    t.regex(html, /No card on file\./);
    t.regex(html, /You have no subscriptions\./);
    t.regex(html, /No invoices yet\./);
    const form = await (await get(`${p.path}/card`)).text();
    t.regex(form, /<label for="card_number">Card number<\/label>/);
    t.regex(form, new RegExp(`<form method="post" action="${p.path}/card">`));
    t.regex(form, /Test cards: 4242 4242 4242 4242 succeeds/);

    const declined = await post(`${p.path}/card`, { card_number: CARD_DECLINED });
    t.is(declined.status, 402);
    t.regex(await declined.text(), /role="alert" id="error">Your card was declined\. Try another card\./);
    const junk = await post(`${p.path}/card`, { card_number: "<script>" });
    t.is(junk.status, 402);
    t.false((await junk.text()).includes("<script>"));
    t.regex(await (await get(p.path)).text(), /No card on file\./);

    const saved = await post(`${p.path}/card`, { card_number: "4000 0000 0000 0341" });
    t.deepEqual([saved.status, saved.headers.get("location")], [303, `${p.path}?done=card`]);
    html = await (await get(`${p.path}?done=card`)).text();
    t.regex(html, /Visa ending in 0341/);
    t.regex(html, /Your card was saved\./);
    const replaced = await post(`${p.path}/card`, { card_number: "4242424242424242" });
    t.is(replaced.status, 303);
    t.regex(await (await get(p.path)).text(), /Visa ending in 4242/);
    // The saved card is on file: a paid plan now starts at once, charged to it.
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: usd(1000) }] });
    const r = await s.call("POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
    t.is(r.result.result_type, "success");
    t.is((await s.invoices())[0].status, "paid");
  });

  test(`${store}: unknown tokens are 404; expired sessions and deleted subjects 410, and nothing can be done through them`, async (t) => {
    const { s, sub } = await customer();
    t.is((await get(`/hosted/portal/${"A".repeat(40)}`)).status, 404);
    t.is((await get("/hosted/portal/short")).status, 404);
    t.is((await post(`/hosted/portal/${"A".repeat(40)}/card`, { card_number: "4242424242424242" })).status, 404);
    const p = await open(s);
    t.is((await fetch(`${server.url}${p.path}`, { method: "PUT" })).status, 405);
    t.is((await post(p.path)).status, 405, "the portal page itself takes no POST");

    await db.dataSource.query("UPDATE customer_portal_sessions SET expires_at = ? WHERE token = ?", ["2026-01-01 00:00:00.000", p.path.split("/").pop()]);
    const gone = await get(p.path);
    const html = await gone.text();
    t.is(gone.status, 410);
    t.regex(html, /This billing portal link has expired/);
    t.regex(html, new RegExp(`<a href="${RETURN_URL}">Return to app\\.example</a>`));
    t.is((await post(`${p.path}/subscriptions/${sub.id}/cancel`)).status, 410);
    t.is((await post(`${p.path}/card`, { card_number: CARD_DECLINED })).status, 410);
    t.false((await s.call("GET", `/subscriptions/${sub.id}`)).cancels_at_end_of_cycle);

    const lone = (await s.call("POST", "/subjects", { name: "Leaving" })).id;
    const q = await open(s, lone);
    t.is((await get(q.path)).status, 200);
    await s.call("DELETE", `/subjects/${lone}`);
    t.is((await get(q.path)).status, 410);
  });

  test(`${store}: in a live environment the portal shows billing but takes no card (test cards refused)`, async (t) => {
    const subject = (await rest(server.url, "POST", "/subjects", server.keys.b, { name: "Live customer" })).body.id;
    const r = await rest(server.url, "POST", "/customer-portal/sessions", server.keys.b, { subject_id: subject, return_url: RETURN_URL });
    t.is(r.status, 200);
    const path = new URL(r.body.url).pathname;
    const html = await (await get(path)).text();
    t.regex(html, /No card on file\./);
    t.false(html.includes(`${path}/card`), "no card action");
    const form = await get(`${path}/card`);
    const formHtml = await form.text();
    t.is(form.status, 409);
    t.false(formHtml.includes("card_number"), "no card field");
    t.false(formHtml.includes("4242"), "no test-card hints");
    const tried = await post(`${path}/card`, { card_number: "4242424242424242" });
    t.is(tried.status, 409);
    t.regex(await tried.text(), /Test cards are not accepted in live mode/);
    t.regex(await (await get(path)).text(), /No card on file\./);
  });
}
