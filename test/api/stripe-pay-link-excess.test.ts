/**
 * A pay link paid for more than the invoice's amount due (DESIGN §16), both stores, the real server
 * on a port, the official `stripe` library against the local Stripe-compatible server
 * (test/stripe/fake-stripe.ts). A renewal of 49.00 USD waits for the customer's authentication; the
 * customer opens the hosted page's pay link (a Checkout Session for 4900), then saves a new card in
 * the portal (the waiting PaymentIntent cancelled, the new card declined); the operator credits
 * 19.00 with a reduce_amount_due credit note (30.00 due: 4900 − 1900 = 3000); the customer then
 * pays the session they opened before, 4900. The invoice is paid, once, and the 19.00 it took
 * beyond its amount due is refunded, once (4900 − 3000 = 1900), recorded on the invoice, and not
 * again when Stripe delivers the payment's events again.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { STORES } from "../helpers/db.js";
import { form, location303, stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import { intentsOf, paymentState, refundsOf, succeededEvent, waitingRenewal } from "../helpers/stripe-waiting.js";
import type { Json } from "../helpers/subjects-api.js";

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: randomBytes(32).toString("base64") });

  test.serial(`${store}: a pay link opened before a credit note lowered the amount due is paid in full: the invoice paid once, the difference (4900 − 3000 = 1900) refunded once`, async (t) => {
    const { server, fake } = ctx;
    const { s, inv, a } = await waitingRenewal(t, ctx);
    const hosted = new URL(String(inv.payment_url)).pathname;
    const stripeUrl = await location303(await form(`${server.url}${hosted}/pay`), "the hosted invoice page's form");
    t.like(fake.state.session(stripeUrl.split("/").pop() as string), { mode: "payment", amount_total: 4900 });

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

    // The customer pays the session opened before: 4900.
    await location303(await form(stripeUrl, { card: "pm_card_visa" }), "Stripe Checkout (payment)");
    await fake.settle();
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid", amount_due: { value: "3000" } });
    const paid = ((await s.call("GET", "/events?types=invoice.paid&limit=100")).events as Json[]).filter((e) => e.data.id === inv.id);
    t.is(paid.length, 1, "paid once");
    const b = intentsOf(fake, inv.id).find((pi) => pi.status === "succeeded") as Json;
    t.like(b, { status: "succeeded", amount_received: 4900 });
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
    t.is(fake.requests().find((r) => r.operation === "POST /v1/refunds")?.idempotencyKey, `${inv.id}:refund-excess:${b.id}`);

    // Stripe delivers the payment again: nothing more refunded, still paid once.
    await fake.redeliver(String(succeededEvent(fake, b.id).id));
    await fake.settle();
    t.is(refundsOf(fake, b.id).length, 1);
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid" });
  });
}
