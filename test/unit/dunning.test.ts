/**
 * Dunning's rules (src/billing/payments/dunning.ts, DESIGN §16), table-driven: when the next
 * attempt is due after n failures (counted from the first failure, on the invoice's clock); what
 * each outcome makes of the invoice (paid; failed with the next attempt planned; the last failure
 * with the policy and uncollectible if configured; waiting for the customer, not retried); which
 * invoices may be charged or retried; a credit purchase's charge, paid or else void at once. And the test provider's cards: a repeated idempotency key
 * answers the first outcome and never charges twice.
 */
import test from "ava";
import { type AttemptDecision, attemptsAllowed, decide, isCollectible, isRetryable, nextAttemptAt, purchaseDecision } from "../../src/billing/payments/dunning.js";
import { DEFAULT_RETRY_DAYS, type PaymentSettings, defaultPaymentSettings } from "../../src/billing/payments/types.js";
import { TEST_CARDS, TestPaymentProvider } from "../../src/billing/subscriptions/test-provider.js";
import { chargeKey } from "../../src/billing/subscriptions/types.js";

const T0 = new Date("2026-02-15T00:00:00Z");
const day = (n: number) => new Date(T0.getTime() + n * 86_400_000);
/** An invoice of a subscription (a credit purchase's has its own rule: purchaseDecision). */
const SUB = { subscriptionId: "sub_1", periodKey: "2026-02" };
/** A credit purchase's invoice (DESIGN §14). */
const PURCHASE = { subscriptionId: "", periodKey: "credit:cg_1" };
const settings = (over: Partial<PaymentSettings> = {}): PaymentSettings => ({ ...defaultPaymentSettings("env_1", T0), ...over });

test("the default schedule: 3, 5 and 7 days after the first failure; four attempts in all", (t) => {
  t.deepEqual([...DEFAULT_RETRY_DAYS], [3, 5, 7]);
  t.is(attemptsAllowed(DEFAULT_RETRY_DAYS), 4);
  t.is(attemptsAllowed([]), 1);
});

for (const [failures, schedule, expected] of [
  [1, [3, 5, 7], day(3)],
  [2, [3, 5, 7], day(5)],
  [3, [3, 5, 7], day(7)],
  [4, [3, 5, 7], null],
  [1, [1], day(1)],
  [2, [1], null],
  [1, [], null],
  [0, [3], null],
] as const) {
  test(`after ${failures} failure(s) on [${schedule.join(", ")}]: the next attempt ${expected ? expected.toISOString() : "none"}`, (t) => {
    t.deepEqual(nextAttemptAt(T0, schedule, failures), expected);
  });
}

test("a first failure plans the next from its own time; later failures count from the first", (t) => {
  const first = decide(SUB, 1, { ok: false, message: "declined", code: "card_declined" }, T0, settings());
  t.like(first, { status: "open", attemptCount: 1, event: "invoice.payment_failed", afterLast: null });
  t.deepEqual(first.nextPaymentAttempt, day(3));
  t.is(first.payment.firstFailedAt, T0.toISOString());
  // The second attempt ran late (day 4): the third is still the first failure + 5 days.
  const second = decide({ ...SUB, payment: first.payment }, 2, { ok: false, message: "declined" }, day(4), settings());
  t.deepEqual(second.nextPaymentAttempt, day(5));
  t.is(second.payment.firstFailedAt, T0.toISOString());
});

for (const [policy, markUncollectible, status] of [
  ["cancel", true, "uncollectible"],
  ["pause", false, "open"],
  ["leave_active", false, "open"],
] as const) {
  test(`the last attempt failing: the policy ${policy}, the invoice ${status}`, (t) => {
    const d: AttemptDecision = decide(
      { ...SUB, payment: { firstFailedAt: T0.toISOString() } },
      4,
      { ok: false, message: "no funds", code: "insufficient_funds" },
      day(7),
      settings({ afterLastAttempt: policy, markUncollectible }),
    );
    t.like(d, { status, attemptCount: 4, nextPaymentAttempt: null, event: "invoice.payment_failed", afterLast: policy });
    t.is(d.payment.lastError, "no funds");
  });
}

test("paid: the next attempt cleared, a pending action with it", (t) => {
  const d = decide({ ...SUB, payment: { actionRequired: true, actionUrl: "https://x.example/a", firstFailedAt: T0.toISOString() } }, 3, { ok: true, reference: "pi_1" }, day(5), settings());
  t.like(d, { status: "paid", attemptCount: 3, nextPaymentAttempt: null, event: "invoice.paid", afterLast: null });
  t.like(d.payment, { reference: "pi_1", actionRequired: false, actionUrl: null, lastError: null });
});

test("waiting for the customer: a failed attempt, the next planned on the schedule, the provider's reference and page kept", (t) => {
  const d = decide(SUB, 1, { ok: false, requiresAction: true, reference: "pi_2", actionUrl: "https://pay.example/pi_2", message: "authenticate" }, T0, settings());
  t.like(d, { status: "open", attemptCount: 1, nextPaymentAttempt: day(3), event: "invoice.payment_failed", also: "invoice.payment_action_required", afterLast: null });
  t.like(d.payment, { reference: "pi_2", actionRequired: true, actionUrl: "https://pay.example/pi_2", firstFailedAt: T0.toISOString() });
  t.false(isRetryable({ status: "open", total: "100", payment: d.payment }));
  // Its planned attempt (it cancels that payment first, payments/waiting.ts): dunning makes it.
  t.true(isRetryable({ status: "open", total: "100", payment: d.payment, nextPaymentAttempt: d.nextPaymentAttempt }));
  t.true(isCollectible({ status: "open", total: "100" }));
});

for (const [policy, markUncollectible, status, waits] of [
  ["cancel", true, "uncollectible", true],
  ["leave_active", false, "open", true],
  ["leave_active", true, "uncollectible", false],
] as const) {
  test(`the last attempt waiting for the customer: the policy ${policy}, the invoice ${status}, its payment ${waits ? "still waiting" : "cancelled"}`, (t) => {
    const d = decide(
      { ...SUB, id: "inv_1", payment: { firstFailedAt: T0.toISOString() } },
      4,
      { ok: false, requiresAction: true, reference: "pi_5", message: "authenticate" },
      day(7),
      settings({ afterLastAttempt: policy, markUncollectible }),
    );
    t.like(d, { status, attemptCount: 4, nextPaymentAttempt: null, event: "invoice.payment_failed", afterLast: policy });
    // No pay link announced for an invoice the last attempt makes uncollectible (its payment cancelled once the policy ran).
    t.is(d.also, waits && status === "open" ? "invoice.payment_action_required" : undefined);
    t.is(d.payment.actionRequired, waits);
    t.deepEqual(d.payment.cancel, waits ? undefined : { reference: "pi_5", key: "inv_1:attempt-4:cancel" });
  });
}

for (const [what, outcome] of [
  ["declined", { ok: false, message: "declined", code: "card_declined" }],
  ["waiting for authentication", { ok: false, requiresAction: true, reference: "pi_3", actionUrl: "https://pay.example/pi_3", message: "authenticate" }],
] as const) {
  test(`a credit purchase's charge ${what}: void at once, never retried nor waited for, whatever the schedule`, (t) => {
    const d = decide(PURCHASE, 1, outcome, T0, settings({ afterLastAttempt: "cancel", markUncollectible: true }));
    t.deepEqual(d, purchaseDecision(PURCHASE, 1, outcome));
    t.like(d, { status: "void", attemptCount: 1, nextPaymentAttempt: null, event: "invoice.payment_failed", afterLast: null });
    t.like(d.payment, { actionRequired: false, actionUrl: null, lastError: outcome.message });
    t.is(d.payment.firstFailedAt, undefined);
  });
}

test("a credit purchase's charge that succeeds: paid; any other invoice has no purchase rule", (t) => {
  t.like(purchaseDecision(PURCHASE, 1, { ok: true, reference: "pi_4" }), { status: "paid", attemptCount: 1, event: "invoice.paid" });
  t.is(purchaseDecision(SUB, 1, { ok: false, message: "declined" }), undefined);
  t.is(purchaseDecision({ subscriptionId: "", periodKey: "2026-02" }, 1, { ok: false, message: "declined" }), undefined);
});

for (const [status, total, amountDue, collectible] of [
  ["open", "100", undefined, true],
  ["open", "100", "0", false],
  ["paid", "100", undefined, false],
  ["void", "100", undefined, false],
  ["uncollectible", "100", undefined, false],
  ["draft", "100", undefined, false],
] as const) {
  test(`an invoice ${status}, total ${total}, due ${amountDue ?? total}: ${collectible ? "" : "not "}charged`, (t) => {
    t.is(isCollectible({ status, total, amountDue }), collectible);
    t.is(isRetryable({ status, total, amountDue, payment: null }), collectible);
  });
}

test("test cards: Stripe's numbers attach with their behaviour; 0002 is declined at checkout", (t) => {
  const p = new TestPaymentProvider();
  const behavior = (n: string) => {
    const r = p.tokenize(n);
    return r.ok ? [r.brand, r.last4, r.behavior] : r.message;
  };
  t.deepEqual(behavior("4242 4242 4242 4242"), ["visa", "4242", "succeeds"]);
  t.deepEqual(behavior("5555-5555-5555-4444"), ["mastercard", "4444", "succeeds"]);
  t.deepEqual(behavior(TEST_CARDS.requiresAction), ["visa", "3155", "requires_action"]);
  t.deepEqual(behavior(TEST_CARDS.insufficientFunds), ["visa", "9995", "insufficient_funds"]);
  t.deepEqual(behavior(TEST_CARDS.chargeFails), ["visa", "0341", "charge_fails"]);
  t.regex(behavior(TEST_CARDS.declined) as string, /declined/);
  for (const n of ["4242 4242 4242 4242", "5555 5555 5555 4444", "4000 0025 0000 3155", "4000 0000 0000 9995", "4000 0000 0000 0341", "4000 0000 0000 0002"]) t.true(p.cardHint.includes(n));
});

test("test provider: a repeated attempt key answers the first outcome and charges once; the next attempt is a new charge", async (t) => {
  const p = new TestPaymentProvider();
  const key = chargeKey("inv_1", 1);
  const first = await p.charge({ behavior: "succeeds" }, "4900", "USD", key);
  const again = await p.charge({ behavior: "succeeds" }, "4900", "USD", key);
  t.true(first.ok);
  t.deepEqual(again, first);
  t.is(p.chargesOf(key), 1);
  // A failure is answered the same on a repeat (a crash after the charge, then the retry of that attempt).
  const fail = await p.charge({ behavior: "insufficient_funds" }, "4900", "USD", chargeKey("inv_2", 1));
  t.deepEqual(fail, { ok: false, message: "The card has insufficient funds.", code: "insufficient_funds" });
  t.deepEqual(await p.charge({ behavior: "succeeds" }, "4900", "USD", chargeKey("inv_2", 1)), fail);
  t.is(p.chargesOf(chargeKey("inv_2", 1)), 1);
  t.true((await p.charge({ behavior: "succeeds" }, "4900", "USD", chargeKey("inv_2", 2))).ok);
  t.is(p.chargesOf(chargeKey("inv_2", 2)), 1);
  // Refunds reach only what was charged.
  t.true((await p.refund(key, "4900", "USD", "r1")).ok);
  t.false((await p.refund(key, "1", "USD", "r2")).ok);
});

test("test provider: authentication needed on every charge; the customer's confirmation pays it once", async (t) => {
  const p = new TestPaymentProvider();
  const key = chargeKey("inv_3", 1);
  const out = await p.charge({ behavior: "requires_action" }, "100", "USD", key);
  if (out.ok || !out.requiresAction) return t.fail("expected a charge waiting for authentication");
  t.regex(out.reference, /^pi_test_/);
  t.deepEqual(await p.charge({ behavior: "requires_action" }, "100", "USD", key), out);
  t.deepEqual(await p.confirmAction(out.reference), { ok: true, reference: out.reference });
  // After the confirmation the attempt's key answers paid; it can be refunded.
  t.true((await p.charge({ behavior: "requires_action" }, "100", "USD", key)).ok);
  t.is(p.chargesOf(key), 1);
  t.true((await p.refund(key, "100", "USD", "r3")).ok);
  t.false((await p.confirmAction("pi_test_unknown")).ok);
});
