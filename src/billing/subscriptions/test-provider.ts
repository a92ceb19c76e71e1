/**
 * The test payment provider (DESIGN §8): stands in for a real processor behind PaymentProvider.
 *   4242 4242 4242 4242  succeeds
 *   4000 0000 0000 0002  is declined at checkout ("Your card was declined.")
 *   4000 0000 0000 0341  is saved, but every charge to it fails (invoices stay open)
 * Any other number is refused as unknown to the test provider.
 * Charges that succeed are remembered by their idempotency key (in memory, for this process), so
 * that refunds (a credit note's, DESIGN §15) can be refused beyond what was charged; a refund's
 * repeat with the same key answers the first refund.
 */
import { randomBase62 } from "../ids.js";
import { dec, formatDecimal } from "../money.js";
import type { PaymentProvider } from "./types.js";

export const TEST_CARDS = {
  succeeds: "4242424242424242",
  declined: "4000000000000002",
  chargeFails: "4000000000000341",
} as const;

export class TestPaymentProvider implements PaymentProvider {
  /** Only ever for test environments (PaymentProviders refuses it for live ones). */
  readonly test = true;
  /** What the hosted checkout tells the customer. */
  readonly cardHint = "Test cards: 4242 4242 4242 4242 succeeds; 4000 0000 0000 0002 is declined.";

  tokenize(cardNumber: string) {
    const digits = cardNumber.replace(/[\s-]/g, "");
    if (!/^\d{12,19}$/.test(digits)) return { ok: false as const, message: "Enter the card number: 12 to 19 digits." };
    if (digits === TEST_CARDS.succeeds) return { ok: true as const, brand: "visa", last4: "4242", behavior: "succeeds" as const };
    if (digits === TEST_CARDS.chargeFails) return { ok: true as const, brand: "visa", last4: "0341", behavior: "charge_fails" as const };
    if (digits === TEST_CARDS.declined) return { ok: false as const, message: "Your card was declined. Try another card." };
    return { ok: false as const, message: "This test card number is not known. Use 4242 4242 4242 4242." };
  }

  /** Successful charges by idempotency key, with what was refunded of each. */
  private readonly charges = new Map<string, { amount: string; currency: string; refunded: string }>();
  /** Refunds made, by their idempotency key. */
  private readonly refunds = new Map<string, { chargeKey: string; amount: string; refundId: string }>();

  async charge(method: { behavior: string }, amount: string, currency: string, key: string) {
    if (method.behavior !== "succeeds") return { ok: false as const, message: "The card was declined." };
    if (!this.charges.has(key)) this.charges.set(key, { amount, currency, refunded: "0" });
    return { ok: true as const };
  }

  async refund(chargeKey: string, amount: string, currency: string, idempotencyKey: string) {
    const done = this.refunds.get(idempotencyKey);
    if (done) {
      if (done.chargeKey !== chargeKey || done.amount !== amount) return { ok: false as const, message: "This idempotency key was used for another refund." };
      return { ok: true as const, refundId: done.refundId };
    }
    const c = this.charges.get(chargeKey);
    if (!c) return { ok: false as const, message: `No charge ${chargeKey} is known to the test provider.` };
    if (c.currency !== currency) return { ok: false as const, message: `The charge was in ${c.currency}, not ${currency}.` };
    const refunded = dec(c.refunded).plus(dec(amount));
    if (refunded.gt(dec(c.amount))) return { ok: false as const, message: `Refunds would exceed the charge (${c.amount}; ${c.refunded} refunded already).` };
    c.refunded = formatDecimal(refunded);
    const refundId = `re_test_${randomBase62(22)}`;
    this.refunds.set(idempotencyKey, { chargeKey, amount, refundId });
    return { ok: true as const, refundId };
  }
}
