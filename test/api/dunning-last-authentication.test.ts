/**
 * DESIGN §16: the last dunning attempt of a renewal whose charge needs the customer's
 * authentication, under a policy that cancels (or pauses) the subscription and marks the invoice
 * uncollectible: the invoice ends uncollectible and the payment left waiting for the customer is
 * cancelled at the provider, as any invoice that ends while a payment waits (payments/cancels.ts),
 * so that authenticating it later charges nothing (never a charge then its refund). Through the
 * real server on both stores: against the fake Stripe (its PaymentIntent cancelled once, with the
 * last attempt's key; completing the authentication refused, nothing refunded), and on the test
 * provider (the payment recorded cancelled; the hosted page's pay form charges nothing).
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { STORES } from "../helpers/db.js";
import { stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import { cancelsOf, intentsOf, paymentState, refundsOf } from "../helpers/stripe-waiting.js";
import type { Json } from "../helpers/subjects-api.js";

const SECRETS_KEY = randomBytes(32).toString("base64");
const AT = "2026-01-15T00:00:00Z";
const CARD_AUTH = "4000 0025 0000 3155";
const usd = (value: string) => ({ currency_code: "USD", value });
const RATES = { fixed_rates: [{ code: "platform", name: "Platform", price: { price_type: "flat", amount: usd("4900") } }] };

/** One retry a day after the first failure; after it, `afterLast` and the invoice uncollectible. */
async function setDunning(s: Scenario, afterLast: "cancel" | "pause"): Promise<void> {
  await s.call("PATCH", "/payment-settings", { retry_schedule_days: [1], set_retry_schedule: true, after_last_attempt: afterLast, mark_uncollectible: true });
}

const renewalOf = async (s: Scenario) => (await s.invoices()).find((i) => i.period_start === "2026-02-15T00:00:00Z") as Json;

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY });
  const server = useServer(store);

  for (const afterLast of ["cancel", "pause"] as const)
    test.serial(`${store}: Stripe, the last attempt waits for authentication (${afterLast}, uncollectible): its PaymentIntent cancelled, authenticating later charges nothing`, async (t) => {
      const { fake } = ctx;
      const d = stripeDriver(ctx.server, fake);
      const s = await d.start(ctx.server);
      await setDunning(s, afterLast);
      await d.subscribe(s, { rate_card_id: await s.card(RATES), fixed_rate_quantities: { platform: 1 } }, "visa");
      await d.replaceCard(s, "authentication");
      await s.advance("2026-02-15T00:00:00Z");
      await fake.settle();
      const inv = await renewalOf(s);
      t.like(inv, { status: "open", attempt_count: "1", next_payment_attempt: "2026-02-16T00:00:00Z" });
      // The last attempt (day 1): the first PaymentIntent cancelled before it, the second waits too.
      await s.advance("2026-02-16T00:00:00Z");
      await fake.settle();
      t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "uncollectible", attempt_count: 2, next_payment_attempt: null, payment_url: null });
      const intents = intentsOf(fake, inv.id);
      t.is(intents.length, 2);
      const last = intents[1] as Json;
      t.is(last.idempotency_key, `${inv.id}:attempt-2`);
      t.deepEqual(cancelsOf(fake, last.id), [[`${inv.id}:attempt-2:cancel`, 200]], "the last attempt's PaymentIntent cancelled once");
      t.is(fake.state.paymentIntents.get(last.id)?.status, "canceled");
      t.like(await paymentState(ctx.server.db.url, inv.id), { cancel: null, cancelled: last.id, actionRequired: false, next: null });
      // The customer comes back: Stripe refuses the authentication, nothing is charged nor refunded.
      await t.throwsAsync(() => fake.completeAuthentication(last.id), { message: /it awaits no authentication/ });
      await fake.settle();
      t.deepEqual(
        intentsOf(fake, inv.id).filter((pi) => pi.status === "succeeded"),
        [],
      );
      t.deepEqual(refundsOf(fake, last.id), []);
      t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "uncollectible" });
    });

  test.serial(`${store}: test provider, the last attempt waits for authentication (cancel, uncollectible): the payment cancelled, the pay form charges nothing`, async (t) => {
    const s = await Scenario.start(server, AT);
    await setDunning(s, "cancel");
    const { subscription } = await s.subscribe({ rate_card_id: await s.card(RATES), fixed_rate_quantities: { platform: 1 }, create_checkout_session: "always" }, CARD_OK);
    await s.saveCardInPortal(CARD_AUTH);
    await s.advance("2026-02-15T00:00:00Z");
    const inv = await renewalOf(s);
    t.like(inv, { status: "open", attempt_count: "1" });
    await s.advance("2026-02-16T00:00:00Z");
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "uncollectible", attempt_count: 2, next_payment_attempt: null, payment_url: null });
    t.is((await s.call("GET", `/subscriptions/${subscription.id}`)).status, "cancelled");
    const state = await paymentState(server.db.url, inv.id);
    t.like(state, { cancel: null, actionRequired: false, next: null });
    t.truthy(state.reference);
    t.is(state.cancelled, state.reference, "the last attempt's waiting payment cancelled at the provider");
    // The hosted page's pay form (the customer authenticating): nothing charged, the invoice as it was.
    const res = await fetch(`${server.url}${new URL(inv.hosted_url).pathname}/pay`, { method: "POST", redirect: "manual", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "" });
    await res.body?.cancel();
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "uncollectible", attempt_count: 2 });
    t.is(((await s.call("GET", "/events?types=invoice.paid&limit=100")).events as Json[]).filter((e) => e.data.id === inv.id).length, 0, "never paid");
  });
}
