/**
 * Drivers of the payment golden flows (test/api/payment-golden-flows.test.ts): what differs
 * between the built-in `test` provider and Stripe (through the official `stripe` library against
 * the local Stripe-compatible server, test/stripe/fake-stripe.ts) — how the environment is set,
 * how a card is entered (typed into our hosted page, or picked on Stripe Checkout in setup mode),
 * how the customer completes a payment on the hosted invoice page (the test provider confirms it
 * itself; Stripe answers a payment-mode Checkout Session), and where the provider's charges and
 * refunds are seen. The flows' expectations are shared and live in the test.
 */
import test from "ava";
import { type Store, withDatabase } from "./db.js";
import { Scenario } from "./scenario.js";
import { type ChildServer, type TestServer, startTestServer } from "./server.js";
import type { Json } from "./subjects-api.js";
import { type FakeStripe, startFakeStripe } from "../stripe/fake-stripe.js";

/** The test cards the flows use, by what they do (each provider's own number or token below). */
export type CardName = "visa" | "mastercard" | "authentication" | "insufficient_funds" | "attach_then_fail";

export const AT = "2026-01-15T00:00:00Z";
export const RETURN_URL = "https://app.example/account";

export interface PaymentDriver {
  readonly name: "test" | "stripe";
  /** A fresh test environment on this provider, a subject on a test clock. */
  start(server: TestServer): Promise<Scenario>;
  /** Subscribes through the hosted checkout (setup), the card entered the provider's way. */
  subscribe(s: Scenario, body: Json, card: CardName): Promise<void>;
  /** Replaces the subject's card through the customer portal. */
  replaceCard(s: Scenario, card: CardName): Promise<void>;
  /** The customer completes the payment of an invoice waiting for them from its hosted page's form (with `card` where the provider asks for one). */
  completePayment(s: Scenario, hostedUrl: string, card: CardName): Promise<void>;
  /** Waits for what the provider sends us on its own (Stripe's webhooks); nothing for the test provider. */
  settle(): Promise<void>;
  /** The provider's successful charges of an invoice: their references, and their amounts (minor units) where the provider shows them. */
  succeededCharges(s: Scenario, invoiceId: string): Promise<{ reference: string; amount?: string }[]>;
  /**
   * The idempotency keys of every charge the provider was asked to make for an invoice, in order,
   * where the provider shows them (Stripe: its PaymentIntents'); the test provider keeps them in
   * the server's memory (test/unit/dunning.test.ts counts them there).
   */
  chargeKeys?(invoiceId: string): string[];
  /** The provider's refunds of an invoice's charges, as [refund id, amount in minor units]. */
  refunds(s: Scenario, invoiceId: string, refundIds: string[]): Promise<[string, string][]>;
}

/** Something put between the server and the fake Stripe (a proxy), started on the fake's URL. */
export interface StripeFront {
  url: string;
  stop(): Promise<void>;
}

/**
 * The fake Stripe and the server pointed at it (STRIPE_API_BASE) of a test file, or of one
 * store's half of it; read inside a test or hook (they start in test.before).
 */
export interface StripeServer<F extends StripeFront | undefined = undefined> {
  server: TestServer;
  /** The fake; a test that stopped it may put a new one here (the teardown stops what is here). */
  fake: FakeStripe;
  /** What `front` made, the server's Stripe in place of the fake. */
  front: F;
}

/**
 * Starts the fake Stripe (test/stripe/fake-stripe.ts) before the tests, then (with `front`, what
 * it makes in front of the fake) the server on `store` with `env` and Stripe at the front's or the
 * fake's URL; after them, even when they fail, stops the server, the front, then the fake (whose
 * stop() throws if an answer drifted from Stripe's schema).
 */
export function useStripeServer(store: Store, env: Record<string, string>): StripeServer;
export function useStripeServer<F extends StripeFront>(store: Store, env: Record<string, string>, front: (fakeUrl: string) => Promise<F>): StripeServer<F>;
export function useStripeServer(store: Store, env: Record<string, string>, front?: (fakeUrl: string) => Promise<StripeFront>): StripeServer<StripeFront | undefined> {
  let server: TestServer | undefined;
  let fake: FakeStripe | undefined;
  let made: StripeFront | undefined;
  const started = <T>(what: string, value: T | undefined): T => {
    if (value === undefined) throw new Error(`useStripeServer(${store}): the ${what} starts in test.before; read it inside a test`);
    return value;
  };
  test.before(async () => {
    fake = await startFakeStripe();
    made = await front?.(fake.url);
    server = await startTestServer(store, { ...env, STRIPE_API_BASE: (made ?? fake).url });
  });
  test.after.always(async () => {
    await server?.stop();
    await made?.stop();
    await fake?.stop();
  });
  return {
    get server() {
      return started("server", server);
    },
    get fake() {
      return started("fake Stripe", fake);
    },
    set fake(replacement) {
      fake = replacement;
    },
    get front() {
      return front && started("front", made);
    },
  };
}

/** A form POSTed as a browser does, its redirect not followed. */
export const form = (url: string, body: Record<string, string> = {}) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams(body).toString(), redirect: "manual" });

/** The Location of a 303 answer; anything else throws, naming `what` and the answer. */
export async function location303(res: Response, what: string): Promise<string> {
  const text = await res.text();
  if (res.status !== 303) throw new Error(`${what}: ${res.status} ${text.slice(0, 300)}`);
  return res.headers.get("location") ?? "";
}

/** The server's own address for a URL it made with its public base URL. */
const local = (server: TestServer, url: string) => `${server.url}${new URL(url).pathname}${new URL(url).search}`;

const CHECKOUT_URLS = { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" };

async function checkoutUrl(s: Scenario, body: Json): Promise<string> {
  const r = await s.call("POST", "/subscriptions", { subject_id: s.subjectId, create_checkout_session: "always", checkout_callback_urls: CHECKOUT_URLS, ...body });
  return r.result.action.checkout_url;
}

async function portalCardUrl(s: Scenario): Promise<string> {
  const r = await s.raw("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: RETURN_URL });
  if (r.status !== 200) throw new Error(`POST /customer-portal/sessions: ${r.status} ${JSON.stringify(r.body)}`);
  return `${r.body.url}/card`;
}

/** The invoice's payment state as stored (the provider's reference of its last charge). */
async function paymentReference(server: TestServer, invoiceId: string): Promise<string | null> {
  const [row] = await withDatabase(server.db.url, (db) => db.dataSource.query("SELECT status, payment_state FROM invoices WHERE id = ?", [invoiceId]));
  const state = row?.payment_state ? (JSON.parse(String(row.payment_state)) as Json) : {};
  return row?.status === "paid" || row?.status === "refunded" ? (state.reference ?? null) : null;
}

const TEST_NUMBERS: Record<CardName, string> = {
  visa: "4242 4242 4242 4242",
  mastercard: "5555 5555 5555 4444",
  authentication: "4000 0025 0000 3155",
  insufficient_funds: "4000 0000 0000 9995",
  attach_then_fail: "4000 0000 0000 0341",
};

/**
 * The built-in test provider: cards typed into our hosted checkout and portal; the hosted invoice
 * page's form completes a waiting charge itself. Its charges live in the server's memory: what
 * shows outside is the invoice's payment reference (one per paid invoice) and the credit notes'
 * refund ids (the provider refuses a refund beyond what was charged, which the flows use).
 */
export function testDriver(server: TestServer): PaymentDriver {
  return {
    name: "test",
    start: (srv) => Scenario.start(srv, AT),
    async subscribe(s, body, card) {
      const url = await checkoutUrl(s, body);
      await location303(await form(local(server, url), { card_number: TEST_NUMBERS[card] }), "the hosted checkout");
    },
    async replaceCard(s, card) {
      await location303(await form(local(server, await portalCardUrl(s)), { card_number: TEST_NUMBERS[card] }), "the portal's card");
    },
    async completePayment(_s, hostedUrl) {
      await location303(await form(`${server.url}${new URL(hostedUrl).pathname}/pay`), "the hosted invoice page's form");
    },
    settle: async () => {},
    async succeededCharges(_s, invoiceId) {
      const ref = await paymentReference(server, invoiceId);
      return ref ? [{ reference: ref }] : [];
    },
    async refunds(s, invoiceId, refundIds) {
      const notes = (await s.call("GET", `/credit-notes?invoice_id=${invoiceId}&limit=100`)).credit_notes as Json[];
      return notes.filter((n) => refundIds.includes(n.refund_id)).map((n) => [n.refund_id, n.total.value]);
    },
  };
}

const STRIPE_TOKENS: Record<CardName, string> = {
  visa: "pm_card_visa",
  mastercard: "pm_card_mastercard",
  authentication: "pm_card_authenticationRequiredOnSetup",
  insufficient_funds: "pm_card_chargeDeclinedInsufficientFunds",
  attach_then_fail: "pm_card_chargeCustomerFail",
};

export const STRIPE_SECRET_KEY = `sk_test_${"51Gf".repeat(6)}Gold`;
export const STRIPE_WEBHOOK_SECRET = `whsec_${"g0l4d3n5".repeat(4)}`;

/**
 * Stripe: the environment set to Stripe through PATCH /payment-settings; cards picked on Stripe
 * Checkout (setup mode) after our page's 303, completion by webhook and by return; the hosted
 * invoice page's form leads to a payment-mode Checkout Session paid with a card; charges and
 * refunds are the fake's PaymentIntents and Refunds.
 */
export function stripeDriver(server: TestServer, fake: FakeStripe): PaymentDriver {
  /** Our page → Stripe Checkout with `card` → the webhooks → the customer's return. */
  async function throughStripe(ourUrl: string, card: CardName): Promise<void> {
    const stripeUrl = await location303(await form(local(server, ourUrl)), "our page");
    if (!stripeUrl.startsWith(`${fake.url}/checkout/cs_`)) throw new Error(`our page led to ${stripeUrl}, not Stripe Checkout`);
    const back = await location303(await form(stripeUrl, { card: STRIPE_TOKENS[card] }), "Stripe Checkout");
    await fake.settle();
    const res = await fetch(local(server, back), { redirect: "manual" });
    await res.body?.cancel();
    if (res.status >= 400) throw new Error(`the return from Stripe: ${res.status}`);
  }
  const intentsOf = (invoiceId: string) => fake.paymentIntents().filter((pi) => (pi.metadata as Json)?.invoice_id === invoiceId);
  return {
    name: "stripe",
    async start(srv) {
      const s = await Scenario.start(srv, AT);
      const r = await s.raw("PATCH", "/payment-settings", { provider: "stripe", stripe_secret_key: STRIPE_SECRET_KEY, stripe_webhook_secret: STRIPE_WEBHOOK_SECRET });
      if (r.status !== 200) throw new Error(`PATCH /payment-settings: ${r.status} ${JSON.stringify(r.body)}`);
      const env = String(r.body.stripe_webhook_url).split("/").pop() as string;
      fake.setWebhook(`${server.url}/providers/stripe/webhooks/${env}`, STRIPE_WEBHOOK_SECRET);
      return s;
    },
    subscribe: async (s, body, card) => throughStripe(await checkoutUrl(s, body), card),
    replaceCard: async (s, card) => throughStripe(await portalCardUrl(s), card),
    async completePayment(_s, hostedUrl, card) {
      const stripeUrl = await location303(await form(`${server.url}${new URL(hostedUrl).pathname}/pay`), "the hosted invoice page's form");
      if (!stripeUrl.startsWith(`${fake.url}/checkout/cs_`)) throw new Error(`the pay form led to ${stripeUrl}, not Stripe Checkout`);
      await location303(await form(stripeUrl, { card: STRIPE_TOKENS[card] }), "Stripe Checkout (payment)");
      await fake.settle();
    },
    settle: () => fake.settle(),
    succeededCharges: async (_s, invoiceId) =>
      intentsOf(invoiceId)
        .filter((pi) => pi.status === "succeeded")
        .map((pi) => ({ reference: String(pi.id), amount: String(pi.amount) })),
    chargeKeys: (invoiceId) => intentsOf(invoiceId).map((pi) => String(pi.idempotency_key)),
    async refunds(_s, invoiceId) {
      const intents = new Set(intentsOf(invoiceId).map((pi) => pi.id));
      return [...fake.state.refunds.values()].filter((r) => intents.has(r.payment_intent)).map((r) => [String(r.id), String(r.amount)]);
    },
  };
}

/**
 * Buys USD `amount` of paid credit for the subject of API key `key` on `dying`, a child server
 * started with BILLING_TEST_DIE_AFTER_CHARGE=1, which dies (SIGKILL) between the provider's answer
 * and its own commit. Answers how the child ended (its signal), killing it if it did not.
 */
export async function buyOnDyingServer(dying: ChildServer, key: string, subjectId: string, amount: string): Promise<NodeJS.Signals | number | null> {
  try {
    await fetch(`${dying.url}/credit-grants`, {
      method: "POST",
      headers: { "x-api-key": key, "content-type": "application/json" },
      body: JSON.stringify({ subject_id: subjectId, amount: { currency_code: "USD", value: amount }, category: "paid" }),
    }).catch(() => undefined);
    return await dying.exited;
  } finally {
    if (dying.proc.exitCode === null && dying.proc.signalCode === null) dying.proc.kill("SIGKILL");
  }
}
