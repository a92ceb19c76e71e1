/**
 * Exact decimal arithmetic for money and usage (DESIGN §6). The only module that imports the
 * decimal library; everything else uses these helpers, so the library can be swapped.
 */
import DecimalDefault from "decimal.js";
import type { Decimal as DecimalClass } from "decimal.js";
import { currencyExponent } from "./currencies.js";

// decimal.js ships CommonJS-style typings; under NodeNext its default import is the class itself.
const Base = DecimalDefault as unknown as typeof DecimalClass;
/**
 * A private, isolated Decimal constructor, half-up rounding. 100 significant digits: every sum
 * the service stores (65 digits, below) and every product of accepted inputs is computed exactly.
 */
const D = Base.clone({ precision: 100, rounding: Base.ROUND_HALF_UP, toExpNeg: -40, toExpPos: 100 });
export type Decimal = DecimalClass;

/** Digits kept after the point, in every input and every stored decimal (DECIMAL(…,12)). */
export const SCALE = 12;
/**
 * Digits allowed before the point in an input value (event values, prices, quantities,
 * multipliers, included units): DESIGN §6. Single values are stored in DECIMAL(38,12).
 */
export const INTEGER_DIGITS = 20;
/**
 * Digits a stored sum can have before the point: usage totals, invoice lines and totals are
 * DECIMAL(65,12). Usage totals of accepted values cannot reach it (it takes 10^33 events at the
 * largest value); an invoice line can, in theory, when usage, price and multiplier are all near
 * their limits — such an amount is refused by `amountProblem` before anything is written.
 */
export const SUM_INTEGER_DIGITS = 53;

const DECIMAL_TEXT = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/**
 * Parses a decimal written as text (a JSON number's literal or a string). Returns undefined for
 * anything that is not a finite decimal number ("abc", "", "NaN", "Infinity", "1,5").
 */
export function parseDecimal(text: string): Decimal | undefined {
  const t = text.trim();
  if (!DECIMAL_TEXT.test(t)) return undefined;
  return new D(t);
}

const INTEGER_LIMIT = new D(10).pow(INTEGER_DIGITS);
const SUM_LIMIT = new D(10).pow(SUM_INTEGER_DIGITS);

/** Why a decimal is outside the input limits (20 digits before the point, 12 after), or undefined. */
export function storageProblem(d: Decimal): string | undefined {
  if (d.decimalPlaces() > SCALE) return `must have at most ${SCALE} digits after the decimal point`;
  if (d.abs().gte(INTEGER_LIMIT)) return `must have at most ${INTEGER_DIGITS} digits before the decimal point`;
  return undefined;
}

const UNIT_LIMIT = new D(10).pow(INTEGER_DIGITS);

/**
 * Why a usage rate's price × multiplier is too large to bill safely, or undefined: below 10^20
 * smallest units per unit (or per package), any usage total below 10^33 — more than 10^13 events
 * at the largest value — prices to less than the 53 digits an invoice line holds.
 */
export function unitAmountProblem(d: Decimal): string | undefined {
  return d.abs().gte(UNIT_LIMIT) ? `must be below 10^${INTEGER_DIGITS} smallest units per unit (price × multiplier)` : undefined;
}

/** Why a computed sum or amount cannot be stored (more than 53 digits before the point), or undefined. */
export function amountProblem(d: Decimal): string | undefined {
  return d.abs().gte(SUM_LIMIT) ? `has more than ${SUM_INTEGER_DIGITS} digits before the decimal point, more than an invoice can hold` : undefined;
}

/** Canonical text: no exponent, no trailing zeros after the point, "-0" becomes "0". */
export function formatDecimal(d: Decimal): string {
  if (d.isZero()) return "0";
  return d.toFixed();
}

/** Canonical text of a stored value, e.g. MySQL's "1.500000000000" becomes "1.5". */
export function canonicalDecimal(text: string): string {
  const d = parseDecimal(text);
  if (d === undefined) throw new Error(`not a decimal: ${text}`);
  return formatDecimal(d);
}

export function dec(value: string | number): Decimal {
  if (typeof value === "number" && !Number.isInteger(value)) {
    throw new Error("decimals are never built from fractional JS numbers");
  }
  return new D(value);
}

export const ZERO = new D(0);

export function sum(values: Iterable<Decimal>): Decimal {
  let acc = ZERO;
  for (const v of values) acc = acc.plus(v);
  return acc;
}

/** Rounds to whole smallest currency units, half-up (away from zero on a tie), once per line. */
export function roundAmount(d: Decimal): Decimal {
  return d.toDecimalPlaces(0, D.ROUND_HALF_UP);
}

/** An amount in smallest units shown in major units for people: "12345" USD → "USD 123.45". */
export function displayMoney(minor: string, currency: string): string {
  const exp = currencyExponent(currency);
  const major = new D(minor).div(new D(10).pow(exp));
  const places = Math.max(exp, major.decimalPlaces());
  return `${currency.toUpperCase()} ${major.toFixed(places)}`;
}
