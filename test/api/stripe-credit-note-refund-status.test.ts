/**
 * DESIGN §15, §16: a refund note keeps where Stripe's refund stands (refund_status), so a refund
 * that fails days later is not read as money gone back (credit-notes/refund-status.ts). Through
 * the real server on a port against the fake Stripe, its webhooks signed, both stores:
 * - Stripe makes the refund `pending`: the note reads refund_status "pending"; a signed
 *   refund.updated with status failed (and refund.failed) makes it "failed" with Stripe's
 *   failure_reason and emits credit_note.refund_failed once, however often Stripe delivers it; an
 *   older refund.updated still pending, delivered after, changes nothing; the note stays issued;
 * - Stripe makes it `succeeded` at once: the note reads "succeeded"; the refund's events sent to
 *   another environment's webhook URL change nothing; one failing later (Stripe may fail a refund
 *   it reported succeeded) makes it "failed", announced once;
 * - a refund's events that come before its note is written (the refund is made inside the note's
 *   transaction; here: the note's first try refused, then Stripe makes that very refund, as when
 *   the note's transaction rolled back after Stripe made it) are answered 409 and not recorded; once
 *   the note is there (asked again: the same ID, the same refund), Stripe's redeliveries make it
 *   "failed", announced once.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { STORES } from "../helpers/db.js";
import { STRIPE_WEBHOOK_SECRET, useStripeServer } from "../helpers/payment-flows.js";
import { renewal } from "../helpers/stripe-waiting.js";
import type { Scenario } from "../helpers/scenario.js";
import type { Json } from "../helpers/subjects-api.js";
import Stripe from "stripe";
import type { FakeStripe } from "../stripe/fake-stripe.js";
import { invalid } from "../stripe/objects.js";

const SECRETS_KEY = randomBytes(32).toString("base64");

/** The credit_note.refund_failed events of the scenario's environment about note `id`. */
async function refundFailedEvents(s: Scenario, id: string): Promise<Json[]> {
  const events = (await s.call("GET", "/events?types=credit_note.refund_failed&limit=100")).events as Json[];
  return events.filter((e) => e.data.id === id);
}

/** Stripe's events of refund `id` of `type`. */
const refundEvents = (fake: FakeStripe, id: string, type: string) => fake.events().filter((e) => e.type === type && (e.data as Json).object.id === id);

/** The statuses our webhook answered for Stripe's event `eventId`. */
const answers = (fake: FakeStripe, eventId: string) =>
  fake
    .deliveries()
    .filter((d) => d.eventId === eventId)
    .map((d) => d.status);

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY });

  test.serial(`${store}: a pending Stripe refund reads pending; its failure makes the note failed, announced once; an older pending event after it changes nothing`, async (t) => {
    const { fake } = ctx;
    fake.state.refundStatus = "pending";
    t.teardown(() => {
      fake.state.refundStatus = "succeeded";
      fake.webhookOptions({});
    });
    const { s, inv } = await renewal(ctx, "visa");
    t.is(inv.status, "paid");
    const note = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "refund" });
    t.truthy(note.refund_id);
    t.like(note, { outcome: "refund", status: "issued", refund_status: "pending", refund_failure_reason: null });
    await fake.settle();
    t.like(await s.call("GET", `/credit-notes/${note.id}`), { refund_status: "pending" }, "refund.created (pending) leaves it pending");

    // An update of the refund still pending, held: Stripe delivers it only after the failure.
    fake.webhookOptions({ outOfOrder: true });
    await fake.settleRefund(note.refund_id, "pending");
    fake.webhookOptions({});
    // Days later the card turns out closed: refund.updated (failed), then refund.failed.
    await fake.settleRefund(note.refund_id, "failed", "expired_or_canceled_card");
    await fake.settle();
    const failed = await s.call("GET", `/credit-notes/${note.id}`);
    t.like(failed, { status: "issued", refund_status: "failed", refund_failure_reason: "expired_or_canceled_card", refund_id: note.refund_id, total: note.total });
    const announced = await refundFailedEvents(s, note.id);
    t.is(announced.length, 1, "credit_note.refund_failed once (refund.updated and refund.failed tell the same failure)");
    t.like(announced[0]?.data, { id: note.id, refund_status: "failed", refund_failure_reason: "expired_or_canceled_card" });

    // The same event delivered again: a repeat.
    const [updated] = refundEvents(fake, note.refund_id, "refund.updated").filter((e) => (e.data as Json).object.status === "failed");
    await fake.redeliver(String(updated?.id));
    await fake.settle();
    t.deepEqual(answers(fake, String(updated?.id)), [200, 200]);
    t.is((await refundFailedEvents(s, note.id)).length, 1, "a redelivery announces nothing more");

    // The older pending update arrives now: the note stays failed.
    await fake.releaseHeld();
    await fake.settle();
    const [stale] = refundEvents(fake, note.refund_id, "refund.updated").filter((e) => (e.data as Json).object.status === "pending");
    t.deepEqual(answers(fake, String(stale?.id)), [200]);
    t.like(await s.call("GET", `/credit-notes/${note.id}`), { status: "issued", refund_status: "failed", refund_failure_reason: "expired_or_canceled_card" });
    t.is((await refundFailedEvents(s, note.id)).length, 1);
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid" }, "nothing undone: the operator pays it back by other means");
  });

  test.serial(`${store}: a refund Stripe made succeeded reads succeeded; its events in another environment change nothing; failing later makes it failed, once`, async (t) => {
    const { fake, server } = ctx;
    const { s, inv } = await renewal(ctx, "visa");
    const note = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "duplicate", outcome: "refund" });
    t.like(note, { refund_status: "succeeded", refund_failure_reason: null });
    await fake.settle();

    // Another environment on Stripe (with its own webhook URL) is sent the refund's failure: not its note.
    const other = await renewal(ctx, "visa");
    await fake.settleRefund(note.refund_id, "failed", "lost_or_stolen_card");
    await fake.settle();
    t.like(await s.call("GET", `/credit-notes/${note.id}`), { refund_status: "succeeded", refund_failure_reason: null });
    t.deepEqual(await refundFailedEvents(other.s, note.id), []);
    t.deepEqual(await refundFailedEvents(s, note.id), []);

    // The same failure, sent to the note's environment: failed, announced once.
    const env = String((await s.call("GET", "/payment-settings")).stripe_webhook_url)
      .split("/")
      .pop();
    fake.setWebhook(`${server.url}/providers/stripe/webhooks/${env}`, STRIPE_WEBHOOK_SECRET);
    const sent = [...refundEvents(fake, note.refund_id, "refund.updated"), ...refundEvents(fake, note.refund_id, "refund.failed")];
    for (const e of sent) await fake.redeliver(String(e.id));
    for (const e of sent) await fake.redeliver(String(e.id));
    await fake.settle();
    t.like(await s.call("GET", `/credit-notes/${note.id}`), { status: "issued", refund_status: "failed", refund_failure_reason: "lost_or_stolen_card" });
    t.is((await refundFailedEvents(s, note.id)).length, 1);
    const listed = (await s.call("GET", `/credit-notes?invoice_id=${inv.id}`)).credit_notes as Json[];
    t.like(listed[0], { id: note.id, refund_status: "failed" });
  });

  test.serial(
    `${store}: a refund's failure that comes before its credit note is written is answered 409, not recorded; redelivered once the note is there, the note fails, announced once`,
    async (t) => {
      const { fake } = ctx;
      fake.state.refundStatus = "pending";
      t.teardown(() => {
        fake.state.refundStatus = "succeeded";
        fake.state.beforeRefund = undefined;
      });
      const { s, inv } = await renewal(ctx, "visa");
      const env = String((await s.call("GET", "/payment-settings")).stripe_webhook_url)
        .split("/")
        .pop();
      // The note's first try: Stripe refuses the refund; nothing is written.
      fake.state.beforeRefund = () => {
        throw invalid("Refused once by the test.");
      };
      const before = fake.requests().length;
      const refused = await s.raw("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "refund" });
      t.is(refused.status, 400);
      fake.state.beforeRefund = undefined;
      t.deepEqual((await s.call("GET", `/credit-notes?invoice_id=${inv.id}`)).credit_notes, []);
      const asked = fake
        .requests()
        .slice(before)
        .filter((r) => r.operation === "POST /v1/refunds");
      t.is(asked.length, 1);
      const first = asked[0] as (typeof asked)[number];
      const noteId = String(first.params.metadata?.credit_note_id);
      t.like(first.params.metadata, { credit_note_id: noteId, environment_id: env });
      t.true(noteId.startsWith("cn_"));

      // Stripe makes that very refund (the same key and parameters), and it fails before the note is written.
      const stripe = new Stripe("sk_test_early", { host: fake.host, port: fake.port, protocol: "http", maxNetworkRetries: 0 });
      const made = await stripe.refunds.create(first.params as Stripe.RefundCreateParams, { idempotencyKey: String(first.idempotencyKey) });
      t.is(made.status, "pending");
      await fake.settleRefund(made.id, "failed", "expired_or_canceled_card");
      await fake.settle();
      const sent = [...refundEvents(fake, made.id, "refund.updated"), ...refundEvents(fake, made.id, "refund.failed")];
      t.is(sent.length, 2);
      for (const e of sent) t.deepEqual(answers(fake, String(e.id)), [409], `${e.type} before its note: not handled, Stripe delivers it again`);

      // The note asked again: the same ID, and Stripe answers the same refund (pending, as it was made).
      const note = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "refund" });
      t.like(note, { id: noteId, refund_id: made.id, refund_status: "pending" });
      t.deepEqual(await refundFailedEvents(s, noteId), []);

      // Stripe's redeliveries: the events were not recorded, so they take effect now, once.
      for (const e of sent) await fake.redeliver(String(e.id));
      for (const e of sent) await fake.redeliver(String(e.id));
      await fake.settle();
      for (const e of sent) t.deepEqual(answers(fake, String(e.id)), [409, 200, 200]);
      t.like(await s.call("GET", `/credit-notes/${noteId}`), { status: "issued", refund_status: "failed", refund_failure_reason: "expired_or_canceled_card" });
      t.is((await refundFailedEvents(s, noteId)).length, 1);
    },
  );
}
