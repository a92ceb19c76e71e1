/**
 * Stripe's test cards, as the fake Stripe knows them: the test PaymentMethod tokens Stripe accepts
 * (`pm_card_visa` …) and their numbers, and what an off-session charge of each does.
 *
 * Real Stripe, for the record (https://docs.stripe.com/testing):
 * - 4242 4242 4242 4242 (`pm_card_visa`) and 5555 5555 5555 4444 (`pm_card_mastercard`) succeed.
 * - 4000 0025 0000 3155 (`pm_card_authenticationRequiredOnSetup`) asks for authentication unless it
 *   was set up for off-session use, and 4000 0027 6000 3184 (`pm_card_authenticationRequired`) asks
 *   for it on every payment. The fake makes BOTH ask on every off-session charge, so that the
 *   project's "authentication required → pay link → paid" flow can be driven with either number
 *   (the project's own `test` provider treats 3155 that way); the answer is Stripe's: a 402
 *   `card_error` with `code: "authentication_required"` whose `payment_intent` is left
 *   `requires_payment_method` with `last_payment_error` set (an off-session confirm never returns
 *   `requires_action`; the customer must come back on-session).
 * - 4000 0000 0000 9995 (`pm_card_chargeDeclinedInsufficientFunds`): 402 `card_declined`,
 *   `decline_code: "insufficient_funds"`.
 * - 4000 0000 0000 0341 (`pm_card_chargeCustomerFail`): attaches to a customer, then every charge
 *   fails 402 `card_declined`, `decline_code: "generic_decline"`.
 * - SEPA Direct Debit, IBAN DE89 3704 0044 0532 0130 00: a `sepa_debit` PaymentMethod (Checkout's
 *   setup mode offers it when no payment_method_types are given); its PaymentIntent answers
 *   `processing`, then succeeds. IBAN DE62 3704 0044 0532 0130 01: `processing`, then fails
 *   (`requires_payment_method`, `payment_intent.payment_failed`). Stripe settles them within
 *   minutes; the fake when the test says so (fake.settleDebit).
 */

export type Outcome = "succeed" | "authenticate" | "insufficient_funds" | "generic_decline" | "debit_succeeds" | "debit_fails";

export interface TestCard {
  token: string;
  number: string;
  /** sepa_debit: a bank account (`number` its IBAN), not a card. */
  brand: "visa" | "mastercard" | "sepa_debit";
  last4: string;
  outcome: Outcome;
}

export const TEST_CARDS: readonly TestCard[] = [
  { token: "pm_card_visa", number: "4242424242424242", brand: "visa", last4: "4242", outcome: "succeed" },
  { token: "pm_card_mastercard", number: "5555555555554444", brand: "mastercard", last4: "4444", outcome: "succeed" },
  { token: "pm_card_authenticationRequiredOnSetup", number: "4000002500003155", brand: "visa", last4: "3155", outcome: "authenticate" },
  { token: "pm_card_authenticationRequired", number: "4000002760003184", brand: "visa", last4: "3184", outcome: "authenticate" },
  { token: "pm_card_chargeDeclinedInsufficientFunds", number: "4000000000009995", brand: "visa", last4: "9995", outcome: "insufficient_funds" },
  { token: "pm_card_chargeCustomerFail", number: "4000000000000341", brand: "visa", last4: "0341", outcome: "generic_decline" },
  { token: "pm_sepa_debit_succeeds", number: "DE89370400440532013000", brand: "sepa_debit", last4: "3000", outcome: "debit_succeeds" },
  { token: "pm_sepa_debit_fails", number: "DE62370400440532013001", brand: "sepa_debit", last4: "3001", outcome: "debit_fails" },
];

/** The test card named by its token (`pm_card_visa`), its number (spaces allowed) or its last four digits. */
export function testCard(name: string): TestCard {
  const n = name.replace(/[\s-]/g, "");
  const card = TEST_CARDS.find((c) => c.token === n || c.number === n || c.last4 === n);
  if (!card) throw new Error(`fake stripe: unknown test card ${JSON.stringify(name)} (known: ${TEST_CARDS.map((c) => c.token).join(", ")})`);
  return card;
}

/** The test card of a token, if `name` is one (`pm_card_…`). */
export function cardToken(name: string): TestCard | undefined {
  return TEST_CARDS.find((c) => c.token === name);
}
