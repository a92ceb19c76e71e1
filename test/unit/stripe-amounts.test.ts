/**
 * Amounts between this service's ISO 4217 minor units (src/billing/currencies.ts) and Stripe's API
 * units (src/providers/stripe/amounts.ts, https://docs.stripe.com/currencies), golden cases with
 * the arithmetic beside each: exact both ways, and an amount Stripe cannot take in its currency
 * refused, never rounded.
 */
import test from "ava";
import { currencyExponent } from "../../src/billing/currencies.js";
import { UnrepresentableAmount, fromStripeAmount, toStripeAmount } from "../../src/providers/stripe/amounts.js";

// [currency, ISO digits, service amount, Stripe amount, the arithmetic]
const EXACT: [string, number, string, number, string][] = [
  ["USD", 2, "4900", 4900, "49.00 USD: ISO 2 digits, Stripe 2 → 4900 × 1"],
  ["EUR", 2, "1", 1, "0.01 EUR: 1 × 1"],
  ["JPY", 0, "500", 500, "¥500: ISO 0, Stripe zero-decimal → 500 × 1"],
  ["KRW", 0, "15000", 15000, "₩15,000: ISO 0, Stripe 0 → 15000 × 1"],
  ["UGX", 0, "3700", 3700, "3,700 UGX: ISO 0, Stripe zero-decimal → 3700 × 1"],
  ["ISK", 0, "5000", 500000, "5,000 ISK: ISO 0, Stripe two-decimal → 5000 × 100 = 500000"],
  ["ISK", 0, "1", 100, "1 ISK: 1 × 100 = 100 (a multiple of 100, as Stripe requires)"],
  ["MGA", 2, "150000", 1500, "1,500.00 MGA: ISO 2, Stripe zero-decimal → 150000 ÷ 100 = 1500"],
  ["MGA", 2, "100", 1, "1.00 MGA: 100 ÷ 100 = 1"],
  ["KWD", 3, "5120", 5120, "5.120 KWD: ISO 3, Stripe 3 with last digit 0 → 5120 × 1"],
  ["BHD", 3, "10", 10, "0.010 BHD: 10 × 1, ends in 0"],
  ["JOD", 3, "1000", 1000, "1.000 JOD: 1000 × 1"],
  ["OMR", 3, "250", 250, "0.250 OMR: 250 × 1"],
  ["TND", 3, "999990", 999990, "999.990 TND: 999990 × 1"],
  ["HUF", 2, "12345", 12345, "123.45 HUF: ISO 2, Stripe two-decimal for charges (whole forints only for payouts) → 12345 × 1"],
  ["TWD", 2, "101", 101, "1.01 TWD: as HUF → 101 × 1"],
  ["IQD", 3, "2000", 200, "2.000 IQD: ISO 3, Stripe's default two-decimal → 2000 ÷ 10 = 200"],
  ["usd", 2, "4900", 4900, "lower case as Stripe writes it: 4900 × 1"],
];

for (const [currency, iso, ours, stripe, arithmetic] of EXACT) {
  test(`${currency} ${ours} ⇄ Stripe ${stripe} (${arithmetic})`, (t) => {
    t.is(currencyExponent(currency), iso, "the service's ISO digits");
    t.is(toStripeAmount(ours, currency), stripe);
    t.is(fromStripeAmount(stripe, currency), ours);
    t.is(fromStripeAmount(String(stripe), currency.toLowerCase()), ours, "read back as Stripe answers it (lower case)");
  });
}

// [currency, service amount, the reason Stripe cannot take it, the message]
const REFUSED: [string, string, string, string][] = [
  ["MGA", "1", "0.01 MGA: 1 ÷ 100 = 0.01, not a whole ariary", "Stripe cannot take 0.01 MGA: its MGA amounts are whole multiples of 1 MGA."],
  ["MGA", "150050", "1,500.50 MGA: 150050 ÷ 100 = 1500.5", "Stripe cannot take 1500.50 MGA: its MGA amounts are whole multiples of 1 MGA."],
  ["KWD", "5124", "5.124 KWD: last digit 4, not 0", "Stripe cannot take 5.124 KWD: its KWD amounts are whole multiples of 0.010 KWD."],
  ["KWD", "1", "0.001 KWD: last digit 1", "Stripe cannot take 0.001 KWD: its KWD amounts are whole multiples of 0.010 KWD."],
  ["TND", "15", "0.015 TND: last digit 5", "Stripe cannot take 0.015 TND: its TND amounts are whole multiples of 0.010 TND."],
  ["IQD", "2005", "2.005 IQD: 2005 ÷ 10 = 200.5", "Stripe cannot take 2.005 IQD: its IQD amounts are whole multiples of 0.01 IQD."],
];

for (const [currency, ours, reason, message] of REFUSED) {
  test(`${currency} ${ours} is refused, not rounded (${reason})`, (t) => {
    const err = t.throws(() => toStripeAmount(ours, currency), { instanceOf: UnrepresentableAmount });
    t.is(err?.message, message);
    t.is((err as UnrepresentableAmount).code, "amount_not_representable");
  });
}

test("not a positive whole number of minor units: an error, not an unrepresentable amount", (t) => {
  for (const bad of ["49.5", "-1", "0", "1e3", "", "99999999999999999999"]) {
    const err = t.throws(() => toStripeAmount(bad, "USD"), undefined, bad);
    t.false(err instanceof UnrepresentableAmount, bad);
  }
});

test("an amount read back that is not exact in the service's unit is not Stripe's: an error", (t) => {
  // 150 at Stripe in ISK is 1.50 ISK: ISO has no øre (150 ÷ 100 = 1.5).
  t.throws(() => fromStripeAmount(150, "ISK"));
  t.throws(() => fromStripeAmount("12.5", "USD"));
  // A refund of nothing reads back as nothing: 0 × 1.
  t.is(fromStripeAmount(0, "USD"), "0");
});
