/**
 * The payment golden flows (DESIGN §16), one table run on both providers — the built-in `test`
 * provider and Stripe through the official `stripe` library against the local Stripe-compatible
 * server (test/stripe/fake-stripe.ts) — on both stores, the real server on a port. What differs
 * between the providers (how a card is entered, how the customer completes a payment, where
 * charges and refunds are seen) is behind PaymentDriver (test/helpers/payment-flows.ts); the
 * expectations (statuses, amounts, events, counts of charges) are the same for both:
 *
 * - subscribe through the hosted checkout (setup), the first invoice charged, a renewal charged
 *   off-session by a clock advance;
 * - a declined renewal (insufficient funds) retried on the default schedule (3, 5 and 7 days after
 *   the first failure) by clock advances, then paid at once by a new card from the portal;
 * - the last attempt failed: the environment's policy (cancel, pause, leave_active) applied, the
 *   invoice uncollectible if so configured;
 * - authentication required: a failed attempt (its retry planned on the schedule), open with a pay
 *   link, invoice.payment_action_required, the customer pays from the hosted page: paid once;
 * - a refund through a credit note: refunded once (an Idempotency-Key replay answers the same note).
 *
 * The plan: platform 49.00 (1 unit) + seats 0.50 × 3 = 50.50 a month, USD (amounts in cents).
 */
import { randomBytes } from "node:crypto";
import test, { type ExecutionContext } from "ava";
import { STORES } from "../helpers/db.js";
import { type CardName, type PaymentDriver, stripeDriver, testDriver, useStripeServer } from "../helpers/payment-flows.js";
import type { Scenario } from "../helpers/scenario.js";
import type { TestServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const SECRETS_KEY = randomBytes(32).toString("base64");
const usd = (value: string) => ({ currency_code: "USD", value });
// 49.00 platform + 3 × 0.50 seats = 50.50
const MONTHLY = "5050";

const invoice = async (s: Scenario, id: string) => s.call("GET", `/invoices/${id}`);
const lastInvoice = async (s: Scenario) => invoice(s, ((await s.invoices()).at(-1) as Json).id);
const eventsOf = async (s: Scenario, type: string, id?: string) => ((await s.call("GET", `/events?types=${type}&limit=100`)).events as Json[]).filter((e) => id === undefined || e.data.id === id);

/** The subject subscribed to the plan through the hosted checkout with `card`. */
async function subscribed(d: PaymentDriver, server: TestServer, card: CardName = "visa"): Promise<{ s: Scenario; sub: Json }> {
  const s = await d.start(server);
  const rateCard = await s.card({
    fixed_rates: [
      { code: "platform", name: "Platform", price: { price_type: "flat", amount: usd("4900") } },
      { code: "seats", name: "Seats", price: { price_type: "flat", amount: usd("50") } },
    ],
  });
  await d.subscribe(s, { rate_card_id: rateCard, fixed_rate_quantities: { platform: 1, seats: 3 } }, card);
  await d.settle();
  const [sub] = await s.subscriptions();
  return { s, sub: sub as Json };
}

async function setDunning(s: Scenario, days: number[], afterLast: string, markUncollectible: boolean): Promise<void> {
  const r = await s.call("PATCH", "/payment-settings", { retry_schedule_days: days, set_retry_schedule: true, after_last_attempt: afterLast, mark_uncollectible: markUncollectible });
  if (r.after_last_attempt !== afterLast || r.mark_uncollectible !== markUncollectible) throw new Error(`PATCH /payment-settings: ${JSON.stringify(r)}`);
}

/** Advances the clock and waits for what the provider sends back. */
async function advance(d: PaymentDriver, s: Scenario, to: string): Promise<void> {
  await s.advance(to);
  await d.settle();
}

/** The invoice's successful charges: exactly `n`, each of `amount` where the provider shows it (Stripe's PaymentIntents). */
async function charged(t: ExecutionContext, d: PaymentDriver, s: Scenario, invoiceId: string, n: number, amount = MONTHLY): Promise<void> {
  const charges = await d.succeededCharges(s, invoiceId);
  t.is(charges.length, n, `${n} successful charge(s) of ${invoiceId}`);
  for (const c of charges) if (c.amount !== undefined) t.is(c.amount, amount);
}

const failures = async (s: Scenario, id: string) => (await eventsOf(s, "invoice.payment_failed", id)).map((e) => [e.data.attempt_count, e.data.next_payment_attempt, e.data.status]);

type Flow = { name: string; run: (t: ExecutionContext, d: PaymentDriver, server: TestServer) => Promise<void> };

const FLOWS: Flow[] = [
  {
    name: "subscribe through the hosted checkout (setup): the first invoice and a renewal charged off-session",
    async run(t, d, server) {
      const { s, sub } = await subscribed(d, server);
      t.is(sub.status, "active");
      t.is((await eventsOf(s, "checkout.completed")).length, 1, "one completion");
      const [first] = await s.invoices();
      // 49.00 platform + 3 × 0.50 seats = 50.50, charged at once
      t.like(await invoice(s, first?.id), { status: "paid", total_amount: usd(MONTHLY), amount_due: usd(MONTHLY), attempt_count: 1, next_payment_attempt: null });
      await charged(t, d, s, first?.id, 1);
      if (d.chargeKeys) t.deepEqual(d.chargeKeys(first?.id), [`${first?.id}:attempt-1`], "off-session, keyed by invoice and attempt");
      t.is((await eventsOf(s, "invoice.paid", first?.id)).length, 1);
      await advance(d, s, "2026-02-15T00:00:00Z");
      const renewal = await lastInvoice(s);
      t.not(renewal.id, first?.id);
      // the same 50.50 a month on, off-session
      t.like(renewal, { status: "paid", total_amount: usd(MONTHLY), attempt_count: 1, next_payment_attempt: null, payment_url: null });
      await charged(t, d, s, renewal.id, 1);
      if (d.chargeKeys) t.deepEqual(d.chargeKeys(renewal.id), [`${renewal.id}:attempt-1`]);
      t.is((await eventsOf(s, "invoice.paid", renewal.id)).length, 1);
      t.is((await s.invoices()).length, 2);
    },
  },
  {
    name: "a declined renewal retried on the default schedule by clock advances, then paid at once by a new card",
    async run(t, d, server) {
      const { s } = await subscribed(d, server);
      await d.replaceCard(s, "insufficient_funds");
      await advance(d, s, "2026-02-15T00:00:00Z");
      const inv = await lastInvoice(s);
      // first failure Feb 15; retries 3, 5 and 7 days after it: Feb 18, Feb 20, Feb 22
      t.like(inv, { status: "open", total_amount: usd(MONTHLY), amount_due: usd(MONTHLY), attempt_count: 1, next_payment_attempt: "2026-02-18T00:00:00Z", payment_url: null });
      t.deepEqual(await failures(s, inv.id), [[1, "2026-02-18T00:00:00Z", "open"]]);
      await advance(d, s, "2026-02-17T23:59:59Z");
      t.is((await invoice(s, inv.id)).attempt_count, 1, "not due yet");
      await advance(d, s, "2026-02-18T00:00:00Z");
      t.like(await invoice(s, inv.id), { status: "open", attempt_count: 2, next_payment_attempt: "2026-02-20T00:00:00Z" });
      await advance(d, s, "2026-02-20T00:00:00Z");
      t.like(await invoice(s, inv.id), { status: "open", attempt_count: 3, next_payment_attempt: "2026-02-22T00:00:00Z" });
      t.deepEqual(await failures(s, inv.id), [
        [1, "2026-02-18T00:00:00Z", "open"],
        [2, "2026-02-20T00:00:00Z", "open"],
        [3, "2026-02-22T00:00:00Z", "open"],
      ]);
      await charged(t, d, s, inv.id, 0);
      // A new card from the portal: the open invoice retried at once (attempt 4), paid 50.50.
      await d.replaceCard(s, "mastercard");
      t.like(await invoice(s, inv.id), { status: "paid", attempt_count: 4, next_payment_attempt: null, amount_due: usd(MONTHLY) });
      await charged(t, d, s, inv.id, 1);
      // One charge per attempt, each under its own key (Stripe shows them; the test provider's are in memory).
      if (d.chargeKeys)
        t.deepEqual(
          d.chargeKeys(inv.id),
          [1, 2, 3, 4].map((n) => `${inv.id}:attempt-${n}`),
        );
      t.deepEqual(
        (await eventsOf(s, "invoice.paid", inv.id)).map((e) => [e.data.status, e.data.attempt_count]),
        [["paid", 4]],
      );
      // The planned Feb 22 retry charges nothing more.
      await advance(d, s, "2026-02-23T00:00:00Z");
      t.like(await invoice(s, inv.id), { status: "paid", attempt_count: 4 });
      await charged(t, d, s, inv.id, 1);
      t.is((await failures(s, inv.id)).length, 3);
    },
  },
  ...(
    [
      ["cancel", true, "cancelled", "subscription.cancelled"],
      ["pause", false, "paused", "subscription.paused"],
      ["leave_active", true, "active", null],
    ] as const
  ).map(
    ([policy, uncollectible, subscriptionStatus, event]): Flow => ({
      name: `the last attempt fails: ${policy}, the invoice ${uncollectible ? "uncollectible" : "left open"}`,
      async run(t, d, server) {
        const { s, sub } = await subscribed(d, server);
        await setDunning(s, [1, 2], policy, uncollectible);
        await d.replaceCard(s, "attach_then_fail");
        await advance(d, s, "2026-02-15T00:00:00Z");
        const inv = await lastInvoice(s);
        // retries 1 and 2 days after the first failure: Feb 16, Feb 17
        t.like(inv, { status: "open", attempt_count: 1, next_payment_attempt: "2026-02-16T00:00:00Z" });
        await advance(d, s, "2026-02-20T00:00:00Z");
        t.like(await invoice(s, inv.id), { status: uncollectible ? "uncollectible" : "open", attempt_count: 3, next_payment_attempt: null, amount_due: usd(MONTHLY) });
        t.deepEqual(await failures(s, inv.id), [
          [1, "2026-02-16T00:00:00Z", "open"],
          [2, "2026-02-17T00:00:00Z", "open"],
          [3, null, uncollectible ? "uncollectible" : "open"],
        ]);
        if (d.chargeKeys)
          t.deepEqual(
            d.chargeKeys(inv.id),
            [1, 2, 3].map((n) => `${inv.id}:attempt-${n}`),
          );
        t.is((await s.call("GET", `/subscriptions/${sub.id}`)).status, subscriptionStatus);
        if (event) t.is((await eventsOf(s, event, sub.id)).length, 1);
        // Marked uncollectible: announced once, after the failure that caused it.
        const marked = await eventsOf(s, "invoice.marked_uncollectible", inv.id);
        t.deepEqual(
          marked.map((e) => [e.data.status, e.data.attempt_count, e.data.next_payment_attempt]),
          uncollectible ? [["uncollectible", 3, null]] : [],
        );
        const order = ((await s.call("GET", "/events?limit=100")).events as Json[])
          .filter((e) => e.data.id === inv.id && ["invoice.payment_failed", "invoice.marked_uncollectible"].includes(e.type))
          .map((e) => e.type);
        t.deepEqual(order, ["invoice.payment_failed", "invoice.payment_failed", "invoice.payment_failed", ...(uncollectible ? ["invoice.marked_uncollectible"] : [])]);
        await charged(t, d, s, inv.id, 0);
        await advance(d, s, "2026-02-25T00:00:00Z");
        t.is((await invoice(s, inv.id)).attempt_count, 3, "exhausted: not retried");
      },
    }),
  ),
  {
    name: "authentication required: a failed attempt, open with a pay link and invoice.payment_action_required; paid from the hosted page",
    async run(t, d, server) {
      const { s } = await subscribed(d, server);
      await d.replaceCard(s, "authentication");
      await advance(d, s, "2026-02-15T00:00:00Z");
      const inv = await lastInvoice(s);
      t.like(inv, { status: "open", amount_due: usd(MONTHLY), attempt_count: 1, next_payment_attempt: "2026-02-18T00:00:00Z", payment_url: `${inv.hosted_url}#pay` });
      const waiting = await eventsOf(s, "invoice.payment_action_required", inv.id);
      t.deepEqual(
        waiting.map((e) => e.data.payment_url),
        [`${inv.hosted_url}#pay`],
      );
      t.deepEqual(await failures(s, inv.id), [[1, "2026-02-18T00:00:00Z", "open"]], "a failed attempt, the next on the schedule");
      // Short of the retry: the customer's to complete.
      await advance(d, s, "2026-02-17T00:00:00Z");
      t.like(await invoice(s, inv.id), { status: "open", attempt_count: 1 });
      await charged(t, d, s, inv.id, 0);
      await d.completePayment(s, inv.hosted_url, "mastercard");
      t.like(await invoice(s, inv.id), { status: "paid", attempt_count: 1, payment_url: null, amount_due: usd(MONTHLY) });
      t.is((await eventsOf(s, "invoice.paid", inv.id)).length, 1);
      await charged(t, d, s, inv.id, 1);
      t.is((await eventsOf(s, "invoice.payment_action_required", inv.id)).length, 1);
      // Paid: its planned retry charges nothing.
      await advance(d, s, "2026-02-25T00:00:00Z");
      t.like(await invoice(s, inv.id), { status: "paid", attempt_count: 1, next_payment_attempt: null });
      await charged(t, d, s, inv.id, 1);
    },
  },
  {
    name: "a refund through a credit note: refunded once",
    async run(t, d, server) {
      const { s } = await subscribed(d, server);
      const [inv] = await s.invoices();
      const send = () =>
        fetch(`${server.url}/credit-notes`, {
          method: "POST",
          headers: { "x-api-key": s.key, "content-type": "application/json", "idempotency-key": `refund-${inv?.id}` },
          body: JSON.stringify({ invoice_id: inv?.id, reason: "other", outcome: "refund", amount: "1000" }),
        });
      const first = await send();
      const again = await send();
      t.is(first.status, 200);
      t.is(again.headers.get("idempotent-replayed"), "true");
      const note = await first.json();
      t.deepEqual(await again.json(), note, "the replay answers the same note");
      t.like(note, { outcome: "refund", total: usd("1000") });
      t.truthy(note.refund_id);
      await d.settle();
      t.deepEqual(await d.refunds(s, inv?.id, [note.refund_id]), [[note.refund_id, "1000"]], "one refund of 10.00");
      // 50.50 charged − 10.00 refunded = 40.50 left, refunded in full (it could not be after a second 10.00 refund and stays 40.50)
      const rest = await s.call("POST", "/credit-notes", { invoice_id: inv?.id, reason: "other", outcome: "refund" });
      t.like(rest, { total: usd("4050") });
      await d.settle();
      t.deepEqual((await d.refunds(s, inv?.id, [note.refund_id, rest.refund_id])).map(([, amount]) => amount).sort(), ["1000", "4050"]);
      const after = await invoice(s, inv?.id);
      // 10.00 + 40.50 = 50.50 credited
      t.is(after.amount_credited.value, MONTHLY);
      await charged(t, d, s, inv?.id, 1);
    },
  },
];

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY });
  for (const provider of ["test", "stripe"] as const) {
    for (const flow of FLOWS) {
      // Serial: the fake Stripe sends its webhooks to one URL at a time (the environment's of the running flow).
      test.serial(`${store}, ${provider}: ${flow.name}`, async (t) => {
        const { server, fake } = ctx;
        const d = provider === "test" ? testDriver(server) : stripeDriver(server, fake);
        await flow.run(t, d, server);
      });
    }
  }
}
