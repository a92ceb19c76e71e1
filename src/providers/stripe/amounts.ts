/**
 * Amounts between this service and Stripe (DESIGN §13, §16). The service keeps every amount in
 * the ISO 4217 minor unit of its currency (billing/currencies.ts: JPY 0 digits, USD 2, KWD 3);
 * Stripe's API takes and answers amounts in its own unit per currency, which is not always ISO's
 * (https://docs.stripe.com/currencies):
 *
 * - zero-decimal (BIF CLP DJF GNF JPY KMF KRW MGA PYG RWF UGX VND VUV XAF XOF XPF): whole units.
 *   All ISO 0 but MGA (ISO 2): 1 MGA is 100 in the service and 1 at Stripe.
 * - three-decimal (BHD JOD KWD OMR TND): thousandths, as ISO, but the last digit must be 0
 *   (Stripe's payment partners settle hundredths): 5.120 KWD is 5120; 5.124 KWD cannot be sent.
 * - ISK: zero-decimal in ISO, but Stripe's API keeps it two-decimal for compatibility, in whole
 *   krónur only: 5 ISK is 5 in the service and 500 at Stripe.
 * - every other currency (HUF and TWD included: their whole-unit rule is Stripe's for payouts
 *   only): two decimals. A currency ISO gives more digits than Stripe takes (IQD, LYD, CLF, UYW)
 *   converts as MGA does, exactly or not at all.
 *
 * The conversion is exact, on integers (BigInt), never floats. An amount Stripe cannot take in
 * its currency (1 MGA cent, 5.124 KWD) is refused (UnrepresentableAmount), never rounded into a
 * different charge or refund.
 */
import { currencyExponent } from "../../billing/currencies.js";

const ZERO_DECIMAL = new Set(["BIF", "CLP", "DJF", "GNF", "JPY", "KMF", "KRW", "MGA", "PYG", "RWF", "UGX", "VND", "VUV", "XAF", "XOF", "XPF"]);
const THREE_DECIMAL = new Set(["BHD", "JOD", "KWD", "OMR", "TND"]);

/** How Stripe's API writes amounts of a currency: its digits, and the step its amounts must be a multiple of (in its own unit). */
export interface StripeUnit {
  exponent: number;
  step: bigint;
}

/** Stripe's unit for `currency` (any case). */
export function stripeUnit(currency: string): StripeUnit {
  const c = currency.toUpperCase();
  if (ZERO_DECIMAL.has(c)) return { exponent: 0, step: 1n };
  if (THREE_DECIMAL.has(c)) return { exponent: 3, step: 10n };
  if (c === "ISK") return { exponent: 2, step: 100n };
  return { exponent: 2, step: 1n };
}

/** An amount this service holds that Stripe cannot take in its currency: refused, never rounded. */
export class UnrepresentableAmount extends Error {
  readonly code = "amount_not_representable";
  constructor(
    readonly amount: string,
    readonly currency: string,
  ) {
    const c = currency.toUpperCase();
    const { exponent, step } = stripeUnit(c);
    super(`Stripe cannot take ${major(amount, currencyExponent(c))} ${c}: its ${c} amounts are whole multiples of ${major(String(step), exponent)} ${c}.`);
    this.name = "UnrepresentableAmount";
  }
}

/** `minor` (digits) shown with `exponent` decimals: ("15", 3) → "0.015". */
function major(minor: string, exponent: number): string {
  if (exponent === 0) return minor;
  const padded = minor.padStart(exponent + 1, "0");
  return `${padded.slice(0, -exponent)}.${padded.slice(-exponent)}`;
}

/** The largest amount the `stripe` library can send as a JSON number without loss. */
const MAX = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * `amount` (this service's minor units, a positive whole number as text) as Stripe's integer for
 * `currency`. Not a positive whole number, or too large: an Error. One Stripe cannot take in that
 * currency (not a whole multiple of its step): UnrepresentableAmount.
 */
export function toStripeAmount(amount: string, currency: string): number {
  if (!/^\d+$/.test(amount) || BigInt(amount) <= 0n) throw new Error(`Stripe charges whole smallest units: ${amount} is not a positive integer`);
  const iso = currencyExponent(currency);
  const { exponent, step } = stripeUnit(currency);
  const n = BigInt(amount);
  let out: bigint;
  if (exponent >= iso) out = n * 10n ** BigInt(exponent - iso);
  else {
    const div = 10n ** BigInt(iso - exponent);
    if (n % div !== 0n) throw new UnrepresentableAmount(amount, currency);
    out = n / div;
  }
  if (out % step !== 0n) throw new UnrepresentableAmount(amount, currency);
  if (out > MAX) throw new Error(`Stripe cannot take ${amount} in ${currency}: too large`);
  return Number(out);
}

/**
 * An amount Stripe answered (its unit for `currency`, a whole number) in this service's minor
 * units, as exact decimal text. One that does not convert exactly (an ISK amount not in whole
 * krónur) is not Stripe's: an Error.
 */
export function fromStripeAmount(amount: number | string, currency: string): string {
  const text = String(amount);
  if (!/^\d+$/.test(text)) throw new Error(`Stripe answered an amount that is not a whole number: ${text}`);
  const iso = currencyExponent(currency);
  const { exponent } = stripeUnit(currency);
  const n = BigInt(text);
  if (iso >= exponent) return String(n * 10n ** BigInt(iso - exponent));
  const div = 10n ** BigInt(exponent - iso);
  if (n % div !== 0n) throw new Error(`Stripe answered ${text} in ${currency.toUpperCase()}, not a whole amount of this service's unit`);
  return String(n / div);
}
