/** Amounts as they come off the wire (DESIGN §5, §13): an active ISO 4217 code and a value ≥ 0. */
import { isCurrency } from "../currencies.js";
import type { Violations } from "../errors.js";
import { formatDecimal, parseDecimal, storageProblem } from "../money.js";
import type { Money } from "./types.js";

const CURRENCY = /^[A-Za-z]{3}$/;

/**
 * An amount: an active ISO 4217 code (DESIGN §13: "XYZ" is refused, lower case is accepted and
 * upper-cased) and a value ≥ 0 within the input limits.
 */
export function checkAmount(input: { currencyCode: string; value: string } | undefined, v: Violations): Money | undefined {
  if (!input) {
    v.add("", "is required");
    return undefined;
  }
  let ok = true;
  const code = input.currencyCode.toUpperCase();
  if (!CURRENCY.test(input.currencyCode) || !isCurrency(code)) {
    v.add("currency_code", input.currencyCode === "" ? "is required" : "must be an active ISO 4217 currency code");
    ok = false;
  }
  const d = input.value === "" ? undefined : parseDecimal(input.value);
  if (input.value === "") {
    v.add("value", "is required");
    ok = false;
  } else if (!d) {
    v.add("value", "must be a decimal number");
    ok = false;
  } else if (d.isNegative() && !d.isZero()) {
    v.add("value", "must be at least 0");
    ok = false;
  } else {
    const problem = storageProblem(d);
    if (problem) {
      v.add("value", problem);
      ok = false;
    }
  }
  return ok && d ? { currency: code, value: formatDecimal(d) } : undefined;
}
