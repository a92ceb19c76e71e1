/**
 * A local Stripe-compatible server for the tests (no internet): the official `stripe` library
 * talks to it with `new Stripe("sk_test_…", { host: fake.host, port: fake.port, protocol: "http" })`.
 *
 *   const fake = await startFakeStripe();
 *   fake.setWebhook("http://127.0.0.1:PORT/providers/stripe/webhooks/ENV", "whsec_…");
 *   // the code under test creates a customer and a Checkout session (mode setup) through the library;
 *   await fake.completeCheckout(sessionId, "4242 4242 4242 4242"); // the customer pays the page: PaymentMethod attached, checkout.session.completed sent
 *   // … off-session PaymentIntents answer by the card (test/stripe/cards.ts) …
 *   await fake.completeAuthentication(paymentIntentId);            // the customer authenticated: payment_intent.succeeded sent
 *   fake.paymentIntents();  // every PaymentIntent created, with the Idempotency-Key that created it
 *   fake.events();          // every event (and fake.deliveries(): every webhook POST and its answer)
 *   await fake.stop();      // throws if an answer or event of the fake drifted from Stripe's schema, or a request broke it
 *
 * Served (form-encoded bodies, `Authorization: Bearer sk_test_…`, `Idempotency-Key` replayed as
 * Stripe does, every request and answer validated against test/stripe/openapi-subset.json):
 * customers (create, list, retrieve, update, list payment methods), checkout sessions (setup
 * mode, and payment mode with `line_items[][price_data]`: create, retrieve with
 * `expand[]=setup_intent` / `expand[]=payment_intent`, list by `customer`, expire:
 * the page then refuses payment, `checkout.session.expired` sent; a payment-mode session completed with a
 * card makes a succeeded PaymentIntent, sends `payment_intent.succeeded` then
 * `checkout.session.completed`), setup intents (retrieve), payment methods
 * (retrieve, attach, detach), payment intents (create with confirm/off_session, retrieve, cancel), refunds
 * (list by `payment_intent` or `charge`; create; made `succeeded`, or `pending` with `fake.state.refundStatus = "pending"`, then settled by
 * `fake.settleRefund(id, status)`: refund.updated, and refund.failed for a failure). Not Stripe's: `GET /checkout/{id}` (the page the session's `url` points at: pick a
 * test card, then redirected to `success_url`) and `/__test/…` (the control API, JSON; see
 * control.ts). Webhook switches: `fake.webhookOptions({ twice, outOfOrder, badSignature, dropped })`,
 * `fake.releaseHeld()`, `fake.redeliver(eventId, options)`.
 *
 * Stripe's behaviour, followed (see cards.ts for each test card):
 * - An off-session confirm that needs authentication is NOT a `requires_action` answer: Stripe
 *   answers 402 `card_error`, `code: "authentication_required"`, with the PaymentIntent in the
 *   error (`err.payment_intent`, status `requires_payment_method`, `last_payment_error` set).
 *   `completeAuthentication(id)` is the customer coming back: it succeeds and
 *   `payment_intent.succeeded` is sent. (An on-session confirm gets `requires_action`.)
 * - Declines are 402 `card_error` (`StripeCardError`) with `code`, `decline_code` and the
 *   PaymentIntent, whose `payment_method` is then null (the declined card named by its
 *   `last_payment_error.payment_method` only); an Idempotency-Key replays the answer it first got (a decline too) with
 *   `Idempotent-Replayed: true`; other parameters under the same key: 400 `idempotency_error`.
 * - A PaymentIntent is cancelled only while unpaid (waiting for a method, a confirmation or the
 *   customer's authentication); a succeeded or cancelled one, or a bank debit still processing: 400 `payment_intent_unexpected_state`
 *   with the PaymentIntent in the error. A cancelled one can no longer be authenticated.
 * - Refunds beyond what is left of the charge: 400 `amount_too_large` (`param: "amount"`);
 *   nothing left: `charge_already_refunded`.
 * - Unknown parameters (nested ones too) and wrongly typed ones: 400 `invalid_request_error`
 *   naming the parameter as Stripe does (`address[planet]`).
 * - Accounts: `fake.setAccount(secretKey, "acct_…")` puts a key's requests in another account
 *   (every other key: one default account). A customer belongs to the account that made it: under
 *   another account's key it is 404 `resource_missing` "No such customer" (retrieve, update,
 *   Checkout, PaymentIntents) and absent from lists; idempotency keys are per account.
 * - Events are sent as they happen (webhooks after the answer, as Stripe may);
 *   `completeCheckout`/`completeAuthentication` wait for their deliveries; `settle()` waits for all.
 *   Webhook POSTs time out after 10 s (delivery status "error").
 *
 * The schema is Stripe's API version 2023-08-16 (the newest spec the offline mirror holds, see
 * extract-schemas.ts) while the library (stripe 23.1.0) speaks 2026-10-28: the calls above have
 * the same shape in both; a parameter the newer API added would be refused as unknown (extend the
 * subset from a newer spec3 if so).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { controlRoute, handleCheckoutPage } from "./control.js";
import { decodeForm } from "./form.js";
import { DEFAULT_ACCOUNT, FakeStripeState, invalid, type Obj, StripeFail } from "./objects.js";
import {
  cancelPaymentIntent,
  completeAuthentication,
  completePaymentSession,
  createPaymentIntent,
  createRefund,
  expireSession,
  listPaymentIntents,
  listRefunds,
  listSessions,
  paymentIntent,
  settleDebit,
  settleRefund,
} from "./payments.js";
import { loadChecker, type SchemaChecker } from "./schema-check.js";
import { type Delivery, type DeliveryOptions, WebhookSender } from "./webhooks.js";

export interface RequestRecord {
  method: string;
  path: string;
  operation: string;
  params: Obj;
  idempotencyKey: string | null;
  status: number;
  replayed: boolean;
}

export interface FakeStripe {
  url: string;
  host: string;
  port: number;
  stop(): Promise<void>;
  setWebhook(url: string, secret: string): void;
  webhookOptions(options: DeliveryOptions): void;
  releaseHeld(): Promise<void>;
  redeliver(eventId: string, options?: DeliveryOptions): Promise<void>;
  /** Waits for every webhook delivery under way. */
  settle(): Promise<void>;
  /** The customer completes a Checkout Session with `card`: setup mode saves it (`setupIntent`); payment mode pays with it (`paymentIntent`). */
  completeCheckout(sessionId: string, card: string): Promise<{ session: Obj; setupIntent?: Obj; paymentIntent?: Obj; paymentMethod: Obj }>;
  completeAuthentication(paymentIntentId: string): Promise<Obj>;
  /** A processing bank debit (cards.ts: the SEPA test IBANs) settles as its IBAN says; its webhook sent. */
  settleDebit(paymentIntentId: string): Promise<Obj>;
  /**
   * Refund `id` settles (`st.refundStatus = "pending"` makes refunds pending): its status becomes
   * `status` (`failure_reason` for "failed"), `refund.updated` sent, then `refund.failed` for a failure.
   */
  settleRefund(id: string, status: "succeeded" | "failed" | "pending", failureReason?: string): Promise<Obj>;
  paymentIntents(): (Obj & { idempotency_key: string | null })[];
  events(): Obj[];
  deliveries(): Delivery[];
  requests(): RequestRecord[];
  /** Answers of the fake that did not match Stripe's schema (stop() throws if there are any). */
  drift(): string[];
  /** Requests that Stripe's schema refused (answered 400; stop() throws if there are any, unless `invalidRequestsExpected`). */
  invalidRequests(): string[];
  state: FakeStripeState;
  /**
   * Requests with `secretKey` are made in `accountId` (every other key: one default account).
   * Customers and idempotency keys belong to an account: another account's key is answered
   * "No such customer" (404 resource_missing) for them, and replays none of its keys' answers.
   */
  setAccount(secretKey: string, accountId: string): void;
  /** Forgets every idempotency key, as Stripe does 24 hours after a key was first sent: a request sent again with one makes a new object. */
  forgetIdempotencyKeys(): void;
}

export interface FakeStripeOptions {
  /** Changes an answer before it is validated and sent (for the test that breaks one on purpose). */
  tamper?: (operation: string, body: Obj) => Obj;
  checker?: SchemaChecker;
  /**
   * The test sends requests Stripe's schema refuses on purpose. Otherwise stop() throws if any
   * came: the code under test may well catch the library's StripeInvalidRequestError, and a request
   * that real Stripe would refuse must not pass unnoticed.
   */
  invalidRequestsExpected?: boolean;
}

type Handler = (p: Obj, path: string[], ctx: { emit: (type: string, o: Obj) => void }) => Obj;
interface Route {
  method: string;
  template: string;
  regex: RegExp;
  handler: Handler;
}

function routes(st: FakeStripeState): Route[] {
  const r = (method: string, template: string, handler: Handler): Route => ({
    method,
    template,
    regex: new RegExp(`^${template.replace(/\{[^}]+\}/g, "([^/]+)")}$`),
    handler,
  });
  const expand = (o: Obj, p: Obj, field: string, get: (id: string) => Obj) =>
    Array.isArray(p.expand) && p.expand.includes(field) && typeof o[field] === "string" ? { ...o, [field]: get(o[field]) } : o;
  return [
    r("POST", "/v1/customers", (p) => st.createCustomer(p)),
    r("GET", "/v1/customers", (p) => st.listCustomers(p)),
    r("GET", "/v1/customers/{customer}", (_p, [id]) => st.customer(id as string)),
    r("POST", "/v1/customers/{customer}", (p, [id]) => st.updateCustomer(id as string, p)),
    r("GET", "/v1/customers/{customer}/payment_methods", (p, [id]) => st.listPaymentMethods(id as string, p)),
    r("POST", "/v1/checkout/sessions", (p) => st.createSession(p)),
    r("GET", "/v1/checkout/sessions", (p) => listSessions(st, p)),
    r("POST", "/v1/checkout/sessions/{session}/expire", (_p, [id], { emit }) => {
      const { session, events } = expireSession(st, id as string);
      for (const e of events) emit(e.type, e.object);
      return session;
    }),
    r("GET", "/v1/checkout/sessions/{session}", (p, [id]) =>
      expand(
        expand(st.session(id as string), p, "setup_intent", (x) => st.setupIntent(x)),
        p,
        "payment_intent",
        (x) => paymentIntent(st, x),
      ),
    ),
    r("GET", "/v1/setup_intents/{intent}", (p, [id]) => expand(st.setupIntent(id as string), p, "payment_method", (x) => st.paymentMethod(x))),
    r("GET", "/v1/payment_methods/{payment_method}", (_p, [id]) => st.paymentMethod(id as string)),
    r("POST", "/v1/payment_methods/{payment_method}/attach", (p, [id], { emit }) => {
      const pm = st.attach(id as string, p.customer);
      emit("payment_method.attached", pm);
      return pm;
    }),
    r("POST", "/v1/payment_methods/{payment_method}/detach", (_p, [id], { emit }) => {
      const pm = st.detach(id as string);
      emit("payment_method.detached", pm);
      return pm;
    }),
    r("POST", "/v1/payment_intents", (p, _path, { emit }) => {
      try {
        const { intent, events } = createPaymentIntent(st, p);
        for (const e of events) emit(e.type, e.object);
        return intent;
      } catch (e) {
        for (const ev of (e as { events?: { type: string; object: Obj }[] }).events ?? []) emit(ev.type, ev.object);
        throw e;
      }
    }),
    r("GET", "/v1/payment_intents", (p) => listPaymentIntents(st, p)),
    r("GET", "/v1/payment_intents/{intent}", (_p, [id]) => paymentIntent(st, id as string)),
    r("POST", "/v1/payment_intents/{intent}/cancel", (p, [id], { emit }) => {
      const { intent, events } = cancelPaymentIntent(st, id as string, p);
      for (const e of events) emit(e.type, e.object);
      return intent;
    }),
    r("GET", "/v1/refunds", (p) => listRefunds(st, p)),
    r("POST", "/v1/refunds", (p, _path, { emit }) => {
      const { refund, events } = createRefund(st, p);
      for (const e of events) emit(e.type, e.object);
      return refund;
    }),
  ];
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { "content-type": "application/json", "request-id": `req_${Math.random().toString(36).slice(2, 16)}`, ...headers });
  res.end(JSON.stringify(body, null, 2));
}

export async function startFakeStripe(options: FakeStripeOptions = {}): Promise<FakeStripe> {
  let base = "";
  const st = new FakeStripeState(() => base);
  const hooks = new WebhookSender();
  const table = routes(st);
  const checker = options.checker ?? loadChecker();
  const idem = new Map<string, { operation: string; params: string; status: number; body: Obj }>();
  const requests: RequestRecord[] = [];
  const drift: string[] = [];
  const invalidRequests: string[] = [];
  const piKeys = new Map<string, string | null>();
  const accounts = new Map<string, string>();
  let stopped = false;
  hooks.check = (event) => {
    const inner = checker.object(String(event.data.object.object), event.data.object).map((p) => `data.object${p}`);
    const problems = [...checker.object("event", event), ...inner].map((p) => `event ${event.type}: ${p}`);
    drift.push(...problems);
    return problems;
  };

  async function api(req: IncomingMessage, res: ServerResponse, url: URL) {
    const method = req.method ?? "GET";
    const auth = req.headers.authorization ?? "";
    if (!/^Bearer sk_test_\w+$/.test(auth)) {
      const shown = auth.replace(/^Bearer\s*/, "").slice(0, 8);
      return send(res, 401, {
        error: {
          type: "invalid_request_error",
          message: auth
            ? `Invalid API Key provided: ${shown}***`
            : "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').",
        },
      });
    }
    const route = table.find((x) => x.method === method && x.regex.test(url.pathname));
    if (!route) return send(res, 404, { error: { type: "invalid_request_error", message: `Unrecognized request URL (${method}: ${url.pathname}). The fake Stripe serves only what the tests need.` } });
    const operation = `${method} ${route.template}`;
    const pathArgs = (url.pathname.match(route.regex) ?? []).slice(1).map(decodeURIComponent);
    const raw = method === "GET" ? decodeForm(url.search.slice(1)) : decodeForm(await readBody(req));
    const checked = checker.request(operation, raw);
    const key = method === "POST" ? ((req.headers["idempotency-key"] as string | undefined) ?? null) : null;
    const account = accounts.get(auth.replace(/^Bearer /, "")) ?? DEFAULT_ACCOUNT;
    // Stripe keeps idempotency keys per account.
    const idemKey = `${account}\u0000${key}`;
    const record = (status: number, replayed: boolean, params: Obj) => requests.push({ method, path: url.pathname, operation, params, idempotencyKey: key, status, replayed });
    if (checked.problems.length > 0) {
      invalidRequests.push(`${operation}: ${checked.problems.join("; ")}`);
      record(400, false, raw);
      const [first] = checked.problems;
      return send(res, 400, { error: { type: "invalid_request_error", message: `The request does not match Stripe's schema for ${operation}: ${checked.problems.join("; ")}`, param: first?.param } });
    }
    const params = checked.value as Obj;
    const fingerprint = `${operation} ${url.pathname} ${JSON.stringify(params)}`;
    if (key) {
      const prior = idem.get(idemKey);
      if (prior && prior.params !== fingerprint) {
        record(400, false, params);
        return send(res, 400, {
          error: {
            type: "idempotency_error",
            message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${key}' if you meant to execute a different request.`,
          },
        });
      }
      if (prior) {
        record(prior.status, true, params);
        return send(res, prior.status, prior.body, { "idempotent-replayed": "true", "original-request": "req_original" });
      }
    }
    const emitted: { type: string; object: Obj }[] = [];
    let status = 200;
    let body: Obj;
    st.account = account;
    try {
      body = structuredClone(route.handler(params, pathArgs, { emit: (type, object) => emitted.push({ type, object: structuredClone(object) }) }));
      if (body.object === "payment_intent" && operation === "POST /v1/payment_intents") piKeys.set(body.id, key);
    } catch (e) {
      if (!(e instanceof StripeFail)) throw e;
      status = e.status;
      body = { error: e.error };
      if (e.error.payment_intent?.id) piKeys.set(e.error.payment_intent.id, key);
    } finally {
      st.account = undefined;
    }
    if (options.tamper) body = options.tamper(operation, body);
    const problems = checker.response(operation, status, body);
    if (problems.length > 0) {
      drift.push(...problems.map((p) => `${operation} ${status}: ${p}`));
      record(500, false, params);
      return send(res, 500, { error: { type: "api_error", message: `The fake Stripe's answer drifted from Stripe's schema (${operation} ${status}): ${problems.join("; ")}` } });
    }
    if (key && status !== 400) idem.set(idemKey, { operation, params: fingerprint, status, body });
    record(status, false, params);
    send(res, status, body);
    setImmediate(() => {
      for (const e of emitted) void hooks.emit(e.type, e.object, key);
    });
  }

  const fake: FakeStripe = {
    url: "",
    host: "127.0.0.1",
    port: 0,
    state: st,
    async stop() {
      if (stopped) return;
      stopped = true;
      await hooks.settle();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      if (drift.length > 0) throw new Error(`fake stripe: answers drifted from Stripe's schema:\n${drift.join("\n")}`);
      if (invalidRequests.length > 0 && !options.invalidRequestsExpected) throw new Error(`fake stripe: requests Stripe's schema refuses (answered 400):\n${invalidRequests.join("\n")}`);
    },
    setWebhook(url, secret) {
      hooks.url = url;
      hooks.secret = secret;
    },
    webhookOptions(o) {
      hooks.options = { ...o };
    },
    releaseHeld: () => hooks.release(),
    redeliver: (id, o) => hooks.redeliver(id, o),
    settle: () => hooks.settle(),
    async completeCheckout(sessionId, card) {
      if (st.session(sessionId).mode === "payment") {
        const paid = completePaymentSession(st, sessionId, FakeStripeState.card(card));
        for (const e of paid.events) await hooks.emit(e.type, e.object, null);
        await hooks.emit("checkout.session.completed", structuredClone(paid.session), null);
        return structuredClone({ session: paid.session, paymentIntent: paid.intent, paymentMethod: paid.paymentMethod });
      }
      const out = st.completeSession(sessionId, FakeStripeState.card(card));
      await hooks.emit("payment_method.attached", structuredClone(out.paymentMethod), null);
      await hooks.emit("setup_intent.succeeded", structuredClone(out.setupIntent), null);
      await hooks.emit("checkout.session.completed", structuredClone(out.session), null);
      return structuredClone(out);
    },
    async completeAuthentication(id) {
      const { intent, events } = completeAuthentication(st, id);
      for (const e of events) await hooks.emit(e.type, e.object, null);
      return structuredClone(intent);
    },
    async settleDebit(id) {
      const { intent, events } = settleDebit(st, id);
      for (const e of events) await hooks.emit(e.type, e.object, null);
      return structuredClone(intent);
    },
    async settleRefund(id, status, failureReason) {
      const { refund, events } = settleRefund(st, id, status, failureReason);
      for (const e of events) await hooks.emit(e.type, e.object, null);
      return structuredClone(refund);
    },
    forgetIdempotencyKeys: () => idem.clear(),
    paymentIntents: () => [...st.paymentIntents.values()].map((pi) => ({ ...structuredClone(pi), idempotency_key: piKeys.get(pi.id) ?? null })),
    events: () => structuredClone(hooks.events),
    deliveries: () => [...hooks.deliveries],
    requests: () => [...requests],
    drift: () => [...drift],
    invalidRequests: () => [...invalidRequests],
    setAccount(secretKey, accountId) {
      accounts.set(secretKey, accountId);
    },
  };

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://fake");
    const done = (e: unknown) => {
      if (res.headersSent) return res.destroy();
      if (e instanceof StripeFail) return send(res, e.status, { error: e.error });
      send(res, 500, { error: { type: "api_error", message: `fake stripe: ${(e as Error).stack ?? e}` } });
    };
    const go = url.pathname.startsWith("/v1/") ? api(req, res, url) : url.pathname.startsWith("/checkout/") ? handleCheckoutPage(fake, req, res, url) : controlRoute(fake, req, res, url);
    go.catch(done);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  fake.port = (server.address() as AddressInfo).port;
  fake.url = `http://127.0.0.1:${fake.port}`;
  base = fake.url;
  return fake;
}

export { invalid };
