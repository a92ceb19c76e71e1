/**
 * The test payment provider (DESIGN §8): stands in for a real processor behind PaymentProvider.
 *   4242 4242 4242 4242  succeeds
 *   4000 0000 0000 0002  is declined at checkout ("Your card was declined.")
 *   4000 0000 0000 0341  is saved, but every charge to it fails (invoices stay open)
 * Any other number is refused as unknown to the test provider.
 */
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

  async charge(method: { behavior: string }, _amount: string, _currency: string, _key: string) {
    return method.behavior === "succeeds" ? { ok: true as const } : { ok: false as const, message: "The card was declined." };
  }
}
