/**
 * The OpenAPI document tells the truth about real answers: a broad scenario over REST against the
 * real server (subjects, metrics, rate cards with every kind of price, catalogs, subscriptions,
 * usage events single and batch, summaries, billing state, invoices, timelines, test clocks, and
 * errors of every kind the bridge answers with), each answer's body validated against the schema
 * of its operation and status in openapi/openapi.json (a PDF by its content type and magic). Every documented operation must have been
 * answered 200 at least once. A second test shows that the check fails on a mismatch.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import Stripe from "stripe";
import { loadOpenApi } from "../../src/pages/docs.js";
import { rest } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { responseValidator } from "../helpers/openapi.js";
import { CARD_FAILS_LATER, CARD_OK, Scenario } from "../helpers/scenario.js";
import { type TestServer, useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const usd = (value: string | number) => ({ amount: { currency_code: "USD", value } });
// Stripe's webhooks need an environment on Stripe, whose keys are sealed with SECRETS_ENCRYPTION_KEY.
const SECRETS_KEY = randomBytes(32).toString("base64");
const WHSEC = `whsec_${"q1w2e3r4".repeat(4)}`;

const callbacks = { checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/no" } };

/** A Scenario whose every REST answer is checked against the document. */
class Checked extends Scenario {
  problems: string[] = [];
  constructor(
    server: TestServer,
    readonly validator: ReturnType<typeof responseValidator>,
  ) {
    super(server);
  }

  override async call(method: string, path: string, body?: unknown, key = this.key): Promise<Json> {
    const r = await this.send(method, path, body, key);
    if (r.status !== 200) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  }

  override async raw(method: string, path: string, body?: unknown) {
    return this.send(method, path, body, this.key);
  }

  /** The subject's invoices, checked too (Scenario reads them with exact quantities, bypassing call). */
  override async invoices(): Promise<Json[]> {
    return (await this.call("GET", `/invoices?subject_id=${this.subjectId}&limit=100`)).invoices;
  }

  /** An answer expected to be an error with this status. */
  async fails(status: number, method: string, path: string, body?: unknown, key: string | undefined = this.key): Promise<Json> {
    const r = await this.send(method, path, body, key);
    if (r.status !== status) this.problems.push(`${method} ${path}: expected ${status}, got ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  }

  async send(method: string, path: string, body: unknown, key: string | undefined) {
    const r = await rest(this.server.url, method, path, key, body);
    const { operation, problems } = this.validator.check(method, path, r.status, r.body, r.headers.get("content-type"));
    for (const p of problems) this.problems.push(`${operation} → ${r.status}: ${p}`);
    return r;
  }

  static async begin(server: TestServer, validator: ReturnType<typeof responseValidator>, at: string): Promise<Checked> {
    const s = new Checked(server, validator);
    // Drafts for an hour of clock time (the default of a new environment), so that there are drafts to finalize.
    s.key = await server.freshKey("test", { invoiceGraceSeconds: 3600 });
    s.clockId = (await s.call("POST", "/test-clocks", { name: "openapi", frozen_time: at })).id;
    s.subjectId = (await s.call("POST", "/subjects", { name: "Customer", email: "c@example.com", external_id: "ext-1", metadata: { plan: "x" }, test_clock_id: s.clockId })).id;
    return s;
  }
}

for (const store of STORES) {
  const server = useServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY });

  test(`${store}: every REST answer of a broad scenario matches the document`, async (t) => {
    const validator = responseValidator(loadOpenApi());
    const s = await Checked.begin(server, validator, "2026-01-15T00:00:00Z");

    // Health.
    await s.call("GET", "/ping", undefined, "");

    // A webhook endpoint (a public host: the server's guard refuses private ones by default), so
    // that everything below makes deliveries to list.
    const ep = await s.call("POST", "/webhook-endpoints", { url: "https://hooks.example.com/billing", description: "all events" });
    await s.call("GET", `/webhook-endpoints/${ep.id}`);
    await s.call("GET", "/webhook-endpoints?limit=10");
    await s.call("PUT", `/webhook-endpoints/${ep.id}`, { description: "renamed", event_types: [] });
    await s.call("POST", `/webhook-endpoints/${ep.id}/rotate-secret`, {});

    // Subjects.
    const other = await s.call("POST", "/subjects", { name: "Other" });
    await s.call("GET", `/subjects/${s.subjectId}`);
    await s.call("GET", "/subjects/ext-1");
    await s.call("PUT", `/subjects/${other.id}`, { email: "o@example.com", metadata: { a: "b" } });
    await s.call("GET", "/subjects?limit=1&offset=0");
    await s.call("GET", "/subjects/search?query=cust");
    await s.call("DELETE", `/subjects/${other.id}`);

    // Pricing metrics: every aggregation.
    const sum = await s.metric({ aggregation_type: "sum", value_field: "n" }, ["region"], "usage");
    const count = (await s.call("POST", "/pricing-metrics", { event_name: "logins", name: "Logins", unit: "login", aggregation: { aggregation_type: "count" } })).id;
    const peak = (await s.call("POST", "/pricing-metrics", { event_name: "peak", name: "Peak", unit: "gb", aggregation: { aggregation_type: "max", value_field: "gb" } })).id;
    await s.call("POST", "/pricing-metrics", { event_name: "active", name: "Active users", unit: "user", aggregation: { aggregation_type: "unique_count", value_field: "user" } });
    await s.call("POST", `/pricing-metrics/${peak}/archive`, {});
    await s.call("GET", "/pricing-metrics?archived=true");
    await s.call("POST", "/pricing-metrics", { event_name: "seats", name: "Seats", unit: "seat", aggregation: { aggregation_type: "last", value_field: "n" } });
    await s.call("GET", `/pricing-metrics/${count}`);
    await s.call("GET", "/pricing-metrics?limit=2");

    // A rate catalog with a fixed and a usage-based rate.
    const cat = await s.call("POST", "/rate-catalogs", { name: "Add-ons", description: "Extras" });
    await s.call("POST", `/rate-catalogs/${cat.id}/add_rates`, {
      billing_interval: "monthly",
      fixed_rates: [{ code: "support", name: "Support", price: usd(500) }],
      usage_based_rates: [{ usage_based_rate_type: "simple", code: "logins", name: "Logins", pricing_metric_id: count, included_units: 0, price: usd("0.5") }],
    });
    await s.call("GET", `/rate-catalogs/${cat.id}`);
    await s.call("GET", "/rate-catalogs");
    await s.call("GET", `/rate-catalogs/${cat.id}/rates`);

    // Rate cards: flat and package fixed prices, simple flat and package usage prices, a dimensional rate.
    const card = await s.card({
      name: "Pro",
      description: "Everything",
      metadata: { tier: "pro" },
      rate_catalog_id: cat.id,
      fixed_rates: [
        { code: "seats", name: "Seats", description: "Per seat", price: usd(1000) },
        { code: "bundle", name: "Bundle", price: { price_type: "package", amount: { currency_code: "USD", value: "250.5" }, package_units: 10, rounding_behavior: "round_up" } },
      ],
      usage_based_rates: [
        { usage_based_rate_type: "simple", code: "api", name: "API", pricing_metric_id: sum, included_units: 5, price: usd("0.125") },
        {
          usage_based_rate_type: "simple",
          code: "api_pack",
          name: "API packs",
          pricing_metric_id: sum,
          included_units: 0,
          price: { amount: { currency_code: "USD", value: 100 }, package_units: 1000, rounding_behavior: "round_down" },
        },
        {
          usage_based_rate_type: "dimensional",
          code: "cpu",
          name: "CPU",
          pricing_metric_id: sum,
          dimensions: [{ key: "region", values: ["eu", "us"], description: "Where" }],
          pricing_matrix: {
            cells: [
              { dimension_coordinates: { region: "eu" }, price: usd(2) },
              { dimension_coordinates: { region: "us" }, price: usd(1) },
            ],
          },
        },
      ],
    });
    const cheaper = await s.card({ name: "Lite", fixed_rates: [{ code: "seats", name: "Seats", price: usd(400) }] });
    const free = await s.card({ name: "Free", usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API", pricing_metric_id: sum, included_units: 0, price: usd(0) }] });
    // Tiered seats, volume-tiered usage with a minimum and maximum, a percentage with a fee per event.
    const tiers = [
      { up_to: "10", unit_amount: { currency_code: "USD", value: "100" }, flat_amount: { currency_code: "USD", value: "500" } },
      { up_to: null, unit_amount: { currency_code: "USD", value: "80" } },
    ];
    const tiered = await s.card({
      name: "Tiers",
      fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "tiered", tiers_mode: "graduated", tiers } }],
      usage_based_rates: [
        {
          usage_based_rate_type: "simple",
          code: "api",
          name: "API",
          pricing_metric_id: sum,
          included_units: 0,
          price: { price_type: "tiered", tiers_mode: "volume", tiers },
          minimum_amount: { currency_code: "USD", value: "1000" },
          maximum_amount: { currency_code: "USD", value: "90000" },
        },
        {
          usage_based_rate_type: "simple",
          code: "fee",
          name: "Fee",
          pricing_metric_id: sum,
          included_units: 0,
          price: { price_type: "percentage", percent: "2.9", fixed_amount_per_event: { currency_code: "USD", value: "30" } },
        },
      ],
    });
    await s.call("POST", `/rate-cards/${tiered}/archive`, {});
    await s.call("GET", "/rate-cards?archived=true");
    await s.call("GET", `/rate-cards/${card}`);
    await s.call("GET", "/rate-cards?limit=100");

    // Taxes (DESIGN §15): tax rates (one archived), the card's default tax rates, the subject's billing details, the invoice settings.
    const vat = await s.call("POST", "/tax-rates", { display_name: "VAT", percentage: "19", country: "DE", description: "Germany" });
    const retired = await s.call("POST", "/tax-rates", { display_name: "Old", percentage: "5", inclusive: true });
    await s.call("GET", `/tax-rates/${vat.id}`);
    await s.call("GET", "/tax-rates?archived=false");
    await s.call("POST", `/tax-rates/${retired.id}/archive`, {});
    await s.call("POST", `/rate-cards/${card}/default_tax_rates`, { tax_rate_ids: [vat.id] });
    await s.call("PUT", `/subjects/${s.subjectId}`, { billing_details: { legal_name: "Acme GmbH", address: { city: "Berlin", country: "DE" }, tax_ids: [{ type: "eu_vat", value: "DE123456789" }] } });
    await s.call("GET", "/invoice-settings");
    await s.call("PATCH", "/invoice-settings", { number_prefix: "ACME", seller: { legal_name: "Seller Ltd", address: { country: "IE" }, tax_id: "IE1234567T", footer: "Thank you" } });
    // Payments (DESIGN §16): the settings read and changed (the defaults' dunning, written back).
    await s.call("GET", "/payment-settings");
    await s.call("PATCH", "/payment-settings", { provider: "test", retry_schedule_days: [3, 5, 7], after_last_attempt: "leave_active", mark_uncollectible: false });

    // A subscription that needs a checkout (no card on file yet), then one paid for.
    const pending = await s.call("POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: card, fixed_rate_quantities: { seats: 2, bundle: 1 }, ...callbacks });
    t.is(pending.result.result_type, "requires_action");
    t.is((await s.payCheckout(pending.result.action.checkout_url, CARD_OK)).status, 303);
    const [sub] = await s.subscriptions();
    await s.call("GET", `/subscriptions/${sub.id}`);
    await s.call("GET", `/subscriptions?rate_card_id=${card}`);
    await s.call("PATCH", `/subscriptions/${sub.id}`, { fixed_rate_quantities: { seats: 3 }, metadata: { team: "core" } });

    // Coupons (DESIGN §15): a percent and an amount coupon, applied to the subscription and the subject; one archived, one discount removed.
    const pct = await s.call("POST", "/coupons", { name: "10%", percent_off: "10", duration: "repeating", duration_in_months: 2, redeem_by: "2027-01-01T00:00:00Z" });
    const amt = await s.call("POST", "/coupons", { name: "100 off", amount_off: { currency_code: "USD", value: "100" }, duration: "once", max_redemptions: 5 });
    await s.call("GET", `/coupons/${pct.id}`);
    await s.call("GET", "/coupons?archived=false");
    const applied = await s.call("POST", `/subscriptions/${sub.id}/discounts`, { coupon_id: pct.id });
    await s.call("POST", `/subjects/${s.subjectId}/discounts`, { coupon_id: amt.id });
    await s.call("GET", `/discounts?subject_id=${s.subjectId}`);
    await s.call("DELETE", `/discounts/${applied.id}`);
    await s.call("POST", `/coupons/${amt.id}/archive`, {});

    // Usage: single (accepted, duplicate), batch with a rejected event, summaries.
    await s.call("POST", "/usage-events", { idempotency_key: "one", subject_id: s.subjectId, event_name: "usage", data: { n: 3, region: "eu" }, timestamp: "2026-01-16T00:00:00Z" });
    await s.call("POST", "/usage-events", { idempotency_key: "one", subject_id: s.subjectId, event_name: "usage", data: { n: 3, region: "eu" }, timestamp: "2026-01-16T00:00:00Z" });
    const batch = await s.call("POST", "/usage-events/batch", {
      events: [
        { idempotency_key: "b1", subject_id: s.subjectId, event_name: "usage", data: { n: "12.5", region: "us" }, timestamp: "2026-01-17T10:00:00Z" },
        { idempotency_key: "b2", subject_id: "nobody", event_name: "usage", data: { n: 1 } },
        { idempotency_key: "b3", subject_id: s.subjectId, event_name: "usage", data: { n: "x" } },
        { idempotency_key: "b4", subject_id: s.subjectId, event_name: "logins", data: {} },
      ],
    });
    t.is(batch.rejected, 2);
    const period = { start: "2026-01-15T00:00:00Z", end: "2026-01-20T00:00:00Z" };
    await s.call("POST", `/pricing-metrics/${sum}/summary`, { subject_id: s.subjectId, period });
    await s.call("POST", `/pricing-metrics/${sum}/summary`, { subject_id: s.subjectId, period: { ...period, inclusive_end: true }, dimensions: ["region"], period_granularity: "day" });
    await s.call("GET", `/customer-access/${s.subjectId}/billing-state`);

    // Credit: a promotional grant restricted to one rate with an expiry, a paid one (the card on
    // file pays it), settings, the ledger, and a void; the cycle close below spends credit, so its
    // invoices carry credits_applied.
    const promo = await s.call("POST", "/credit-grants", {
      subject_id: s.subjectId,
      amount: { currency_code: "USD", value: "500" },
      priority: 10,
      expires_at: "2026-06-01T00:00:00Z",
      applies_to_rate_codes: ["seats"],
      metadata: { campaign: "launch" },
    });
    const paid = await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: { currency_code: "USD", value: "700" }, category: "paid", ...callbacks });
    await s.call("GET", `/credit-grants/${promo.credit_grant.id}`);
    await s.call("GET", `/credit-grants?subject_id=${s.subjectId}&status=active`);
    await s.call("PUT", `/subjects/${s.subjectId}/credit-settings`, {
      currency_code: "USD",
      low_balance_threshold: { currency_code: "USD", value: "100" },
      auto_top_up: { threshold: { currency_code: "USD", value: "50" }, amount: { currency_code: "USD", value: "1000" }, priority: 60 },
    });
    await s.call("GET", `/subjects/${s.subjectId}/credit-settings?currency_code=USD`);
    await s.call("POST", `/credit-grants/${paid.credit_grant.id}/void`, {});
    await s.call("GET", `/subjects/${s.subjectId}/credit-ledger?limit=50`);
    await s.call("GET", `/customer-access/${s.subjectId}/billing-state`);

    // A cycle closes: invoices.
    await s.advance("2026-02-16T00:00:00Z");
    await s.call("GET", `/test-clocks/${s.clockId}`);
    const invoices = await s.invoices();
    t.true(invoices.length >= 2);
    await s.call("GET", `/invoices/${invoices[0].id}`);

    // Plan changes (the old card's usage so far is invoiced: a draft for the grace period, finalized
    // here at once) and cancellation.
    await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: cheaper, ...callbacks });
    const draft = (await s.invoices()).find((i) => i.status === "draft");
    if (draft) await s.call("POST", `/invoices/${draft.id}/finalize`, {});
    else s.problems.push("no draft invoice after a rate-card change (FinalizeInvoice not exercised)");
    await s.call("POST", `/subscriptions/${sub.id}/cancel`, { cancel_at_end_of_cycle: true });
    const second = await s.call("POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: free });
    // Pause (with a time it resumes by itself) and resume by a call.
    await s.call("POST", `/subscriptions/${second.result.subscription.id}/pause`, { resumes_at: "2026-03-01T00:00:00Z" });
    await s.call("POST", `/subscriptions/${second.result.subscription.id}/resume`, {});
    await s.call("POST", `/subscriptions/${second.result.subscription.id}/cancel`, {});
    await s.call("GET", `/subscriptions?subject_id=${s.subjectId}`);

    // Hosted pages handed out by the API: a portal session and a standalone checkout.
    await s.call("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: "https://app.example/account" });
    await s.call("POST", "/checkout", { subject_id: s.subjectId, rate_card_id: cheaper, ...callbacks });

    // The event feed and the endpoint's deliveries, attempts and a replay; then the endpoint goes.
    const feed = await s.call("GET", "/events?limit=5");
    await s.call("GET", `/events/${feed.events[0].id}`);
    await s.call("GET", `/webhook-endpoints/${ep.id}/deliveries?limit=5`);
    await s.call("GET", `/webhook-endpoints/${ep.id}/attempts?limit=5`);
    await s.call("POST", `/webhook-endpoints/${ep.id}/replay`, { event_id: feed.events[0].id });
    await s.call("DELETE", `/webhook-endpoints/${ep.id}`);

    // Open invoices (their charge fails): void one, mark one uncollectible.
    const payer = await Checked.begin(server, validator, "2026-01-15T00:00:00Z");
    const seatsOnly = await payer.card({ fixed_rates: [{ code: "seats", name: "Seats", price: usd(1000) }] });
    await payer.subscribe({ rate_card_id: seatsOnly, fixed_rate_quantities: { seats: 1 } }, CARD_FAILS_LATER);
    await payer.advance("2026-02-15T00:00:00Z");
    const [a, b] = await payer.invoices();
    // A credit note lowers what the open one owes (DESIGN §15); it is read back and listed.
    const note = await payer.call("POST", "/credit-notes", { invoice_id: b.id, reason: "order_change", outcome: "reduce_amount_due", amount: "100", memo: "one seat short" });
    await payer.call("GET", `/credit-notes/${note.id}`);
    await payer.call("GET", `/credit-notes?invoice_id=${b.id}`);
    // The PDFs (REST only): a 200 application/pdf, checked by its content type and %PDF- magic.
    await payer.call("GET", `/invoices/${b.id}/pdf`);
    await payer.call("GET", `/credit-notes/${note.id}/pdf?paper=letter`);
    await payer.fails(400, "GET", `/invoices/${b.id}/pdf?paper=a3`);
    await payer.call("POST", `/invoices/${a.id}/void`, {});
    await payer.call("POST", `/invoices/${b.id}/mark_uncollectible`, {});
    await payer.fails(400, "POST", `/invoices/${a.id}/void`, {});
    s.problems.push(...payer.problems);

    // A timeline: draft, items, start (checkout not needed: the card is on file), list.
    const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: cheaper });
    await s.call("POST", `/subscription-timelines/${tl.id}/items`, {
      items: [
        { period: { start: "2026-03-01T00:00:00Z", end: "2026-04-01T00:00:00Z" }, subscription_input: { rate_card_id: cheaper, fixed_rate_quantities: { seats: 1 } } },
        { period: { start: "2026-04-01T00:00:00Z", end: null }, subscription_input: { rate_card_id: cheaper, fixed_rate_quantities: { seats: 2 }, rate_price_multipliers: { seats: "0.5" } } },
      ],
    });
    await s.call("GET", `/subscription-timelines/${tl.id}/items`);
    await s.call("POST", `/subscription-timelines/${tl.id}/start`, { ...callbacks, effective_at: "2026-03-01T00:00:00Z" });
    await s.call("GET", `/subscription-timelines/${tl.id}`);
    await s.call("GET", "/subscription-timelines");
    await s.advance("2026-04-02T00:00:00Z");

    // Stripe's webhooks (called by Stripe, no API key): an environment of its own on Stripe with a
    // signing secret; a signed event of a type it ignores (200), a bad signature (400).
    const onStripe = await server.freshKey("test");
    const settings = await s.call("PATCH", "/payment-settings", { provider: "stripe", stripe_secret_key: `sk_test_${"51Hx".repeat(6)}AbCd`, stripe_webhook_secret: WHSEC }, onStripe);
    const hook = new URL(settings.stripe_webhook_url).pathname;
    const payload = JSON.stringify({ id: "evt_openapi", object: "event", type: "customer.created", data: { object: { id: "cus_1", object: "customer" } } });
    const signed = async (signature: string, status: number) => {
      const r = await fetch(`${server.url}${hook}`, { method: "POST", headers: { "content-type": "application/json", "stripe-signature": signature }, body: payload });
      const { operation, problems } = validator.check("POST", hook, r.status, await r.json(), r.headers.get("content-type"));
      for (const p of problems) s.problems.push(`${operation} → ${r.status}: ${p}`);
      if (r.status !== status) s.problems.push(`POST ${hook}: expected ${status}, got ${r.status}`);
    };
    await signed(Stripe.webhooks.generateTestHeaderString({ payload, secret: WHSEC }), 200);
    await signed("t=1,v1=bad", 400);

    // Errors: each status the bridge answers with.
    await s.fails(400, "GET", "/subjects?limit=0");
    await s.fails(400, "POST", "/rate-cards", { name: "", billing_interval: "weekly" });
    await s.fails(400, "POST", "/subjects", "{not json");
    await s.fails(401, "GET", "/subjects", undefined, "");
    await s.fails(401, "GET", "/subjects", undefined, "sk_test_unknown");
    await s.fails(403, "GET", "/subjects", undefined, server.keys.aPublishable);
    await s.fails(404, "GET", "/subjects/subj_missing");
    await s.fails(404, "GET", `/invoices/inv_missing`);
    await s.fails(409, "POST", "/usage-events", { idempotency_key: "one", subject_id: s.subjectId, event_name: "usage", data: { n: 4 } });
    await s.fails(409, "POST", "/subjects", { external_id: "ext-1" });
    await s.fails(413, "POST", "/subjects", { name: "x".repeat(2 * 1024 * 1024) });
    await s.call("GET", `/customer-access/${s.subjectId}/billing-state`, undefined, server.keys.aPublishable).catch(() => undefined);

    t.deepEqual(s.problems, []);
    const answered200 = new Set([...validator.seen].filter((x) => x.endsWith(" 200")).map((x) => x.slice(0, -4)));
    t.deepEqual(
      validator.operations().filter((op) => !answered200.has(op)),
      [],
      "every documented operation was answered 200 and checked",
    );
    t.true(validator.seen.size > validator.operations().length + 5);
  });
}

test("the check fails on a mismatch: a schema that says otherwise rejects the real answer", async (t) => {
  const doc = loadOpenApi();
  const broken = structuredClone(doc);
  // Break one schema: Subject.created_at as an integer.
  (broken.components.schemas.Subject as Json).properties.created_at = { type: "integer" };
  const good = responseValidator(doc);
  const bad = responseValidator(broken);
  const subject = { id: "subj_1", created_at: "2026-01-01T00:00:00Z", email: null, external_id: null, metadata: {}, name: "n", test_clock_id: null, has_payment_method: false, billing_details: null };
  t.deepEqual(good.check("GET", "/subjects/subj_1", 200, subject).problems, []);
  t.regex(bad.check("GET", "/subjects/subj_1", 200, subject).problems.join("\n"), /\/created_at must be integer/);
  // A field the document does not have, a missing one, a decimal as a number, an undocumented status.
  t.regex(good.check("GET", "/subjects/subj_1", 200, { ...subject, extra: 1 }).problems.join("\n"), /additional properties/);
  t.deepEqual(good.check("GET", "/subjects/subj_1", 200, { ...subject, name: null }).problems, [], "an optional field is null when absent");
  t.regex(good.check("GET", "/subjects/subj_1", 200, { ...subject, name: "", has_payment_method: null }).problems.join("\n"), /has_payment_method must be boolean/);
  const { name: _name, ...missing } = subject;
  t.regex(good.check("GET", "/subjects/subj_1", 200, missing).problems.join("\n"), /must have required property 'name'/);
  t.regex(good.check("GET", "/rate-catalogs/rcat_1", 200, { id: "x", name: "n", description: "", rate_count: "1" }).problems.join("\n"), /rate_count must be integer/);
  t.regex(good.check("GET", "/ping", 401, { code: "unauthenticated", message: "", details: [] }).problems.join("\n"), /status 401 is not documented/);
  t.regex(good.check("GET", "/subjects", 404, { code: "unauthenticated", message: "x", details: [] }).problems.join("\n"), /status 404 is not documented|must be equal to one of the allowed values/);
  t.regex(good.check("GET", "/subjects", 401, { code: "not_found", message: "x", details: [] }).problems.join("\n"), /must be equal to one of the allowed values/);
});
