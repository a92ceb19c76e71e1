/**
 * A pay link opened before the invoice's amount due changed (DESIGN §16), both stores, the real
 * server on a port, the official `stripe` library against the local Stripe-compatible server
 * (test/stripe/fake-stripe.ts). A renewal of 49.00 USD waits for the customer's authentication
 * (PaymentIntent A); the customer opens the hosted page's pay link (a Checkout Session for 4900),
 * then saves a new card in the portal: A is cancelled, the new card declined; the operator credits
 * 19.00 with a reduce_amount_due credit note (4900 − 1900 = 3000 due).
 *
 * - The session is expired with A's cancel (key `<A's cancel key>:expire:<session>`): the customer
 *   can no longer pay 4900 there; the invoice stays open for 3000, nothing taken.
 * - A session that expiry missed (here Stripe's list of open sessions answers without it) and
 *   the customer pays, 4900: the invoice is paid, once, and the 19.00 taken beyond its amount due
 *   is refunded, once (4900 − 3000 = 1900), recorded on the invoice, not again when Stripe delivers
 *   the payment's events again.
 * - That refund made `pending` by Stripe and failed later (a closed card): it names its invoice
 *   (metadata refund_kind excess), is recorded failed on the invoice, and `invoice.refund_failed`
 *   is sent once (kind excess, 1900 = 19.00, the reason): the 19.00 did not go back.
 */
import { randomBytes } from "node:crypto";
import test, { type ExecutionContext } from "ava";
import { STORES } from "../helpers/db.js";
import { type StripeFront, form, location303, stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import { answerJson, stripeProxy } from "../helpers/stripe-outage.js";
import { intentsOf, paymentState, refundsOf, succeededEvent, waitingRenewal } from "../helpers/stripe-waiting.js";
import type { Json } from "../helpers/subjects-api.js";

/** A proxy in front of the fake Stripe: while `hideSessions`, Stripe's list of Checkout Sessions answers none. */
interface SessionsFront extends StripeFront {
  hideSessions: boolean;
}

async function sessionsFront(target: string): Promise<SessionsFront> {
  const front: SessionsFront = { url: "", hideSessions: false, stop: async () => {} };
  const started = await stripeProxy(target, (req, res) => {
    if (!front.hideSessions || req.method !== "GET" || req.url?.split("?")[0] !== "/v1/checkout/sessions") return undefined;
    answerJson(res, 200, { object: "list", data: [], has_more: false, url: "/v1/checkout/sessions" });
    return "answered";
  });
  front.url = started.url;
  front.stop = started.stop;
  return front;
}

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: randomBytes(32).toString("base64") }, sessionsFront);

  /** The renewal waiting on A, its pay link opened (the Checkout Session's URL), then a new card in the portal (declined: A cancelled) and a credit note of 1900. */
  async function payLinkThenCreditNote(t: ExecutionContext) {
    const { server, fake } = ctx;
    const { s, inv, a } = await waitingRenewal(t, ctx);
    const hosted = new URL(String(inv.payment_url)).pathname;
    const stripeUrl = await location303(await form(`${server.url}${hosted}/pay`), "the hosted invoice page's form");
    const sessionId = stripeUrl.split("/").pop() as string;
    t.like(fake.state.session(sessionId), { mode: "payment", amount_total: 4900, status: "open" });

    // A new card saved in the portal: the waiting PaymentIntent cancelled, the new card's charge declined.
    await stripeDriver(server, fake).replaceCard(s, "insufficient_funds");
    t.like(
      intentsOf(fake, inv.id).find((pi) => pi.id === a.id),
      { status: "canceled" },
    );
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "open", payment_url: null });

    const note = await s.raw("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due", amount: "1900" });
    t.is(note.status, 200, JSON.stringify(note.body));
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "open", amount_due: { value: "3000" } });
    return { s, inv, a, stripeUrl, sessionId };
  }

  test.serial(`${store}: the pay link is expired with the cancel of the payment it was made beside: paying it later takes nothing, the invoice stays open for 3000`, async (t) => {
    const { fake } = ctx;
    ctx.front.hideSessions = false;
    const { s, inv, stripeUrl, sessionId } = await payLinkThenCreditNote(t);
    t.like(fake.state.session(sessionId), { status: "expired" });
    const expires = fake.requests().filter((r) => r.path === `/v1/checkout/sessions/${sessionId}/expire`);
    t.deepEqual(
      expires.map((r) => [r.idempotencyKey, r.status]),
      [[`${inv.id}:attempt-1:cancel:expire:${sessionId}`, 200]],
    );

    const paid = await form(stripeUrl, { card: "pm_card_visa" });
    await paid.body?.cancel();
    t.not(paid.status, 303, "Stripe's page takes no payment on an expired session");
    await fake.settle();
    t.is(intentsOf(fake, inv.id).filter((pi) => pi.status === "succeeded").length, 0);
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "open", amount_due: { value: "3000" } });
  });

  test.serial(
    `${store}: a pay link the expiry missed, paid in full after a credit note lowered the amount due: the invoice paid once, the difference (4900 − 3000 = 1900) refunded once`,
    async (t) => {
      const { server, fake } = ctx;
      ctx.front.hideSessions = true;
      const { s, inv, stripeUrl } = await payLinkThenCreditNote(t);
      ctx.front.hideSessions = false;

      // The customer pays the session opened before: 4900.
      await location303(await form(stripeUrl, { card: "pm_card_visa" }), "Stripe Checkout (payment)");
      await fake.settle();
      t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid", amount_due: { value: "3000" } });
      const paid = ((await s.call("GET", "/events?types=invoice.paid&limit=100")).events as Json[]).filter((e) => e.data.id === inv.id);
      t.is(paid.length, 1, "paid once");
      const b = intentsOf(fake, inv.id).find((pi) => pi.status === "succeeded") as Json;
      t.like(b, { amount_received: 4900 });
      const refunds = refundsOf(fake, b.id);
      t.deepEqual(
        refunds.map(([, amount]) => amount),
        [1900],
        "4900 taken − 3000 due = 1900 refunded",
      );
      const state = await paymentState(server.db.url, inv.id);
      t.is(state.reference, b.id);
      t.deepEqual(state.refundedExcess, [{ reference: b.id, refundId: refunds[0]?.[0], amount: "1900" }]);
      t.falsy(state.excess);
      t.is(fake.requests().find((r) => r.operation === "POST /v1/refunds" && r.params.payment_intent === b.id)?.idempotencyKey, `${inv.id}:refund-excess:${b.id}`);

      // Stripe delivers the payment again: nothing more refunded, still paid once.
      await fake.redeliver(String(succeededEvent(fake, b.id).id));
      await fake.settle();
      t.is(refundsOf(fake, b.id).length, 1);
      t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid" });
    },
  );

  test.serial(`${store}: the refund of the difference (1900) that Stripe fails later is recorded failed and announced once (invoice.refund_failed, kind excess)`, async (t) => {
    const { server, fake } = ctx;
    ctx.front.hideSessions = true;
    const { s, inv, stripeUrl } = await payLinkThenCreditNote(t);
    ctx.front.hideSessions = false;
    fake.state.refundStatus = "pending";
    await location303(await form(stripeUrl, { card: "pm_card_visa" }), "Stripe Checkout (payment)");
    await fake.settle();
    const b = intentsOf(fake, inv.id).find((pi) => pi.status === "succeeded") as Json;
    const [[refundId, amount] = []] = refundsOf(fake, b.id);
    t.is(amount, 1900, "4900 taken − 3000 due = 1900 refunded");
    t.like(fake.state.refunds.get(String(refundId)), { status: "pending", metadata: { invoice_id: inv.id, refund_kind: "excess" } });
    await fake.settleRefund(String(refundId), "failed", "expired_or_canceled_card");
    await fake.settle();
    const state = await paymentState(server.db.url, inv.id);
    t.deepEqual(state.refundedExcess, [{ reference: b.id, refundId, amount: "1900", failed: "expired_or_canceled_card" }]);
    const events = ((await s.call("GET", "/events?types=invoice.refund_failed&limit=100")).events as Json[]).filter((e) => e.data.invoice_id === inv.id);
    t.is(events.length, 1);
    t.like(events[0]?.data, { kind: "excess", payment_reference: b.id, refund_id: refundId, amount: { currency_code: "USD", value: "1900" }, failure_reason: "expired_or_canceled_card" });
  });
}
