/**
 * A refund of an invoice's payment whose answer was lost, asked again after Stripe forgot its
 * idempotency key (DESIGN §12, §16; payments/cancels.ts), through the real server on both stores
 * against the fake Stripe. Stripe keeps idempotency keys 24 hours (the fake forgets them on
 * demand); the provider's webhook that asks for the refund again (Stripe retries for days, the
 * server down meanwhile) finds the refund made under the key (its metadata refund_key) among the
 * PaymentIntent's refunds and adopts it, never a second refund:
 * - excess: a renewal of 49.00 paid 4900 through a pay link opened before a credit note lowered it
 *   to 30.00: the 19.00 taken beyond it is refunded once (1900), not 1900 + 1900 = 3800;
 * - after the end: A (4900) completed after its invoice was voided is refunded once and recorded
 *   with that refund (4900), not recorded refused ("already refunded") while the money went back.
 */
import { randomBytes } from "node:crypto";
import test, { type ExecutionContext } from "ava";
import { STORES } from "../helpers/db.js";
import { type StripeFront, form, location303, stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import { answerJson, stripeProxy } from "../helpers/stripe-outage.js";
import { intentsOf, paymentState, refundsOf, succeededEvent, waitingRenewal } from "../helpers/stripe-waiting.js";
import type { Json } from "../helpers/subjects-api.js";

/**
 * A proxy in front of the fake Stripe: while `hideSessions`, no Checkout Session is listed; while
 * `refundAnswerLost`, every refund reaches Stripe and its answer is lost, and once one was, Stripe's
 * list of refunds is unreachable too (as for a server that died after the refund).
 */
interface RefundFront extends StripeFront {
  hideSessions: boolean;
  refundAnswerLost: boolean;
  lost: number;
}

async function refundFront(target: string): Promise<RefundFront> {
  const front: RefundFront = { url: "", hideSessions: false, refundAnswerLost: false, lost: 0, stop: async () => {} };
  const started = await stripeProxy(
    target,
    (req, res) => {
      const path = req.url?.split("?")[0];
      if (front.refundAnswerLost && path === "/v1/refunds" && (req.method === "POST" || front.lost > 0)) {
        if (req.method === "POST") return "answer-lost";
        req.socket.destroy();
        return "answered";
      }
      if (!front.hideSessions || req.method !== "GET" || path !== "/v1/checkout/sessions") return undefined;
      answerJson(res, 200, { object: "list", data: [], has_more: false, url: "/v1/checkout/sessions" });
      return "answered";
    },
    () => front.lost++,
  );
  front.url = started.url;
  front.stop = started.stop;
  return front;
}

const refundPosts = (ctx: { fake: { requests(): { operation: string; params: Json; idempotencyKey: string | null; replayed: boolean }[] } }, intent: string) =>
  ctx.fake.requests().filter((r) => r.operation === "POST /v1/refunds" && r.params.payment_intent === intent);

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: randomBytes(32).toString("base64") }, refundFront);

  /** A renewal of 4900 waiting on A, its pay link opened (and hidden from expiry), a new card declined (A cancelled), then a credit note of 1900: 3000 due. */
  async function payLinkThenCreditNote(t: ExecutionContext) {
    const { server, fake } = ctx;
    ctx.front.hideSessions = true;
    const { s, inv } = await waitingRenewal(t, ctx);
    const stripeUrl = await location303(await form(`${server.url}${new URL(String(inv.payment_url)).pathname}/pay`), "the hosted invoice page's form");
    await stripeDriver(server, fake).replaceCard(s, "insufficient_funds");
    const note = await s.raw("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due", amount: "1900" });
    t.is(note.status, 200, JSON.stringify(note.body));
    ctx.front.hideSessions = false;
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "open", amount_due: { value: "3000" } });
    return { s, inv, stripeUrl };
  }

  test.serial(`${store}: the refund of an excess whose answer was lost, asked again after Stripe forgot its key: 1900 refunded once, not 1900 + 1900 = 3800`, async (t) => {
    const { server, fake } = ctx;
    const { s, inv, stripeUrl } = await payLinkThenCreditNote(t);
    // The customer pays the session opened before, 4900; Stripe makes the refund of 4900 − 3000 = 1900, its answer lost every time.
    ctx.front.lost = 0;
    ctx.front.refundAnswerLost = true;
    try {
      await location303(await form(stripeUrl, { card: "pm_card_visa" }), "Stripe Checkout (payment)");
      await fake.settle();
    } finally {
      ctx.front.refundAnswerLost = false;
    }
    t.true(ctx.front.lost > 0);
    const b = intentsOf(fake, inv.id).find((pi) => pi.status === "succeeded") as Json;
    t.like(b, { amount_received: 4900 });
    const made = refundsOf(fake, b.id);
    t.deepEqual(
      made.map(([, amount]) => amount),
      [1900],
      "Stripe made it: 4900 − 3000 = 1900",
    );
    t.like(await paymentState(server.db.url, inv.id), { excess: { reference: b.id, amount: "1900" } }, "not recorded: still to refund");

    // Stripe delivers the payment again after it forgot the key (24 h; the server unreachable meanwhile).
    fake.forgetIdempotencyKeys();
    await fake.redeliver(String(succeededEvent(fake, b.id).id));
    await fake.settle();
    t.deepEqual(refundsOf(fake, b.id), made, "1900 refunded once, not 1900 + 1900 = 3800");
    const state = await paymentState(server.db.url, inv.id);
    t.falsy(state.excess);
    t.deepEqual(state.refundedExcess, [{ reference: b.id, refundId: made[0]?.[0], amount: "1900" }]);
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid", amount_due: { value: "3000" } });
    // Made under the excess's key and named by it; never sent again once found.
    t.like(fake.state.refunds.get(String(made[0]?.[0])), { metadata: { invoice_id: inv.id, refund_kind: "excess", refund_key: `${inv.id}:refund-excess:${b.id}` } });
    t.true(refundPosts(ctx, String(b.id)).every((r) => r.idempotencyKey === `${inv.id}:refund-excess:${b.id}`));
  });

  test.serial(`${store}: the refund of A completed after its invoice was voided, its answer lost, asked again after Stripe forgot its key: recorded with its 4900, not refused`, async (t) => {
    const { server, fake } = ctx;
    const { s, inv, a } = await waitingRenewal(t, ctx);
    // The customer authenticates A (4900); its webhook held until after the void.
    fake.webhookOptions({ outOfOrder: true });
    try {
      await fake.completeAuthentication(String(a.id));
    } finally {
      fake.webhookOptions({});
    }
    ctx.front.lost = 0;
    ctx.front.refundAnswerLost = true;
    try {
      t.like(await s.call("POST", `/invoices/${inv.id}/void`, {}), { status: "void" });
    } finally {
      ctx.front.refundAnswerLost = false;
    }
    const made = refundsOf(fake, String(a.id));
    t.deepEqual(
      made.map(([, amount]) => amount),
      [4900],
      "Stripe refunded all of A",
    );
    t.like(await paymentState(server.db.url, inv.id), { cancel: { reference: a.id } }, "not recorded: the cancel still pending");

    // A's payment_intent.succeeded comes after Stripe forgot the key (24 h).
    fake.forgetIdempotencyKeys();
    await fake.releaseHeld();
    await fake.settle();
    t.deepEqual(refundsOf(fake, String(a.id)), made, "one refund of 4900");
    const state = await paymentState(server.db.url, inv.id);
    t.deepEqual(state.refundedAfterEnd, [{ reference: a.id, refundId: made[0]?.[0], amount: "4900" }], "the refund Stripe made, not a refusal");
    t.like(state, { cancel: null, next: null });
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "void" });
  });
}
