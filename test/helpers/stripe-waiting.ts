/**
 * A renewal whose charge waits for the customer (Stripe's 3-D Secure: its PaymentIntent waits for
 * their authentication), what the tests of such payments read of it (the invoice's stored payment
 * state, its PaymentIntents, cancels and refunds at the fake Stripe), and a proxy in front of the
 * fake Stripe that fails chosen charges and cancels (test/api/stripe-*.test.ts).
 */
import type { ExecutionContext } from "ava";
import { withDatabase } from "./db.js";
import { type StripeFront, type StripeServer, stripeDriver } from "./payment-flows.js";
import type { Scenario } from "./scenario.js";
import { KEY_REVOKED, UNAVAILABLE, answerJson, stripeProxy } from "./stripe-outage.js";
import type { Json } from "./subjects-api.js";
import type { FakeStripe } from "../stripe/fake-stripe.js";

const usd = (value: string) => ({ currency_code: "USD", value });
const CANCEL = "POST /v1/payment_intents/{intent}/cancel";

/**
 * A proxy in front of the fake Stripe: while `down` is set, every cancel's connection is dropped
 * before an answer (Stripe unreachable; counted in `dropped`); while `charges` is set, every charge
 * (POST /v1/payment_intents) fails (Stripe's 503, or the connection dropped before an answer);
 * while `cancelAnswerLost`, every cancel reaches Stripe and its answer is lost (the connection
 * dropped); while `cancelRefused`, every cancel is answered Stripe's 401 for a revoked key
 * (counted in `refused`). `failed` counts the charges failed and the cancel answers lost.
 */
export interface CancelFront extends StripeFront {
  down: boolean;
  dropped: number;
  charges: "503" | "unreachable" | undefined;
  cancelAnswerLost: boolean;
  cancelRefused: boolean;
  failed: number;
  refused: number;
}

/** Starts the CancelFront in front of the fake Stripe at `target`, passing everything through until one of its switches is set. */
export async function cancelFront(target: string): Promise<CancelFront> {
  const proxy: CancelFront = { url: "", down: false, dropped: 0, charges: undefined, cancelAnswerLost: false, cancelRefused: false, failed: 0, refused: 0, stop: async () => {} };
  const started = await stripeProxy(
    target,
    (req, res) => {
      const path = req.url?.split("?")[0] ?? "";
      const cancel = req.method === "POST" && path.endsWith("/cancel");
      if (proxy.down && cancel) {
        proxy.dropped++;
        req.socket.destroy();
        return "answered";
      }
      if (proxy.charges && req.method === "POST" && path === "/v1/payment_intents") {
        proxy.failed++;
        if (proxy.charges === "unreachable") req.socket.destroy();
        else answerJson(res, 503, UNAVAILABLE);
        return "answered";
      }
      if (proxy.cancelRefused && cancel) {
        proxy.refused++;
        answerJson(res, 401, KEY_REVOKED);
        return "answered";
      }
      return proxy.cancelAnswerLost && cancel ? "answer-lost" : undefined;
    },
    () => proxy.failed++,
  );
  proxy.url = started.url;
  proxy.stop = started.stop;
  return proxy;
}

/** The invoice's payment state as stored (payment_state), with its next_payment_attempt (`next`). */
export async function paymentState(url: string, invoiceId: string): Promise<Json> {
  const [row] = await withDatabase(url, (db) => db.dataSource.query("SELECT payment_state AS p, next_payment_attempt AS n FROM invoices WHERE id = ?", [invoiceId]));
  return { ...JSON.parse(String(row?.p ?? "{}")), next: row?.n ?? null };
}

/** The invoice's PaymentIntents at the fake Stripe. */
export const intentsOf = (fake: FakeStripe, invoiceId: string) => fake.paymentIntents().filter((pi) => (pi.metadata as Json)?.invoice_id === invoiceId);

/** The cancel requests Stripe received for `intentId`. */
export const cancelRequests = (fake: FakeStripe, intentId: string) => fake.requests().filter((r) => r.operation === CANCEL && r.path === `/v1/payment_intents/${intentId}/cancel`);

/** The cancel requests Stripe received for `intentId`: [idempotency key, status]. */
export const cancelsOf = (fake: FakeStripe, intentId: string) => cancelRequests(fake, intentId).map((r) => [r.idempotencyKey, r.status]);

/** The refunds of `intentId` at the fake Stripe: [id, amount]. */
export const refundsOf = (fake: FakeStripe, intentId: string) => [...fake.state.refunds.values()].filter((r) => r.payment_intent === intentId).map((r) => [String(r.id), r.amount]);

/** Stripe's payment_intent.succeeded event of `intentId`. */
export const succeededEvent = (fake: FakeStripe, intentId: string) => fake.events().find((e) => e.type === "payment_intent.succeeded" && (e.data as Json).object.id === intentId) as Json;

/** The server and fake Stripe of a test file (useStripeServer), read when called. */
type Stripe = Pick<StripeServer, "server" | "fake">;

/** A subject on Stripe whose renewal (card: `card`) is charged: the scenario and that invoice. */
export async function renewal(ctx: Stripe, card: "authentication" | "visa"): Promise<{ s: Scenario; inv: Json }> {
  const { server, fake } = ctx;
  const d = stripeDriver(server, fake);
  const s = await d.start(server);
  const rateCard = await s.card({ fixed_rates: [{ code: "platform", name: "Platform", price: { price_type: "flat", amount: usd("4900") } }] });
  await d.subscribe(s, { rate_card_id: rateCard, fixed_rate_quantities: { platform: 1 } }, "visa");
  if (card !== "visa") await d.replaceCard(s, card);
  await s.advance("2026-02-15T00:00:00Z");
  await fake.settle();
  const last = (await s.invoices()).at(-1) as Json;
  return { s, inv: await s.call("GET", `/invoices/${last.id}`) };
}

/** A subject on Stripe whose renewal waits for the customer's authentication: the scenario and that invoice. */
export async function waitingInvoice(ctx: Stripe): Promise<{ s: Scenario; inv: Json }> {
  const { s, inv } = await renewal(ctx, "authentication");
  if (inv.status !== "open" || !inv.payment_url) throw new Error(`the renewal does not wait for the customer: ${JSON.stringify(inv)}`);
  return { s, inv };
}

/** A renewal waiting for the customer's authentication: the scenario, that invoice and its PaymentIntent (A), asserted the only one. */
export async function waitingRenewal(t: ExecutionContext, ctx: Stripe): Promise<{ s: Scenario; inv: Json; a: Json }> {
  const { s, inv } = await waitingInvoice(ctx);
  const intents = intentsOf(ctx.fake, inv.id);
  t.is(intents.length, 1, "one PaymentIntent, waiting");
  return { s, inv, a: intents[0] as Json };
}
