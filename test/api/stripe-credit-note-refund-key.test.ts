/**
 * DESIGN §12 with §15: a refund credit note retried with its Idempotency-Key refunds once, even
 * when another note of the invoice was issued between the attempts. Through the real server on a
 * port, against the fake Stripe behind a proxy that drops the answers of its refunds (Stripe made
 * the refund; the connection failed, on the library's retries too): the note's first call fails
 * with a 5xx and writes nothing, so its key is let go. A balance credit note on the invoice then
 * commits. The retry with the same key (over REST, or over gRPC with the key in its metadata) is
 * the same note: the same ID, hence the same refund key at Stripe, which answers the first refund.
 * One refund of 2,000 at Stripe, one refund note of 2,000 recording it, 2,000 + 1,000 credited. On
 * the old code the note's ID came from the notes before it, so the retry's was another and
 * Stripe made a second refund of 2,000 (4,000 refunded for one 2,000 note). The same request with
 * the same key once the key expired (swept) is answered the note it wrote, and refunds nothing.
 * A whole note (no amount) retried so plans 3,900 where its first attempt refunded 4,900: Stripe
 * refuses the key for the other amount, and the note is written at the 4,900 refunded (its
 * refund found by the note it names), 5,900 credited; before, a 500 on every retry, the refund
 * recorded by no note.
 * A retry that the invoice as it is now would refuse before any refund is asked for is that
 * refund too (Stripe asked first for the refund naming the note): a 2,000 note retried after a
 * 3,500 balance note left 1,400 to credit is written at 2,000 (5,500 credited, no more refund
 * accepted), where the old code answered 400 CREDIT_EXCEEDS_INVOICE on every retry and then took
 * a further 1,400 refund (6,900 back on a 4,900 invoice); a whole refund of a 10,000 credit
 * purchase retried after a close spent 8,000 of its credit is written at 10,000 taking back the
 * 2,000 unspent, where the old code answered 400 CREDIT_ALREADY_SPENT (the money back, the credit
 * kept).
 */
import { randomBytes } from "node:crypto";
import test, { type ExecutionContext } from "ava";
import { CreditNoteService } from "../../src/gen/billing/v1/credit_note_service_pb.js";
import { rpcClient } from "../helpers/clients.js";
import { SqlIdempotencyStore } from "../../src/db/stores/idempotency-store.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { type StripeFront, type StripeServer, useStripeServer } from "../helpers/payment-flows.js";
import { stripeProxy } from "../helpers/stripe-outage.js";
import { intentsOf, refundsOf, renewal } from "../helpers/stripe-waiting.js";
import { CALLBACKS } from "../helpers/credit-bodies.js";
import { reasonOf } from "../helpers/clients.js";
import { stripeDriver } from "../helpers/payment-flows.js";
import type { Scenario } from "../helpers/scenario.js";
import type { Json } from "../helpers/subjects-api.js";

const SECRETS_KEY = randomBytes(32).toString("base64");
const usd = (value: string) => ({ currency_code: "USD", value });

/** A front whose refunds (POST /v1/refunds) are made at Stripe and their answers dropped while `drop` is set. */
interface DroppingFront extends StripeFront {
  drop: boolean;
  dropped: number;
}

async function droppingFront(target: string): Promise<DroppingFront> {
  const front: DroppingFront = {
    url: "",
    drop: false,
    dropped: 0,
    stop: async () => {},
  };
  const proxy = await stripeProxy(
    target,
    (req) => (front.drop && req.method === "POST" && req.url?.startsWith("/v1/refunds") ? "answer-lost" : undefined),
    () => {
      front.dropped++;
    },
  );
  front.url = proxy.url;
  front.stop = () => proxy.stop();
  return front;
}

const body = (invoiceId: string) => ({ invoice_id: invoiceId, reason: "order_change", outcome: "refund", amount: "2000" });

/** POST /credit-notes with the Idempotency-Key `key`. */
async function postNote(ctx: StripeServer<DroppingFront>, s: Scenario, key: string, b: Json): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${ctx.server.url}/credit-notes`, {
    method: "POST",
    headers: { "x-api-key": s.key, "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify(b),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

/** The first attempt of note `b` with `key` on `invoiceId` paid by `intent`: Stripe refunds, the answer is lost (a 5xx), nothing is written. */
async function answerLost(t: ExecutionContext, ctx: StripeServer<DroppingFront>, s: Scenario, key: string, b: Json, intent: string): Promise<void> {
  const { fake, front } = ctx;
  front.drop = true;
  t.teardown(() => {
    front.drop = false;
  });
  const failed = await postNote(ctx, s, key, b);
  front.drop = false;
  t.true(failed.status >= 500, `the first attempt fails with a 5xx: ${failed.status} ${JSON.stringify(failed.body)}`);
  t.true(front.dropped > 0, "Stripe's answer was dropped");
  t.is(refundsOf(fake, intent).length, 1, "Stripe made the first attempt's refund");
  t.deepEqual((await s.call("GET", `/credit-notes?invoice_id=${b.invoice_id}`)).credit_notes, [], "nothing written");
}

/**
 * The first attempt of a 2,000 refund note with `key` (Stripe refunds, the answer is lost: a 5xx,
 * nothing written), then a balance note of `other` (1,000) that commits: the scenario, the invoice, its PaymentIntent.
 */
async function failedThenOther(
  t: ExecutionContext,
  ctx: StripeServer<DroppingFront>,
  key: string,
  ask: (invoiceId: string) => Json = body,
  other = "1000",
): Promise<{ s: Scenario; inv: Json; intent: string }> {
  const { s, inv } = await renewal(ctx, "visa");
  t.is(inv.status, "paid");
  const intents = intentsOf(ctx.fake, inv.id);
  t.is(intents.length, 1);
  const intent = String(intents[0]?.id);
  await answerLost(t, ctx, s, key, ask(inv.id), intent);

  // Another note of the invoice commits meanwhile.
  const balance = await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "credit_balance", amount: other });
  t.like(balance, { outcome: "credit_balance", total: usd(other) });
  return { s, inv, intent };
}

/**
 * A subject on Stripe subscribed at 8,000 a month (seats) from Jan 15 who bought 10,000 of paid
 * credit with the card on file: the scenario, the grant, the purchase's invoice and its PaymentIntent.
 */
async function purchase(t: ExecutionContext, ctx: StripeServer<DroppingFront>): Promise<{ s: Scenario; grant: Json; intent: string }> {
  const d = stripeDriver(ctx.server, ctx.fake);
  const s = await d.start(ctx.server);
  const rateCard = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: usd("8000") } }] });
  await d.subscribe(s, { rate_card_id: rateCard, fixed_rate_quantities: { seats: 1 } }, "visa");
  const r = await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("10000"), category: "paid", checkout_callback_urls: CALLBACKS });
  await ctx.fake.settle();
  const grant = await s.call("GET", `/credit-grants/${r.credit_grant.id}`);
  t.like(grant, { status: "active", remaining_amount: usd("10000") });
  t.is((await s.call("GET", `/invoices/${grant.invoice_id}`)).status, "paid");
  const intents = intentsOf(ctx.fake, grant.invoice_id);
  t.is(intents.length, 1);
  return { s, grant, intent: String(intents[0]?.id) };
}

/** What Stripe and the service hold after the retry answered `note`: one refund of 2,000, recorded by the note. */
async function refundedOnce(t: ExecutionContext, ctx: StripeServer<DroppingFront>, s: Scenario, inv: Json, intent: string, note: Json): Promise<void> {
  const refunds = refundsOf(ctx.fake, intent);
  t.deepEqual(refunds, [[note.refund_id, 2000]], "one refund at Stripe, the first attempt's, recorded by the note");
  const made = ctx.fake.state.refunds.get(String(note.refund_id)) as Json;
  t.is(made.metadata?.credit_note_id, note.id, "the refund Stripe made names the note written (its webhooks find it)");
  const notes = (await s.call("GET", `/credit-notes?invoice_id=${inv.id}`)).credit_notes as Json[];
  t.deepEqual(notes.map((n) => [n.outcome, n.total.value, n.refund_id ?? null]).sort(), [
    ["credit_balance", "1000", null],
    ["refund", "2000", note.refund_id],
  ]);
  t.is((await s.call("GET", `/invoices/${inv.id}`)).amount_credited.value, "3000"); // 2,000 refunded + 1,000 on the balance
}

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY }, droppingFront);

  test.serial(`${store}: a refund note retried over REST with its Idempotency-Key after a 5xx, another note issued between, refunds once`, async (t) => {
    const key = `refund-${randomBytes(6).toString("hex")}`;
    const { s, inv, intent } = await failedThenOther(t, ctx, key);
    const retried = await postNote(ctx, s, key, body(inv.id));
    t.is(retried.status, 200, JSON.stringify(retried.body));
    const note = retried.body;
    t.like(note, { outcome: "refund", total: usd("2000"), status: "issued", refund_status: "succeeded" });
    await refundedOnce(t, ctx, s, inv, intent, note);
    // A repeat now is the stored answer.
    const again = await postNote(ctx, s, key, body(inv.id));
    t.deepEqual(again.body, note);
    t.is(refundsOf(ctx.fake, intent).length, 1);
    // Past the key's 24 hours (swept), the same request with the same key meets the note it wrote: that note, nothing more.
    await withDatabase(ctx.server.db.url, async (db) => {
      await db.sql.query("UPDATE idempotency_keys SET expires_at = '2001-01-01 00:00:00.000' WHERE idem_key = ?", [key]);
      t.true((await new SqlIdempotencyStore(db.sql).sweep(new Date(), 1000)) >= 1);
    });
    const late = await postNote(ctx, s, key, body(inv.id));
    t.is(late.status, 200, JSON.stringify(late.body));
    t.like(late.body, { id: note.id, number: note.number, refund_id: note.refund_id, total: usd("2000") });
    await refundedOnce(t, ctx, s, inv, intent, note);
  });

  test.serial(`${store}: the retry over gRPC with the key in its metadata is the same note: refunded once`, async (t) => {
    const key = `refund-${randomBytes(6).toString("hex")}`;
    const { s, inv, intent } = await failedThenOther(t, ctx, key);
    const client = rpcClient(CreditNoteService, ctx.server.url, "grpc", s.key);
    const out = await client.createCreditNote({ invoiceId: inv.id, reason: "order_change", outcome: "refund", amount: "2000" }, { headers: { "idempotency-key": key } });
    const note = await s.call("GET", `/credit-notes/${out.creditNote?.id}`);
    t.like(note, { outcome: "refund", total: usd("2000"), refund_id: out.creditNote?.refundId });
    await refundedOnce(t, ctx, s, inv, intent, note);
  });

  test.serial(`${store}: a whole refund note retried with its key after a 1,000 balance note is the 4,900 refund Stripe made, not a 500`, async (t) => {
    const key = `refund-${randomBytes(6).toString("hex")}`;
    const whole = (invoiceId: string) => ({ invoice_id: invoiceId, reason: "order_change", outcome: "refund" });
    const { s, inv, intent } = await failedThenOther(t, ctx, key, whole);
    const retried = await postNote(ctx, s, key, whole(inv.id));
    t.is(retried.status, 200, JSON.stringify(retried.body));
    const note = retried.body;
    t.like(note, { outcome: "refund", total: usd("4900"), status: "issued", refund_status: "succeeded" });
    t.deepEqual(refundsOf(ctx.fake, intent), [[note.refund_id, 4900]], "one refund at Stripe, the first attempt's, recorded by the note");
    const notes = (await s.call("GET", `/credit-notes?invoice_id=${inv.id}`)).credit_notes as Json[];
    t.deepEqual(notes.map((n) => [n.outcome, n.total.value, n.refund_id ?? null]).sort(), [
      ["credit_balance", "1000", null],
      ["refund", "4900", note.refund_id],
    ]);
    // The money went back: 4,900 refunded and 1,000 on the balance, beyond the invoice's total.
    t.is((await s.call("GET", `/invoices/${inv.id}`)).amount_credited.value, "5900");
    // Nothing more is refunded: a further note is refused, and the same call again answers the note.
    const more = await postNote(ctx, s, `more-${key}`, { invoice_id: inv.id, reason: "order_change", outcome: "refund", amount: "3900" });
    t.is(more.status, 400, JSON.stringify(more.body));
    t.deepEqual((await postNote(ctx, s, key, whole(inv.id))).body, note);
    t.is(refundsOf(ctx.fake, intent).length, 1);
  });

  test.serial(`${store}: a 2,000 refund note retried with its key after a 3,500 balance note left 1,400 to credit is the 2,000 refund Stripe made, not CREDIT_EXCEEDS_INVOICE`, async (t) => {
    const key = `refund-${randomBytes(6).toString("hex")}`;
    const { s, inv, intent } = await failedThenOther(t, ctx, key, body, "3500");
    const retried = await postNote(ctx, s, key, body(inv.id));
    t.is(retried.status, 200, JSON.stringify(retried.body));
    const note = retried.body;
    t.like(note, { outcome: "refund", total: usd("2000"), status: "issued", refund_status: "succeeded" });
    t.deepEqual(refundsOf(ctx.fake, intent), [[note.refund_id, 2000]], "one refund at Stripe, the first attempt's, recorded by the note");
    const notes = (await s.call("GET", `/credit-notes?invoice_id=${inv.id}`)).credit_notes as Json[];
    t.deepEqual(notes.map((n) => [n.outcome, n.total.value, n.refund_id ?? null]).sort(), [
      ["credit_balance", "3500", null],
      ["refund", "2000", note.refund_id],
    ]);
    // 2,000 refunded and 3,500 on the balance: beyond the invoice's 4,900, and nothing more is creditable.
    t.is((await s.call("GET", `/invoices/${inv.id}`)).amount_credited.value, "5500");
    const more = await postNote(ctx, s, `more-${key}`, { invoice_id: inv.id, reason: "order_change", outcome: "refund", amount: "1400" });
    t.is(more.status, 400, JSON.stringify(more.body));
    t.is(reasonOf(more.body), "CREDIT_EXCEEDS_INVOICE");
    t.deepEqual((await postNote(ctx, s, key, body(inv.id))).body, note);
    t.deepEqual(refundsOf(ctx.fake, intent), [[note.refund_id, 2000]]);
  });

  test.serial(`${store}: a whole refund of a 10,000 credit purchase retried with its key after a close spent 8,000 is the refund Stripe made, taking back the 2,000 unspent`, async (t) => {
    const key = `refund-${randomBytes(6).toString("hex")}`;
    const { s, grant, intent } = await purchase(t, ctx);
    const whole = { invoice_id: grant.invoice_id, reason: "order_change", outcome: "refund" };
    await answerLost(t, ctx, s, key, whole, intent);
    t.deepEqual(refundsOf(ctx.fake, intent), [[refundsOf(ctx.fake, intent)[0]?.[0], 10000]]);
    // Feb 15's close spends 8,000 of the credit (the 10,000 refunded in money meanwhile).
    await s.advance("2026-02-15T00:00:00Z");
    await ctx.fake.settle();
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "active", remaining_amount: usd("2000") });

    const retried = await postNote(ctx, s, key, whole);
    t.is(retried.status, 200, JSON.stringify(retried.body));
    const note = retried.body;
    t.like(note, { outcome: "refund", total: usd("10000"), status: "issued", refund_status: "succeeded" });
    t.deepEqual(refundsOf(ctx.fake, intent), [[note.refund_id, 10000]], "one refund at Stripe, the first attempt's, recorded by the note");
    // What is unspent (2,000) is taken back under the note: the grant voided; the 8,000 spent stays spent.
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "voided", remaining_amount: usd("0") });
    const entries = (await s.call("GET", `/subjects/${s.subjectId}/credit-ledger?limit=100`)).entries as Json[];
    t.deepEqual(
      entries.filter((e) => e.credit_grant_id === grant.id).map((e) => [e.entry_type, e.amount.value]),
      [
        ["grant", "10000"],
        ["application", "-8000"],
        ["void", "-2000"],
      ],
    );
    t.is((await s.call("GET", `/invoices/${grant.invoice_id}`)).amount_credited.value, "10000");
    const more = await postNote(ctx, s, `more-${key}`, { ...whole, amount: "100" });
    t.is(more.status, 400, JSON.stringify(more.body));
    t.deepEqual((await postNote(ctx, s, key, whole)).body, note);
    t.is(refundsOf(ctx.fake, intent).length, 1);
  });
}
