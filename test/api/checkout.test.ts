/**
 * POST /checkout, the 0.1.5 SDK's `checkout.create` (sdk-compat §3.11): a hosted checkout for a
 * rate card and a subject, always (a free plan, a card on file). Paying it in the hosted page (the
 * form's plain POST) subscribes the subject at quantity 1 for each of the card's fixed rates. Bad
 * input is a 400 naming the field and opens nothing.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import test from "ava";
import { CheckoutService } from "../../src/gen/billing/v1/checkout_service_pb.js";
import { type Database, createDatabase } from "../../src/db/datasource.js";
import { reasonOf, rest, rpcClient, violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { CARD_DECLINED, CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const usd = (value: string | number) => ({ amount: { currency_code: "USD", value } });
const callbacks = { success_url: "https://app.example/welcome", cancelled_url: "https://app.example/pricing" };

for (const store of STORES) {
  let db: Database;
  const server = useServer(store, {}, async (started) => {
    db = await createDatabase(started.db.url, { poolSize: 2 });
    await db.dataSource.initialize();
    return () => db.dataSource.destroy();
  });

  const checkoutsOf = async (subjectId: string) => Number((await db.dataSource.query("SELECT COUNT(*) AS n FROM checkout_sessions WHERE subject_id = ?", [subjectId]))[0].n);

  async function plan(s: Scenario) {
    const m = await s.metric();
    return s.card({
      name: "Team",
      fixed_rates: [
        { code: "seats", name: "Seats", price: usd(4900) },
        { code: "support", name: "Support", price: usd("1000.5") },
      ],
      usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: m, included_units: 100, price: usd("0.5") }],
    });
  }

  test(`${store}: POST /checkout returns {id, url, amount}; paying it subscribes the subject at quantity 1 per fixed rate`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await plan(s);
    const r = await s.raw("POST", "/checkout", { subject_id: s.subjectId, rate_card_id: card, checkout_callback_urls: callbacks });
    t.is(r.status, 200);
    t.deepEqual(Object.keys(r.body).sort(), ["amount", "id", "url"]);
    t.regex(r.body.id, /^cs_[0-9A-Za-z]{22}$/);
    t.regex(r.body.url, /^http:\/\/localhost:\d+\/hosted\/checkout\/[0-9A-Za-z]{40}$/);
    // 4900 + 1000.5 (rounded once, half-up) = 5901 cents.
    t.deepEqual(r.body.amount, { currency_code: "USD", value: "5901" });
    t.deepEqual(await s.subscriptions(), [], "nothing starts before it is paid");

    const page = await (await fetch(r.body.url)).text();
    t.regex(page, /Subscribe to Team/);
    t.regex(page, /Due today: <strong>USD 59\.01<\/strong>/);

    const declined = await s.payCheckout(r.body.url, CARD_DECLINED);
    t.is(declined.status, 402);
    t.deepEqual(await s.subscriptions(), []);
    const paid = await s.payCheckout(r.body.url, CARD_OK);
    t.deepEqual([paid.status, paid.location], [303, callbacks.success_url]);
    const [sub] = await s.subscriptions();
    t.is(sub.status, "active");
    t.is(sub.rate_card_id, card);
    t.deepEqual(sub.fixed_rate_quantities, { seats: "1", support: "1" });
    t.deepEqual(sub.rate_price_multipliers, {});
    t.is(sub.effective_at, "2026-01-15T00:00:00Z");
    const [inv] = await s.invoices();
    t.deepEqual([inv.status, inv.total_amount.value], ["paid", "5901"]);
    t.is((await s.payCheckout(r.body.url, CARD_OK)).status, 410, "used once only");
  });

  test(`${store}: POST /checkout is always a checkout: a free plan, a card on file, a subject by external ID`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const m = await s.metric();
    const free = await s.card({ name: "Metered", usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API", pricing_metric_id: m, price: usd(1) }] });
    await s.call("PUT", `/subjects/${s.subjectId}`, { name: "Customer" });
    const ext = (await s.call("POST", "/subjects", { external_id: "user_7", test_clock_id: s.clockId })).id;
    const r = await s.call("POST", "/checkout", { subject_id: "user_7", rate_card_id: free, checkout_callback_urls: callbacks });
    t.deepEqual(r.amount, { currency_code: "USD", value: "0" });
    const paid = await s.payCheckout(r.url, CARD_OK);
    t.is(paid.status, 303);
    const subs = (await s.call("GET", `/subscriptions?subject_id=${ext}`)).subscriptions;
    t.deepEqual(
      subs.map((x: Json) => [x.rate_card_id, x.status, x.fixed_rate_quantities]),
      [[free, "active", {}]],
    );
    // With a card on file now, still a checkout: the SDK call asks for one.
    const paidPlan = await plan(s);
    const again = await s.call("POST", "/checkout", { subject_id: ext, rate_card_id: paidPlan, checkout_callback_urls: callbacks });
    t.is(again.amount.value, "5901");
    t.is((await s.call("GET", `/subscriptions?subject_id=${ext}`)).subscriptions.length, 1);
    // Connect answers the same.
    const viaConnect = await rpcClient(CheckoutService, server.url, "connect", s.key).createCheckout({
      subjectId: ext,
      rateCardId: paidPlan,
      checkoutCallbackUrls: { successUrl: callbacks.success_url, cancelledUrl: callbacks.cancelled_url },
    });
    t.deepEqual([viaConnect.checkoutSession?.amount?.value, viaConnect.checkoutSession?.amount?.currencyCode], ["5901", "USD"]);
    t.regex(viaConnect.checkoutSession?.id ?? "", /^cs_/);
  });

  test(`${store}: bad POST /checkout input is a 400 naming each field; unknown subject or card 404; nothing is opened`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await plan(s);
    const base = { subject_id: s.subjectId, rate_card_id: card, checkout_callback_urls: callbacks };
    const cases: [Json, string[]][] = [
      [{}, ["checkout_callback_urls", "rate_card_id", "subject_id"]],
      [{ ...base, subject_id: "" }, ["subject_id"]],
      [{ ...base, rate_card_id: undefined }, ["rate_card_id"]],
      [{ ...base, checkout_callback_urls: undefined }, ["checkout_callback_urls"]],
      [{ ...base, checkout_callback_urls: null }, ["checkout_callback_urls"]],
      [{ ...base, checkout_callback_urls: { success_url: "not a url" } }, ["checkout_callback_urls.cancelled_url", "checkout_callback_urls.success_url"]],
      [{ ...base, checkout_callback_urls: { ...callbacks, cancelled_url: "javascript:alert(1)" } }, ["checkout_callback_urls.cancelled_url"]],
    ];
    for (const [body, fields] of cases) {
      const r = await s.raw("POST", "/checkout", body);
      t.is(r.status, 400, JSON.stringify(body));
      t.deepEqual(violatedFields(r.body).sort(), fields, JSON.stringify(body));
    }
    const noSubject = await s.raw("POST", "/checkout", { ...base, subject_id: "subj_nobody" });
    t.deepEqual([noSubject.status, reasonOf(noSubject.body)], [404, "SUBJECT_NOT_FOUND"]);
    const noCard = await s.raw("POST", "/checkout", { ...base, rate_card_id: "rc_nope" });
    t.deepEqual([noCard.status, reasonOf(noCard.body)], [404, "RATE_CARD_NOT_FOUND"]);
    t.is((await rest(server.url, "POST", "/checkout", server.keys.b, base)).status, 404, "another environment's subject and card are not found");
    const err = await t.throwsAsync(rpcClient(CheckoutService, server.url, "connect", s.key).createCheckout({ subjectId: s.subjectId, rateCardId: card }));
    t.is(ConnectError.from(err).code, Code.InvalidArgument);
    t.is(await checkoutsOf(s.subjectId), 0);
    t.deepEqual(await s.subscriptions(), []);
  });

  test(`${store}: POST /checkout needs a secret key, and a test environment (live: NO_PAYMENT_PROVIDER)`, async (t) => {
    const pk = await rest(server.url, "POST", "/checkout", server.keys.aPublishable, { subject_id: "x", rate_card_id: "y", checkout_callback_urls: callbacks });
    t.deepEqual([pk.status, reasonOf(pk.body)], [403, "PUBLISHABLE_KEY_NOT_ALLOWED"]);
    t.is((await rest(server.url, "POST", "/checkout", undefined, {})).status, 401);

    const live = server.keys.b;
    const subject = (await rest(server.url, "POST", "/subjects", live, { name: "Live" })).body.id;
    const card = (await rest(server.url, "POST", "/rate-cards", live, { billing_interval: "monthly", name: "Live plan", fixed_rates: [{ code: "seats", name: "Seats", price: usd(100) }] })).body.id;
    const r = await rest(server.url, "POST", "/checkout", live, { subject_id: subject, rate_card_id: card, checkout_callback_urls: callbacks });
    t.deepEqual([r.status, r.body.code, reasonOf(r.body)], [400, "failed_precondition", "NO_PAYMENT_PROVIDER"]);
    t.is(await checkoutsOf(subject), 0);
  });
}
