/**
 * The fake Stripe's objects and what its operations do to them (no HTTP here: fake-stripe.ts
 * routes to these). Objects are shaped as Stripe's API answers them (API objects of
 * test/stripe/openapi-subset.json; every answer is validated against it by the server).
 */
import { randomBytes } from "node:crypto";
import { cardToken, type TestCard, testCard } from "./cards.js";

// biome-ignore lint/suspicious/noExplicitAny: Stripe's objects are JSON, validated against the OpenAPI subset
export type Obj = Record<string, any>;

/** A Stripe error answer: thrown by an operation, sent as `{ error }` with its status. */
export class StripeFail extends Error {
  constructor(
    readonly status: number,
    readonly error: Obj,
  ) {
    super(String(error.message));
  }
}

export const invalid = (message: string, param?: string, code?: string) => new StripeFail(400, { type: "invalid_request_error", message, ...(param ? { param } : {}), ...(code ? { code } : {}) });
const missing = (kind: string, id: string, param = "id") => new StripeFail(404, { type: "invalid_request_error", code: "resource_missing", param, message: `No such ${kind}: '${id}'` });

const now = () => Math.floor(Date.now() / 1000);
const newId = (prefix: string) => `${prefix}_${randomBytes(12).toString("base64url").replace(/[-_]/g, "x")}`;
/** Stripe's metadata update: a key set to "" is removed. */
function mergeMetadata(old: Obj, patch: unknown): Obj {
  if (patch === "" || patch === undefined) return patch === "" ? {} : old;
  const out = { ...old };
  for (const [k, v] of Object.entries(patch as Obj)) {
    if (v === "") delete out[k];
    else out[k] = String(v);
  }
  return out;
}
const nullable = <T>(v: T | undefined | ""): T | null => (v === undefined || v === "" ? null : v);

/** The account of every key not given one (fake.setAccount): the tests of one account need nothing else. */
export const DEFAULT_ACCOUNT = "acct_fake";

export class FakeStripeState {
  readonly customers = new Map<string, Obj>();
  /**
   * The account of the request being served (its key's, fake.setAccount); undefined outside a
   * request (the checkout page, the control API). Customers belong to the account that made them:
   * another account's key is answered 404 "No such customer", as Stripe does.
   */
  account: string | undefined;
  /** The account each customer was made in. */
  readonly accountOfCustomer = new Map<string, string>();
  readonly sessions = new Map<string, Obj>();
  readonly setupIntents = new Map<string, Obj>();
  /** A payment-mode session's `payment_intent_data` (the PaymentIntent its completion makes). */
  readonly sessionIntentData = new Map<string, Obj>();
  readonly paymentMethods = new Map<string, Obj>();
  readonly paymentIntents = new Map<string, Obj>();
  readonly refunds = new Map<string, Obj>();
  /** The status a new refund is made in: "succeeded" (the default), or "pending" as Stripe answers a card refund not settled yet. */
  refundStatus: "succeeded" | "pending" = "succeeded";
  /** Called with a refund's parameters before it is made: it may refuse it (throw a StripeFail, e.g. `invalid(…)`), nothing made. */
  beforeRefund: ((p: Obj) => void) | undefined = undefined;
  /** The test card behind each PaymentMethod id. */
  readonly cardOf = new Map<string, TestCard>();

  constructor(readonly baseUrl: () => string) {}

  // --- customers ---
  createCustomer(p: Obj): Obj {
    const c: Obj = {
      id: newId("cus"),
      object: "customer",
      address: nullable(p.address),
      balance: 0,
      created: now(),
      currency: null,
      default_source: null,
      delinquent: false,
      description: nullable(p.description),
      discount: null,
      email: nullable(p.email),
      invoice_prefix: randomBytes(4).toString("hex").toUpperCase(),
      invoice_settings: { custom_fields: null, default_payment_method: nullable(p.invoice_settings?.default_payment_method), footer: null, rendering_options: null },
      livemode: false,
      metadata: mergeMetadata({}, p.metadata),
      name: nullable(p.name),
      next_invoice_sequence: 1,
      phone: nullable(p.phone),
      preferred_locales: p.preferred_locales || [],
      shipping: null,
      tax_exempt: p.tax_exempt || "none",
      test_clock: null,
    };
    this.customers.set(c.id, c);
    this.accountOfCustomer.set(c.id, this.account ?? DEFAULT_ACCOUNT);
    return c;
  }
  customer(id: string, param = "id"): Obj {
    const c = this.customers.get(id);
    if (!c || (this.account !== undefined && this.accountOfCustomer.get(id) !== this.account)) throw missing("customer", id, param);
    return c;
  }
  updateCustomer(id: string, p: Obj): Obj {
    const c = this.customer(id);
    for (const k of ["address", "description", "email", "name", "phone"] as const) if (k in p) c[k] = nullable(p[k]);
    if ("preferred_locales" in p) c.preferred_locales = p.preferred_locales || [];
    if ("tax_exempt" in p) c.tax_exempt = p.tax_exempt || "none";
    if ("metadata" in p) c.metadata = mergeMetadata(c.metadata, p.metadata);
    const dpm = p.invoice_settings?.default_payment_method;
    if (dpm !== undefined) {
      if (dpm !== "" && this.paymentMethod(dpm, "invoice_settings[default_payment_method]").customer !== id)
        throw invalid(`The customer does not have a payment method with the ID ${dpm}.`, "invoice_settings[default_payment_method]");
      c.invoice_settings.default_payment_method = nullable(dpm);
    }
    return c;
  }
  listCustomers(q: Obj): Obj {
    const mine = (c: Obj) => this.account === undefined || this.accountOfCustomer.get(c.id) === this.account;
    const all = [...this.customers.values()].filter((c) => mine(c) && (q.email === undefined || c.email === q.email)).reverse();
    return page(all, q, "/v1/customers");
  }

  // --- checkout sessions and setup intents ---
  createSession(p: Obj): Obj {
    if (p.mode !== "setup" && p.mode !== "payment") throw invalid("The fake Stripe serves Checkout in setup and payment mode only.", "mode");
    if (!p.success_url) throw invalid("Missing required param: success_url.", "success_url");
    if (p.customer) this.customer(p.customer, "customer");
    const payment = p.mode === "payment" ? sessionAmount(p) : undefined;
    if (!payment && !p.currency && !p.payment_method_types) throw invalid("You must provide either `currency` or `payment_method_types` in `setup` mode.", "currency");
    const created = now();
    const id = `cs_test_${randomBytes(24).toString("hex")}`;
    const seti = payment ? undefined : this.createSetupIntent(p.customer ?? null, p.payment_method_types ?? ["card"], p.setup_intent_data?.metadata);
    if (payment) this.sessionIntentData.set(id, p.payment_intent_data ?? {});
    const s: Obj = {
      id,
      object: "checkout.session",
      after_expiration: null,
      allow_promotion_codes: null,
      amount_subtotal: payment?.amount ?? null,
      amount_total: payment?.amount ?? null,
      automatic_tax: { enabled: false, status: null },
      billing_address_collection: null,
      cancel_url: nullable(p.cancel_url),
      client_reference_id: nullable(p.client_reference_id),
      consent: null,
      consent_collection: null,
      created,
      currency: payment?.currency ?? nullable(p.currency),
      custom_fields: [],
      custom_text: { shipping_address: null, submit: null, terms_of_service_acceptance: null },
      customer: nullable(p.customer),
      customer_creation: null,
      customer_details: null,
      customer_email: nullable(p.customer_email),
      expires_at: created + 24 * 3600,
      invoice: null,
      invoice_creation: null,
      livemode: false,
      locale: nullable(p.locale),
      metadata: mergeMetadata({}, p.metadata),
      mode: p.mode,
      payment_intent: null,
      payment_link: null,
      payment_method_collection: "always",
      payment_method_types: p.payment_method_types ?? ["card"],
      payment_status: payment ? "unpaid" : "no_payment_required",
      phone_number_collection: { enabled: false },
      recovered_from: null,
      setup_intent: seti?.id ?? null,
      shipping_address_collection: null,
      shipping_cost: null,
      shipping_details: null,
      shipping_options: [],
      status: "open",
      submit_type: null,
      subscription: null,
      success_url: p.success_url,
      total_details: payment ? { amount_discount: 0, amount_shipping: 0, amount_tax: 0 } : null,
      url: `${this.baseUrl()}/checkout/${id}`,
    };
    this.sessions.set(id, s);
    return s;
  }
  session(id: string): Obj {
    const s = this.sessions.get(id);
    if (!s) throw missing("checkout.session", id, "session");
    return s;
  }
  private createSetupIntent(customer: string | null, types: string[], metadata: unknown): Obj {
    const id = newId("seti");
    const s: Obj = {
      id,
      object: "setup_intent",
      application: null,
      automatic_payment_methods: null,
      cancellation_reason: null,
      client_secret: `${id}_secret_${randomBytes(12).toString("hex")}`,
      created: now(),
      customer,
      description: null,
      flow_directions: null,
      last_setup_error: null,
      latest_attempt: null,
      livemode: false,
      mandate: null,
      metadata: mergeMetadata({}, metadata),
      next_action: null,
      on_behalf_of: null,
      payment_method: null,
      payment_method_options: { card: { mandate_options: null, network: null, request_three_d_secure: "automatic" } },
      payment_method_types: types,
      single_use_mandate: null,
      status: "requires_payment_method",
      usage: "off_session",
    };
    this.setupIntents.set(id, s);
    return s;
  }
  setupIntent(id: string): Obj {
    const s = this.setupIntents.get(id);
    if (!s) throw missing("setupintent", id, "intent");
    return s;
  }
  /** The customer fills the checkout page with `card`: a PaymentMethod, attached; the SetupIntent succeeds; the session completes. */
  completeSession(id: string, card: TestCard): { session: Obj; setupIntent: Obj; paymentMethod: Obj } {
    const s = this.session(id);
    if (s.status !== "open") throw invalid(`This Checkout Session is ${s.status}.`, "session");
    if (s.mode !== "setup") throw invalid("A payment-mode session is completed by completePaymentSession (payments.ts).", "session");
    const customer: string = s.customer ?? this.createCustomer({ email: s.customer_email ?? undefined }).id;
    const pm = this.newPaymentMethod(card);
    this.attach(pm.id, customer);
    const seti = this.setupIntent(s.setup_intent);
    Object.assign(seti, { customer, payment_method: pm.id, status: "succeeded", latest_attempt: null });
    Object.assign(s, {
      customer,
      status: "complete",
      customer_details: { address: null, email: this.customer(customer).email, name: null, phone: null, tax_exempt: "none", tax_ids: [] },
    });
    return { session: s, setupIntent: seti, paymentMethod: pm };
  }

  // --- payment methods ---
  newPaymentMethod(card: TestCard): Obj {
    if (card.brand === "sepa_debit") return this.newDebitMethod(card);
    const year = new Date().getUTCFullYear() + 3;
    const pm: Obj = {
      id: newId("pm"),
      object: "payment_method",
      billing_details: { address: { city: null, country: null, line1: null, line2: null, postal_code: null, state: null }, email: null, name: null, phone: null },
      card: {
        brand: card.brand,
        checks: { address_line1_check: null, address_postal_code_check: null, cvc_check: "pass" },
        country: "US",
        exp_month: 12,
        exp_year: year,
        fingerprint: card.number.slice(-8).padStart(16, "f"),
        funding: "credit",
        generated_from: null,
        last4: card.last4,
        networks: { available: [card.brand], preferred: null },
        three_d_secure_usage: { supported: true },
        wallet: null,
      },
      created: now(),
      customer: null,
      livemode: false,
      metadata: {},
      type: "card",
    };
    this.paymentMethods.set(pm.id, pm);
    this.cardOf.set(pm.id, card);
    return pm;
  }
  /** A SEPA Direct Debit PaymentMethod for the test IBAN `card.number`. */
  private newDebitMethod(card: TestCard): Obj {
    const pm: Obj = {
      id: newId("pm"),
      object: "payment_method",
      billing_details: { address: { city: null, country: null, line1: null, line2: null, postal_code: null, state: null }, email: "jenny@example.com", name: "Jenny Rosen", phone: null },
      created: now(),
      customer: null,
      livemode: false,
      metadata: {},
      sepa_debit: {
        bank_code: card.number.slice(4, 12),
        branch_code: "",
        country: card.number.slice(0, 2),
        fingerprint: card.number.slice(-8).padStart(16, "e"),
        generated_from: null,
        last4: card.last4,
      },
      type: "sepa_debit",
    };
    this.paymentMethods.set(pm.id, pm);
    this.cardOf.set(pm.id, card);
    return pm;
  }
  /** A PaymentMethod by id; a test token (`pm_card_visa`) makes a new one, as Stripe does. */
  paymentMethod(id: string, param = "payment_method"): Obj {
    const pm = this.paymentMethods.get(id);
    if (pm) return pm;
    const card = cardToken(id);
    if (card) return this.newPaymentMethod(card);
    throw missing("PaymentMethod", id, param);
  }
  attach(id: string, customer: string): Obj {
    this.customer(customer, "customer");
    const pm = this.paymentMethod(id, "payment_method");
    if (pm.customer && pm.customer !== customer)
      throw invalid("This PaymentMethod was previously used without being attached to a Customer or was detached from a Customer, and may not be used again.", "payment_method");
    pm.customer = customer;
    return pm;
  }
  detach(id: string): Obj {
    const pm = this.paymentMethod(id);
    if (!pm.customer) throw invalid(`The payment method you provided is not attached to a customer so detachment is impossible.`, "payment_method");
    const c = this.customers.get(pm.customer);
    if (c?.invoice_settings.default_payment_method === id) c.invoice_settings.default_payment_method = null;
    pm.customer = null;
    return pm;
  }
  listPaymentMethods(customer: string, q: Obj): Obj {
    this.customer(customer, "customer");
    const all = [...this.paymentMethods.values()].filter((pm) => pm.customer === customer && (q.type === undefined || pm.type === q.type)).reverse();
    return page(all, q, `/v1/customers/${customer}/payment_methods`);
  }

  /** A test card by token, number or last four. */
  static card(name: string): TestCard {
    return testCard(name);
  }
}

/** A payment-mode session's amount and currency: its line items, each with `price_data` (`price` ids are not served). */
function sessionAmount(p: Obj): { amount: number; currency: string } {
  const items: Obj[] = Array.isArray(p.line_items) ? p.line_items : [];
  if (items.length === 0) throw invalid("You must specify `line_items` in `payment` mode.", "line_items");
  let amount = 0;
  const currencies = new Set<string>();
  items.forEach((li, n) => {
    const pd = li.price_data;
    if (!pd) throw invalid("The fake Stripe serves line items with `price_data` only.", `line_items[${n}][price]`);
    if (!Number.isInteger(pd.unit_amount) || pd.unit_amount < 0) throw invalid("Missing required param: unit_amount.", `line_items[${n}][price_data][unit_amount]`);
    if (!pd.product_data?.name && !pd.product) throw invalid("Missing required param: product_data.", `line_items[${n}][price_data][product_data]`);
    const quantity = li.quantity ?? 1;
    if (!Number.isInteger(quantity) || quantity < 1) throw invalid("This value must be greater than or equal to 1.", `line_items[${n}][quantity]`);
    amount += pd.unit_amount * quantity;
    currencies.add(String(pd.currency).toLowerCase());
  });
  if (currencies.size !== 1) throw invalid("All line items must be in the same currency.", "line_items");
  if (amount < 1) throw invalid("The Checkout Session's total amount due must add up to at least 1.", "line_items");
  return { amount, currency: [...currencies][0] as string };
}

/** A list object of `all` (newest first) after `starting_after`, `limit` long. */
export function page(all: Obj[], q: Obj, url: string): Obj {
  let from = 0;
  if (q.starting_after) from = all.findIndex((o) => o.id === q.starting_after) + 1;
  const limit = typeof q.limit === "number" ? q.limit : 10;
  const data = all.slice(from, from + limit);
  return { object: "list", data, has_more: from + limit < all.length, url };
}

export { newId, now, mergeMetadata, nullable };
