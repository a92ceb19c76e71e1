/**
 * DESIGN §16: the refund of an invoice's payment (excess, after_end) looks for one made under its
 * key among the PaymentIntent's refunds before it is asked (providers/stripe/refunds.ts), against
 * the fake Stripe on a port. The lookup reads every page (Stripe pages refunds), and a lookup
 * Stripe refuses (an unknown PaymentIntent) is answered as Stripe answers the refund, refused, not
 * thrown: thrown, the webhook and the sweep asked it again forever and nobody was told.
 */
import test, { type ExecutionContext } from "ava";
import Stripe from "stripe";
import { refundIntent } from "../../src/providers/stripe/refunds.js";
import { type FakeStripe, startFakeStripe } from "../stripe/fake-stripe.js";

const ENV = "env_1";

async function startFake(t: ExecutionContext): Promise<{ fake: FakeStripe; stripe: Stripe }> {
  const fake = await startFakeStripe();
  t.teardown(() => fake.stop());
  return { fake, stripe: new Stripe("sk_test_fake123", { host: fake.host, port: fake.port, protocol: "http", maxNetworkRetries: 0 }) };
}

async function paid(fake: FakeStripe, stripe: Stripe, amount: number): Promise<string> {
  const customer = (await stripe.customers.create({ email: "ada@example.com" })).id;
  const session = await stripe.checkout.sessions.create({ mode: "setup", customer, currency: "usd", success_url: "http://127.0.0.1:1/d", cancel_url: "http://127.0.0.1:1/c" });
  await fake.completeCheckout(session.id, "4242424242424242");
  const pm = (await stripe.customers.listPaymentMethods(customer, { type: "card" })).data[0] as Stripe.PaymentMethod;
  return (await stripe.paymentIntents.create({ amount, currency: "usd", customer, payment_method: pm.id, off_session: true, confirm: true })).id;
}

test("an excess refund asked again after 105 later refunds of its payment (two pages) and Stripe forgot its key: the one made, refunded once", async (t) => {
  const { fake, stripe } = await startFake(t);
  const pi = await paid(fake, stripe, 100_000);
  const ctx = { reference: pi, invoiceRefund: { invoiceId: "inv_1", kind: "excess" as const } };
  const key = `inv_1:refund-excess:${pi}`;
  const first = await refundIntent(stripe, ENV, pi, 1900, "USD", key, ctx);
  t.true(first.ok);
  for (let k = 0; k < 105; k++) await stripe.refunds.create({ payment_intent: pi, amount: 10, metadata: { credit_note_id: `cn_${k}`, environment_id: ENV } });
  fake.forgetIdempotencyKeys();
  t.like(await refundIntent(stripe, ENV, pi, 1900, "USD", key, ctx), { ok: true, refundId: (first as { refundId: string }).refundId });
  const excess = (await stripe.refunds.list({ payment_intent: pi, limit: 100 }).autoPagingToArray({ limit: 1000 })).filter((r) => r.metadata?.refund_kind === "excess");
  t.deepEqual(
    excess.map((r) => r.amount),
    [1900],
  );
});

test("a refund of a PaymentIntent Stripe does not know: answered refused with Stripe's message, not thrown (was: thrown, asked again forever)", async (t) => {
  const { stripe } = await startFake(t);
  const out = await refundIntent(stripe, ENV, "pi_nope", 1900, "USD", "inv_1:refund-excess:pi_nope", { reference: "pi_nope", invoiceRefund: { invoiceId: "inv_1", kind: "excess" } });
  t.false(out.ok);
  t.regex((out as { message: string }).message, /pi_nope/);
});
