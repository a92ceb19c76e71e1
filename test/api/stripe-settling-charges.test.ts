/**
 * DESIGN §16: a Stripe answer to a charge that is neither paid nor failed, through the real
 * server on a port against the fake Stripe, both stores, dunning set to one retry after 3 days,
 * then cancel and uncollectible (the other, below Stripe's minimum charge, carried to the next
 * invoice: stripe-below-minimum-carry.test.ts):
 * - a bank debit (SEPA, saved through Checkout's setup mode) that answers `processing`: no failed
 *   attempt, no pay link (invoice.payment_action_required), no second charge, no policy, until its
 *   webhook settles it: payment_intent.succeeded pays it; payment_intent.payment_failed is failed
 *   attempt 1, its retry planned 3 days later;
 * - that webhook lost (Stripe gives up after about 3 days; a SEPA debit takes up to 14): dunning
 *   looks the PaymentIntent up every 6 hours (payments/processing.ts) and resolves it as the
 *   webhook would, paid, or failed attempt 1 with its retry; the old code left it open for ever;
 * - an invoice voided while its debit is processing: Stripe refuses to cancel the debit, the
 *   cancel stays pending, and once the debit succeeded (its webhook lost) the sweep refunds it; the
 *   old code wrote no cancel for a processing payment, and the customer kept paying a void invoice.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { reasonOf } from "../helpers/clients.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { form, location303, RETURN_URL, stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import type { Scenario } from "../helpers/scenario.js";
import type { Json } from "../helpers/subjects-api.js";
import type { FakeStripe } from "../stripe/fake-stripe.js";
import { refundsOf } from "../helpers/stripe-waiting.js";
import { dbTime } from "../../src/db/raw.js";

const SECRETS_KEY = randomBytes(32).toString("base64");
const usd = (value: string) => ({ currency_code: "USD", value });
const intentsOf = (fake: FakeStripe, invoiceId: string) => fake.paymentIntents().filter((pi) => (pi.metadata as Json)?.invoice_id === invoiceId);
const eventsOf = async (s: Scenario, type: string, id: string) => ((await s.call("GET", `/events?types=${type}&limit=100`)).events as Json[]).filter((e) => e.data.id === id);

async function setDunning(s: Scenario): Promise<void> {
  const r = await s.call("PATCH", "/payment-settings", { retry_schedule_days: [3], set_retry_schedule: true, after_last_attempt: "cancel", mark_uncollectible: true });
  if (r.after_last_attempt !== "cancel") throw new Error(`PATCH /payment-settings: ${JSON.stringify(r)}`);
}

/** The payment state as stored. */
async function paymentState(url: string, invoiceId: string): Promise<Json> {
  const [row] = await withDatabase(url, (db) => db.dataSource.query("SELECT payment_state AS p FROM invoices WHERE id = ?", [invoiceId]));
  return JSON.parse(String(row?.p ?? "{}"));
}

/** The stored next_payment_attempt (ISO 8601), shown or not. */
async function storedNext(url: string, invoiceId: string): Promise<string | null> {
  const [row] = await withDatabase(url, (db) => db.dataSource.query("SELECT next_payment_attempt AS n FROM invoices WHERE id = ?", [invoiceId]));
  return row?.n
    ? new Date(
        `${String(row.n instanceof Date ? row.n.toISOString() : row.n)
          .replace(" ", "T")
          .replace(/Z?$/, "Z")}`,
      ).toISOString()
    : null;
}

/** The look-ups of PaymentIntent `id` Stripe received (GET /v1/payment_intents/{id}). */
const lookUps = (fake: FakeStripe, id: string) => fake.requests().filter((r) => r.operation === "GET /v1/payment_intents/{intent}" && r.path === `/v1/payment_intents/${id}`).length;

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY, SCHEDULER_INTERVAL_MS: "100" });

  /** A subject subscribed at 4,900 a month with a Visa, the dunning above set. */
  async function subscribed(): Promise<{ s: Scenario; sub: string }> {
    const { server, fake } = ctx;
    const d = stripeDriver(server, fake);
    const s = await d.start(server);
    await setDunning(s);
    const rateCard = await s.card({ fixed_rates: [{ code: "platform", name: "Platform", price: { price_type: "flat", amount: usd("4900") } }] });
    await d.subscribe(s, { rate_card_id: rateCard, fixed_rate_quantities: { platform: 1 } }, "visa");
    await fake.settle();
    const subs = (await s.call("GET", `/subscriptions?subject_id=${s.subjectId}`)) as Json;
    return { s, sub: (subs.subscriptions ?? subs.items ?? subs.data)[0].id };
  }

  /** The subject's card replaced in the portal by the SEPA debit of test IBAN `token` (on Stripe Checkout). */
  async function bankDebitInPortal(s: Scenario, token: string): Promise<void> {
    const { server, fake } = ctx;
    const r = await s.raw("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: RETURN_URL });
    const ours = new URL(`${r.body.url}/card`);
    const stripeUrl = await location303(await form(`${server.url}${ours.pathname}`), "the portal's card form");
    const back = new URL(await location303(await form(stripeUrl, { card: token }), "Stripe Checkout"));
    await fake.settle();
    const res = await fetch(`${server.url}${back.pathname}${back.search}`, { redirect: "manual" });
    await res.body?.cancel();
  }

  test.serial(`${store}: a SEPA debit that is processing is no failed attempt and no pay link: no second charge, no policy, paid by its payment_intent.succeeded`, async (t) => {
    t.timeout(120_000);
    const { fake } = ctx;
    const { s, sub } = await subscribed();
    await bankDebitInPortal(s, "pm_sepa_debit_succeeds");
    await s.advance("2026-02-15T00:00:00Z");
    await fake.settle();
    const inv = (await s.invoices()).at(-1) as Json;
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "open", attempt_count: 1, next_payment_attempt: null, payment_url: null });
    const [pi, ...more] = intentsOf(fake, inv.id);
    t.like(pi, { status: "processing", amount: 4900 });
    t.is(more.length, 0);
    t.deepEqual(await eventsOf(s, "invoice.payment_failed", inv.id), [], "no invoice.payment_failed");
    t.deepEqual(await eventsOf(s, "invoice.payment_action_required", inv.id), [], "no pay link");
    // The debit is for 4,900: lowering the amount due to 2,000 is refused (the debit would take 2,900 too much).
    const lowered = await s.raw("POST", "/credit-notes", { invoice_id: inv.id, reason: "order_change", outcome: "reduce_amount_due", amount: "2900" });
    t.deepEqual([lowered.status, reasonOf(lowered.body)], [400, "INVOICE_PAYMENT_PROCESSING"], JSON.stringify(lowered.body));

    // Past the schedule: no second charge, no policy.
    await s.advance("2026-02-20T00:00:00Z");
    await fake.settle();
    t.is(intentsOf(fake, inv.id).length, 1, "no second debit");
    t.is((await s.call("GET", `/subscriptions/${sub}`)).status, "active");

    // The debit settles: its webhook pays the invoice.
    await fake.settleDebit(String(pi?.id));
    await fake.settle();
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid", attempt_count: 1 });
    t.is((await eventsOf(s, "invoice.paid", inv.id)).length, 1);
  });

  test.serial(`${store}: a SEPA debit that bounces after processing is failed attempt 1 (its webhook), its retry planned 3 days later`, async (t) => {
    t.timeout(120_000);
    const { fake } = ctx;
    const { s, sub } = await subscribed();
    await bankDebitInPortal(s, "pm_sepa_debit_fails");
    await s.advance("2026-02-15T00:00:00Z");
    await fake.settle();
    const inv = (await s.invoices()).at(-1) as Json;
    const [pi] = intentsOf(fake, inv.id);
    t.like(pi, { status: "processing" });
    await fake.settleDebit(String(pi?.id));
    await fake.settle();
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "open", attempt_count: 1, next_payment_attempt: "2026-02-18T00:00:00Z", payment_url: null });
    t.deepEqual(
      (await eventsOf(s, "invoice.payment_failed", inv.id)).map((e) => e.data.attempt_count),
      [1],
    );
    t.is((await s.call("GET", `/subscriptions/${sub}`)).status, "active");
  });

  /** A renewal on Feb 15 whose SEPA debit (test IBAN `token`) is processing, and its PaymentIntent. */
  async function processing(token: string): Promise<{ s: Scenario; sub: string; inv: Json; pi: Json }> {
    const { fake } = ctx;
    const { s, sub } = await subscribed();
    await bankDebitInPortal(s, token);
    await s.advance("2026-02-15T00:00:00Z");
    await fake.settle();
    const inv = (await s.invoices()).at(-1) as Json;
    const [pi] = intentsOf(fake, inv.id);
    if (pi?.status !== "processing") throw new Error(`not processing: ${JSON.stringify(pi)}`);
    return { s, sub, inv, pi };
  }

  test.serial(`${store}: a processing debit whose webhook is lost is looked up every 6 hours: succeeded, the invoice paid`, async (t) => {
    t.timeout(120_000);
    const { server, fake } = ctx;
    const { s, inv, pi } = await processing("pm_sepa_debit_succeeds");
    // Its look-up planned 6 hours after the charge (Feb 15 00:00), not shown as a next attempt: no charge is planned.
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "open", attempt_count: 1, next_payment_attempt: null });
    t.is(await storedNext(server.db.url, inv.id), "2026-02-15T06:00:00.000Z");
    // Still processing at 06:00: looked up, nothing changed, the next look-up at 12:00.
    await s.advance("2026-02-15T07:00:00Z");
    t.is(lookUps(fake, pi.id), 1);
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "open", attempt_count: 1, next_payment_attempt: null });
    t.is(await storedNext(server.db.url, inv.id), "2026-02-15T12:00:00.000Z");
    fake.webhookOptions({ dropped: true });
    try {
      // The debit succeeds; Stripe's payment_intent.succeeded never arrives.
      await fake.settleDebit(pi.id);
      await fake.settle();
      t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "open" }, "no webhook came");
      // The next look-up (12:00) finds it succeeded: paid by that attempt, once.
      await s.advance("2026-02-15T14:00:00Z");
      await fake.settle();
    } finally {
      fake.webhookOptions({});
    }
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid", attempt_count: 1, next_payment_attempt: null });
    t.is((await eventsOf(s, "invoice.paid", inv.id)).length, 1);
    t.deepEqual(await eventsOf(s, "invoice.payment_failed", inv.id), []);
    t.like(await paymentState(server.db.url, inv.id), { reference: pi.id });
    t.falsy((await paymentState(server.db.url, inv.id)).processing);
    t.is(intentsOf(fake, inv.id).length, 1, "no second debit");
    t.is(await storedNext(server.db.url, inv.id), null, "no more look-ups");
  });

  test.serial(`${store}: a processing debit that bounces, its webhook lost, is failed attempt 1 by the look-up, its retry planned 3 days later`, async (t) => {
    t.timeout(120_000);
    const { fake } = ctx;
    const { s, sub, inv, pi } = await processing("pm_sepa_debit_fails");
    fake.webhookOptions({ dropped: true });
    try {
      await fake.settleDebit(pi.id);
      await fake.settle();
      t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "open", attempt_count: 1, next_payment_attempt: null }, "no webhook came");
      // The look-up at 06:00 finds it failed: attempt 1 failed then, the retry 3 days after (schedule [3]).
      await s.advance("2026-02-15T07:00:00Z");
      await fake.settle();
    } finally {
      fake.webhookOptions({});
    }
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "open", attempt_count: 1, next_payment_attempt: "2026-02-18T06:00:00Z", payment_url: null });
    t.deepEqual(
      (await eventsOf(s, "invoice.payment_failed", inv.id)).map((e) => [e.data.attempt_count, e.data.next_payment_attempt]),
      [[1, "2026-02-18T06:00:00Z"]],
    );
    t.is((await s.call("GET", `/subscriptions/${sub}`)).status, "active");
    t.is(intentsOf(fake, inv.id).length, 1, "no second debit before the retry");
  });

  test.serial(
    `${store}: an invoice voided while its debit is processing: the cancel Stripe refuses stays pending, and the debit that succeeds (its webhook lost) is refunded by the sweep`,
    async (t) => {
      t.timeout(120_000);
      const { server, fake } = ctx;
      const { s, inv, pi } = await processing("pm_sepa_debit_succeeds");
      t.like(await s.call("POST", `/invoices/${inv.id}/void`, {}), { status: "void", next_payment_attempt: null });
      // Stripe refuses to cancel a debit on its way: the cancel stays pending, for the sweep.
      t.is(fake.state.paymentIntents.get(pi.id)?.status, "processing");
      const pending = await paymentState(server.db.url, inv.id);
      t.like(pending, { cancel: { reference: pi.id, key: `${inv.id}:attempt-1:cancel` } });
      t.falsy(pending.processing);
      t.truthy(await storedNext(server.db.url, inv.id), "due for the sweep");
      fake.webhookOptions({ dropped: true });
      try {
        await fake.settleDebit(pi.id);
        await fake.settle();
        t.deepEqual(refundsOf(fake, pi.id), [], "no webhook came");
        // The cancel's retry comes due (as five minutes passing would make it): the sweep finds the debit succeeded and refunds it.
        await withDatabase(server.db.url, (db) => db.dataSource.query("UPDATE invoices SET next_payment_attempt = ? WHERE id = ?", [dbTime(new Date(Date.now() - 1000)), inv.id]));
        for (let i = 0; i < 100 && (await paymentState(server.db.url, inv.id)).cancel; i++) await new Promise((r) => setTimeout(r, 100));
      } finally {
        fake.webhookOptions({});
      }
      t.deepEqual(
        refundsOf(fake, pi.id).map(([, amount]) => amount),
        [4900],
        "the whole debit refunded, once",
      );
      const done = await paymentState(server.db.url, inv.id);
      t.like(done, { cancel: null });
      t.like(done.refundedAfterEnd, [{ reference: pi.id, amount: "4900" }]);
      t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "void" });
      t.deepEqual(await eventsOf(s, "invoice.paid", inv.id), []);
    },
  );
}
