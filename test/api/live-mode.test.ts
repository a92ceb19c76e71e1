/**
 * Live environments and the hosted checkout (DESIGN §8): a live environment never uses the test
 * payment provider. Anything that needs a payment is refused with NO_PAYMENT_PROVIDER (nothing
 * is written), free plans work, a live checkout page takes no card (test cards refused, no
 * hints), and a live invoice is never charged to a saved method. Also: callback URLs beyond
 * Latin-1 are kept percent-encoded, so the redirect after a payment works; and the cancel
 * address changes nothing on GET, only its POST form cancels.
 */
import test from "ava";
import { hashKey } from "../../src/billing/keys.js";
import { newId, randomBase62 } from "../../src/billing/ids.js";
import type { CheckoutSession } from "../../src/billing/subscriptions/types.js";
import { type Database, createDatabase } from "../../src/db/datasource.js";
import { SqlAuthStore } from "../../src/db/stores/auth-store.js";
import type { BillingStores } from "../../src/billing/subscriptions/ports.js";
import { sqlBillingStores } from "../../src/db/stores/billing-stores.js";
import { reasonOf, rest } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const usd = (value: string | number) => ({ amount: { currency_code: "USD", value } });
const callbacks = { success_url: "https://app.example/ok", cancelled_url: "https://app.example/no" };

for (const store of STORES) {
  let db: Database;
  let billing: BillingStores;
  let auth: SqlAuthStore;
  const server = useServer(store, {}, async (started) => {
    db = await createDatabase(started.db.url, { poolSize: 2 });
    await db.dataSource.initialize();
    billing = sqlBillingStores(db.sql, db.entities, () => "{}");
    auth = new SqlAuthStore(db.sql, db.entities);
    return () => db.dataSource.destroy();
  });

  /** An environment of `mode` through the API only (live: no test clock, real time). */
  async function env(mode: "test" | "live") {
    const key = await server.freshKey(mode);
    const environmentId = (await auth.findKeyByHash(hashKey(key)))?.environment.id as string;
    const call = async (method: string, path: string, body?: unknown) => {
      const r = await rest(server.url, method, path, key, body);
      if (r.status !== 200) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body;
    };
    const raw = (method: string, path: string, body?: unknown) => rest(server.url, method, path, key, body);
    const subjectId = (await call("POST", "/subjects", { name: "Customer" })).id as string;
    const metric = (await call("POST", "/pricing-metrics", { event_name: "usage", name: "usage", unit: "unit", dimensions: [], aggregation: { aggregation_type: "sum", value_field: "n" } }))
      .id as string;
    const card = async (body: Json) => (await call("POST", "/rate-cards", { billing_interval: "monthly", name: "Plan", ...body })).id as string;
    const paid = await card({ name: "Pro", fixed_rates: [{ code: "seats", name: "Seats", price: usd(1000) }] });
    const free = await card({ name: "Metered", usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: metric, included_units: 0, price: usd(2) }] });
    const invoices = async () => (await call("GET", `/invoices?subject_id=${subjectId}&limit=100`)).invoices as Json[];
    const subscriptions = async () => (await call("GET", `/subscriptions?subject_id=${subjectId}&limit=100`)).subscriptions as Json[];
    return { key, environmentId, call, raw, subjectId, metric, paid, free, card, invoices, subscriptions };
  }

  /** A saved payment method that the test provider would charge successfully. */
  async function saveMethod(environmentId: string, subjectId: string) {
    const id = newId("pm_card");
    await billing.transaction(async (tx) => {
      await tx.insertPaymentMethod({ id, environmentId, subjectId, brand: "visa", last4: "4242", behavior: "succeeds", createdAt: new Date() });
      await tx.setSubjectPaymentMethod(subjectId, id, environmentId);
    });
  }

  /** An open checkout written straight to the store (as one made before live mode refused them). */
  async function storedCheckout(environmentId: string, subjectId: string, over: Partial<CheckoutSession> = {}): Promise<CheckoutSession> {
    const now = new Date();
    const session: CheckoutSession = {
      id: newId("cs"),
      environmentId,
      token: randomBase62(40),
      subjectId,
      kind: "subscribe",
      payload: { request: {} },
      successUrl: "https://app.example/ok",
      cancelledUrl: "https://app.example/no",
      status: "open",
      amountDue: "1000",
      currency: "USD",
      description: "Subscribe to Pro",
      expiresAt: new Date(now.getTime() + 3_600_000),
      createdAt: now,
      ...over,
    };
    await billing.checkouts.insert(session);
    return session;
  }

  const pay = (token: string, card = CARD_OK) =>
    fetch(`${server.url}/hosted/checkout/${token}`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ card_number: card }).toString(),
      redirect: "manual",
    });

  test(`${store}: live: a paid plan is refused with NO_PAYMENT_PROVIDER, before any checkout, and nothing is written`, async (t) => {
    const e = await env("live");
    const cases: Json[] = [
      { rate_card_id: e.paid, fixed_rate_quantities: { seats: 1 }, checkout_callback_urls: callbacks },
      { rate_card_id: e.paid, fixed_rate_quantities: { seats: 1 } },
      // A free plan asked to go through a checkout anyway needs a payment provider too.
      { rate_card_id: e.free, create_checkout_session: "always", checkout_callback_urls: callbacks },
    ];
    for (const body of cases) {
      const r = await e.raw("POST", "/subscriptions", { subject_id: e.subjectId, ...body });
      t.deepEqual([r.status, r.body.code, reasonOf(r.body)], [400, "failed_precondition", "NO_PAYMENT_PROVIDER"], JSON.stringify(body));
      t.regex(r.body.message, /this live environment has no payment provider configured/);
    }
    // Even with a (test) card already on file: a live environment never charges through the test provider.
    await saveMethod(e.environmentId, e.subjectId);
    const withCard = await e.raw("POST", "/subscriptions", { subject_id: e.subjectId, rate_card_id: e.paid, fixed_rate_quantities: { seats: 1 } });
    t.deepEqual([withCard.status, reasonOf(withCard.body)], [400, "NO_PAYMENT_PROVIDER"]);
    t.deepEqual(await e.subscriptions(), []);
    t.deepEqual(await e.invoices(), []);
  });

  test(`${store}: live: a free plan works; an upgrade and a timeline with a paid item are refused`, async (t) => {
    const e = await env("live");
    const r = await e.call("POST", "/subscriptions", { subject_id: e.subjectId, rate_card_id: e.free });
    t.is(r.result.result_type, "success");
    const sub = r.result.subscription;
    t.is(sub.status, "active");

    const up = await e.raw("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: e.paid, checkout_callback_urls: callbacks });
    t.deepEqual([up.status, up.body.code, reasonOf(up.body)], [400, "failed_precondition", "NO_PAYMENT_PROVIDER"]);
    t.is((await e.call("GET", `/subscriptions/${sub.id}`)).rate_card_id, e.free, "still on the free card");
    t.deepEqual(await e.invoices(), [], "nothing invoiced by the refused change");

    // A change to another free card is no payment: it works.
    const free2 = await e.card({
      name: "Metered 2",
      usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: e.metric, included_units: 10, price: usd(1) }],
    });
    const changed = await e.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: free2 });
    t.is(changed.result.type, "success");

    // A timeline whose later item is paid cannot start (nor be linked to a new subscription).
    const other = (await e.call("POST", "/subjects", { name: "Other" })).id;
    const tl = await e.call("POST", "/subscription-timelines", { subject_id: other, rate_card_id: e.free });
    const now = Date.now();
    const iso = (ms: number) => new Date(ms).toISOString();
    await e.call("POST", `/subscription-timelines/${tl.id}/items`, {
      items: [
        { period: { start: iso(now - 60_000), end: iso(now + 86_400_000) }, subscription_input: { rate_card_id: e.free, fixed_rate_quantities: {}, rate_price_multipliers: {} } },
        { period: { start: iso(now + 86_400_000), end: null }, subscription_input: { rate_card_id: e.paid, fixed_rate_quantities: { seats: 1 }, rate_price_multipliers: {} } },
      ],
    });
    const start = await e.raw("POST", `/subscription-timelines/${tl.id}/start`, { checkout_callback_urls: callbacks });
    t.deepEqual([start.status, reasonOf(start.body)], [400, "NO_PAYMENT_PROVIDER"]);
    const link = await e.raw("POST", "/subscriptions", { subject_id: other, rate_card_id: e.free, subscription_timeline_id: tl.id });
    t.deepEqual([link.status, reasonOf(link.body)], [400, "NO_PAYMENT_PROVIDER"]);
    t.is((await e.call("GET", `/subscription-timelines/${tl.id}`)).status, "draft");
  });

  test(`${store}: live: invoices are never charged to a saved method (they stay open); test mode charges the same`, async (t) => {
    for (const mode of ["live", "test"] as const) {
      const e = await env(mode);
      await saveMethod(e.environmentId, e.subjectId);
      const sub = (await e.call("POST", "/subscriptions", { subject_id: e.subjectId, rate_card_id: e.free })).result.subscription;
      await e.call("POST", "/usage-events", { idempotency_key: `k-${mode}`, subject_id: e.subjectId, event_name: "usage", data: { n: 3 }, timestamp: sub.current_period.start });
      await e.call("POST", `/subscriptions/${sub.id}/cancel`, {});
      const [final] = await e.invoices();
      t.is(final?.total_amount.value, "6", mode);
      t.is(final?.status, mode === "live" ? "open" : "paid", mode);
    }
  });

  test(`${store}: live: the hosted checkout takes no card: 409, no test-card hints, nothing paid or saved`, async (t) => {
    const e = await env("live");
    const s = await storedCheckout(e.environmentId, e.subjectId);
    const page = await fetch(`${server.url}/hosted/checkout/${s.token}`);
    const html = await page.text();
    t.is(page.status, 409);
    t.regex(html, /no payment provider configured/);
    t.regex(html, /Test cards are not accepted/);
    t.false(/4242|0002/.test(html), "no test-card hints");
    t.false(/name="card_number"/.test(html), "no card field");
    t.regex(html, new RegExp(`<form method="post" action="/hosted/checkout/${s.token}/cancel">`), "cancel is still offered");

    const paid = await pay(s.token);
    t.is(paid.status, 409);
    t.regex(await paid.text(), /no payment provider configured/);
    t.is((await billing.checkouts.get(s.token))?.status, "open", "the checkout is not used up");
    t.is((await billing.directory.subject(e.environmentId, e.subjectId))?.paymentMethodId, null, "no card saved");
    t.deepEqual(await e.subscriptions(), []);
    t.deepEqual(await e.invoices(), []);
    // Cancel still works.
    const cancel = await fetch(`${server.url}/hosted/checkout/${s.token}/cancel`, { method: "POST", redirect: "manual" });
    t.deepEqual([cancel.status, cancel.headers.get("location")], [303, "https://app.example/no"]);
  });

  test(`${store}: test: the checkout page shows the test cards`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: usd(500) }] });
    const url = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, null)).action.checkout_url as string;
    const html = await (await fetch(`${server.url}${new URL(url).pathname}`)).text();
    t.regex(html, /Test cards: 4242 4242 4242 4242 succeeds/);
  });

  test(`${store}: a success URL beyond Latin-1 is kept percent-encoded: the redirect after payment is a 303, paid once`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: usd(700) }] });
    const success = "https://bücher.example/willkommen/日本語?name=Zoë&emoji=🎉#größe";
    const cancelled = "https://app.example/zurück";
    const r = await s.call("POST", "/subscriptions", {
      subject_id: s.subjectId,
      rate_card_id: card,
      fixed_rate_quantities: { seats: 1 },
      checkout_callback_urls: { success_url: success, cancelled_url: cancelled },
    });
    const paid = await s.payCheckout(r.result.action.checkout_url, CARD_OK);
    t.is(paid.status, 303, paid.text);
    t.is(paid.location, new URL(success).href);
    t.is(paid.location, "https://xn--bcher-kva.example/willkommen/%E6%97%A5%E6%9C%AC%E8%AA%9E?name=Zo%C3%AB&emoji=%F0%9F%8E%89#gr%C3%B6%C3%9Fe");
    const invoices = await s.invoices();
    t.deepEqual(
      invoices.map((i) => i.status),
      ["paid"],
    );
    t.is((await s.subscriptions()).length, 1);
    t.is((await s.payCheckout(r.result.action.checkout_url, CARD_OK)).status, 410, "not twice");

    // A checkout stored before URLs were normalized still redirects (encoded at the redirect).
    const environmentId = (await billing.checkouts.get(new URL(r.result.action.checkout_url).pathname.split("/").at(-1) as string))?.environmentId as string;
    const legacy = await storedCheckout(environmentId, s.subjectId, { cancelledUrl: "https://app.example/zurück/日本" });
    const cancel = await fetch(`${server.url}/hosted/checkout/${legacy.token}/cancel`, { method: "POST", redirect: "manual" });
    t.deepEqual([cancel.status, cancel.headers.get("location")], [303, "https://app.example/zur%C3%BCck/%E6%97%A5%E6%9C%AC"]);

    // Callback URLs too long once encoded are refused at create (400 naming the field).
    const long = `https://app.example/${"ü".repeat(400)}`;
    const tooLong = await s.raw("POST", "/subscriptions", {
      subject_id: s.subjectId,
      rate_card_id: card,
      fixed_rate_quantities: { seats: 1 },
      create_checkout_session: "always",
      checkout_callback_urls: { success_url: long, cancelled_url: cancelled },
    });
    t.is(tooLong.status, 400);
    t.regex(tooLong.body.message, /checkout_callback_urls\.success_url: must have at most 2000 characters once encoded/);
  });

  test(`${store}: the cancel address: GET only asks to confirm (changes nothing), POST cancels`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: usd(300) }] });
    const url = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, null)).action.checkout_url as string;
    const path = new URL(url).pathname;
    const token = path.split("/").at(-1) as string;

    const page = await (await fetch(`${server.url}${path}`)).text();
    t.regex(page, new RegExp(`<form method="post" action="${path}/cancel"><button type="submit">Cancel and go back</button></form>`));
    t.false(/<a href="[^"]*\/cancel"/.test(page), "no cancel link to prefetch");

    for (let i = 0; i < 2; i++) {
      const get = await fetch(`${server.url}${path}/cancel`, { redirect: "manual" });
      t.is(get.status, 200);
      const html = await get.text();
      t.regex(html, /Cancel this checkout\?/);
      t.regex(html, new RegExp(`<form method="post" action="${path}/cancel">`));
    }
    t.is((await billing.checkouts.get(token))?.status, "open", "GET changed nothing");
    t.is((await fetch(`${server.url}${path}/cancel`, { method: "PUT", redirect: "manual" })).status, 405);
    t.is((await billing.checkouts.get(token))?.status, "open");

    const post = await fetch(`${server.url}${path}/cancel`, { method: "POST", redirect: "manual" });
    t.deepEqual([post.status, post.headers.get("location")], [303, "https://app.example/cancelled"]);
    t.is((await billing.checkouts.get(token))?.status, "cancelled");
    t.is((await fetch(`${server.url}${path}/cancel`)).status, 410, "a cancelled checkout has nothing to confirm");
    t.is((await s.payCheckout(url, CARD_OK)).status, 410);
    t.deepEqual(await s.subscriptions(), []);
  });
}
