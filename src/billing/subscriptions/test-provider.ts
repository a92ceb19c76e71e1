/**
 * The test payment provider (DESIGN §8, §16): stands in for a real processor behind
 * PaymentProvider, with Stripe's standard test card numbers:
 *   4242 4242 4242 4242  succeeds (visa)
 *   5555 5555 5555 4444  succeeds (mastercard)
 *   4000 0025 0000 3155  needs the customer's authentication on every off-session charge: the
 *                        invoice stays open until they complete it on its hosted page
 *   4000 0000 0000 9995  is saved, but every charge fails for insufficient funds
 *   4000 0000 0000 0341  is saved, but every charge is declined (card_declined)
 *   4000 0000 0000 0002  is declined at checkout ("Your card was declined.")
 * Any other number is refused as unknown to the test provider.
 *
 * Every charge is remembered by its idempotency key (in memory, for this process): a repeat of a
 * key answers the first outcome and charges nothing again (chargesOf counts the real ones). Charges
 * that succeeded can be refunded (a credit note's, DESIGN §15), never beyond what was charged; a
 * refund's repeat with the same key answers the first refund. A charge waiting for the customer
 * can be cancelled (its invoice ended), and can no longer be confirmed then.
 */
import type { CancelOutcome, ChargeOutcome, MadeRefundAnswer } from "../payments/types.js";
import { randomBase62 } from "../ids.js";
import { dec, formatDecimal } from "../money.js";
import type { PaymentMethod, PaymentProvider } from "./types.js";

export const TEST_CARDS = {
  succeeds: "4242424242424242",
  mastercard: "5555555555554444",
  requiresAction: "4000002500003155",
  insufficientFunds: "4000000000009995",
  chargeFails: "4000000000000341",
  declined: "4000000000000002",
} as const;

type Saved = { brand: string; last4: string; behavior: PaymentMethod["behavior"] };

/** The numbers that attach, and what charges to them do. */
const SAVED: Record<string, Saved> = {
  [TEST_CARDS.succeeds]: { brand: "visa", last4: "4242", behavior: "succeeds" },
  [TEST_CARDS.mastercard]: { brand: "mastercard", last4: "4444", behavior: "succeeds" },
  [TEST_CARDS.requiresAction]: { brand: "visa", last4: "3155", behavior: "requires_action" },
  [TEST_CARDS.insufficientFunds]: { brand: "visa", last4: "9995", behavior: "insufficient_funds" },
  [TEST_CARDS.chargeFails]: { brand: "visa", last4: "0341", behavior: "charge_fails" },
};

export class TestPaymentProvider implements PaymentProvider {
  /** Only ever for test environments (PaymentProviders refuses it for live ones). */
  readonly test = true;
  readonly kind = "test" as const;
  /** What the hosted checkout tells the customer. */
  readonly cardHint =
    "Test cards: 4242 4242 4242 4242 succeeds (so does 5555 5555 5555 4444); 4000 0025 0000 3155 needs authentication; 4000 0000 0000 9995 fails for insufficient funds; 4000 0000 0000 0341 is saved, then declined; 4000 0000 0000 0002 is declined.";

  tokenize(cardNumber: string) {
    const digits = cardNumber.replace(/[\s-]/g, "");
    if (!/^\d{12,19}$/.test(digits)) return { ok: false as const, message: "Enter the card number: 12 to 19 digits." };
    const saved = SAVED[digits];
    if (saved) return { ok: true as const, ...saved };
    if (digits === TEST_CARDS.declined) return { ok: false as const, message: "Your card was declined. Try another card." };
    return { ok: false as const, message: "This test card number is not known. Use 4242 4242 4242 4242." };
  }

  /** Successful charges by idempotency key, with what was refunded of each. */
  private readonly charges = new Map<string, { amount: string; currency: string; refunded: string }>();
  /** Every charge's outcome by idempotency key: a repeat answers it. */
  private readonly outcomes = new Map<string, ChargeOutcome>();
  /** Charges waiting for the customer's authentication, by their reference. */
  private readonly pending = new Map<string, { key: string; amount: string; currency: string }>();
  /** Refunds made, by their idempotency key. */
  private readonly refunds = new Map<string, { chargeKey: string; amount: string; refundId: string }>();
  /** How many charges were really made per idempotency key (a repeat makes none). */
  private readonly made = new Map<string, number>();

  async charge(method: Pick<PaymentMethod, "behavior">, amount: string, currency: string, key: string): Promise<ChargeOutcome> {
    const first = this.outcomes.get(key);
    if (first) return first;
    this.made.set(key, (this.made.get(key) ?? 0) + 1);
    const outcome = this.outcomeOf(method.behavior, amount, currency, key);
    this.outcomes.set(key, outcome);
    return outcome;
  }

  private outcomeOf(behavior: PaymentMethod["behavior"], amount: string, currency: string, key: string): ChargeOutcome {
    switch (behavior) {
      case "succeeds": {
        const reference = `pi_test_${randomBase62(22)}`;
        this.charges.set(key, { amount, currency, refunded: "0" });
        return { ok: true, reference };
      }
      case "requires_action": {
        const reference = `pi_test_${randomBase62(22)}`;
        this.pending.set(reference, { key, amount, currency });
        return { ok: false, requiresAction: true, reference, message: "This payment needs the customer's authentication.", code: "authentication_required" };
      }
      case "insufficient_funds":
        return { ok: false, message: "The card has insufficient funds.", code: "insufficient_funds" };
      default:
        return { ok: false, message: "The card was declined.", code: "card_declined" };
    }
  }

  /**
   * The customer authenticated the charge `reference` (the hosted invoice page's form simulates it):
   * it succeeds, under its own idempotency key (so it can be refunded), once; a repeat answers the same.
   */
  async confirmAction(reference: string): Promise<ChargeOutcome> {
    const p = this.pending.get(reference);
    if (!p) return { ok: false, message: `No payment ${reference} waits for authentication.`, code: "payment_intent_unexpected_state" };
    if (!this.charges.has(p.key)) this.charges.set(p.key, { amount: p.amount, currency: p.currency, refunded: "0" });
    const done: ChargeOutcome = { ok: true, reference };
    this.outcomes.set(p.key, done);
    return done;
  }

  /** Cancels made, by their idempotency key: what each answered. */
  private readonly cancels = new Map<string, CancelOutcome>();

  /**
   * Cancels the charge `reference` waiting for the customer (its invoice ended): it can no longer
   * be confirmed. One confirmed first answers succeeded; a repeat of `key` answers the first cancel.
   */
  async cancel(reference: string, key: string): Promise<CancelOutcome> {
    const first = this.cancels.get(key);
    if (first) return first;
    const p = this.pending.get(reference);
    const outcome: CancelOutcome = p && this.outcomes.get(p.key)?.ok ? "succeeded" : "canceled";
    if (outcome === "canceled") this.pending.delete(reference);
    this.cancels.set(key, outcome);
    return outcome;
  }

  /** How many charges were really made with idempotency key `key` (0 or 1: a repeat answers the first). */
  chargesOf(key: string): number {
    return this.made.get(key) ?? 0;
  }

  /**
   * `amount` null: what is left of the charge (refused when nothing is). A repeat of `idempotencyKey`
   * answers the refund made under it, with its amount, even for another amount (as the Stripe
   * provider does when Stripe refuses the key reused: the caller sees what was refunded); for
   * another charge it is refused.
   */
  async refund(chargeKey: string, amount: string | null, currency: string, idempotencyKey: string) {
    const done = this.refunds.get(idempotencyKey);
    if (done) {
      if (done.chargeKey !== chargeKey) return { ok: false as const, message: "This idempotency key was used for another refund." };
      return { ok: true as const, refundId: done.refundId, amount: done.amount };
    }
    const c = this.charges.get(chargeKey);
    if (!c) return { ok: false as const, message: `No charge ${chargeKey} is known to the test provider.` };
    if (c.currency !== currency) return { ok: false as const, message: `The charge was in ${c.currency}, not ${currency}.` };
    const asked = amount ?? formatDecimal(dec(c.amount).minus(dec(c.refunded)));
    if (!dec(asked).gt(0)) return { ok: false as const, message: `The charge was refunded already (${c.amount}).` };
    const refunded = dec(c.refunded).plus(dec(asked));
    if (refunded.gt(dec(c.amount))) return { ok: false as const, message: `Refunds would exceed the charge (${c.amount}; ${c.refunded} refunded already).` };
    c.refunded = formatDecimal(refunded);
    const refundId = `re_test_${randomBase62(22)}`;
    this.refunds.set(idempotencyKey, { chargeKey, amount: asked, refundId });
    return { ok: true as const, refundId, amount: asked };
  }

  /** The refund made under `idempotencyKey` of the charge `chargeKey`, if any: read, nothing refunded. */
  async refundMade(chargeKey: string, idempotencyKey: string): Promise<MadeRefundAnswer | undefined> {
    const done = this.refunds.get(idempotencyKey);
    return done && done.chargeKey === chargeKey ? { refundId: done.refundId, amount: done.amount } : undefined;
  }
}
