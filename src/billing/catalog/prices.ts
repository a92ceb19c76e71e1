/** Price rules (DESIGN §5): one shape per price type, amounts ≥ 0, package units ≥ 1. */
import type { Violations } from "../errors.js";
import { type Decimal, ZERO, dec, formatDecimal, parseDecimal, storageProblem } from "../money.js";
import type { Money, Price, PriceInput } from "./types.js";

const CURRENCY = /^[A-Za-z]{3}$/;
export const MAX_WHOLE = Number.MAX_SAFE_INTEGER;

/** A whole number in a double field: at least `min`, at most 2^53 - 1. */
export function checkWhole(value: number, min: number, v: Violations, field: string): string | undefined {
  if (!Number.isFinite(value) || !Number.isInteger(value)) {
    v.add(field, "must be a whole number");
    return undefined;
  }
  if (value < min) {
    v.add(field, `must be at least ${min}`);
    return undefined;
  }
  if (value > MAX_WHOLE) {
    v.add(field, `must be at most ${MAX_WHOLE}`);
    return undefined;
  }
  return String(value);
}

export function checkAmount(input: { currencyCode: string; value: string } | undefined, v: Violations): Money | undefined {
  if (!input) {
    v.add("", "is required");
    return undefined;
  }
  let ok = true;
  if (!CURRENCY.test(input.currencyCode)) {
    v.add("currency_code", input.currencyCode === "" ? "is required" : "must be a three-letter ISO 4217 code");
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
  return ok && d ? { currency: input.currencyCode.toUpperCase(), value: formatDecimal(d) } : undefined;
}

/** Checks a price at path `v`; returns it when valid. */
export function checkPrice(input: PriceInput | undefined, v: Violations): Price | undefined {
  if (!input) {
    v.add("", "is required");
    return undefined;
  }
  const looksPackage = input.packageUnits !== undefined || input.roundingBehavior !== undefined;
  const type = input.priceType === "" ? (looksPackage ? "package" : "flat") : input.priceType;
  const amount = checkAmount(input.amount, v.at("amount"));
  if (type === "flat") {
    if (input.packageUnits !== undefined) v.add("package_units", "is only for package prices");
    if (input.roundingBehavior !== undefined) v.add("rounding_behavior", "is only for package prices");
    return amount && !looksPackage ? { kind: "flat", amount } : undefined;
  }
  if (type === "package") {
    let units: string | undefined;
    if (input.packageUnits === undefined) v.add("package_units", "is required for a package price");
    else units = checkWhole(input.packageUnits, 1, v, "package_units");
    const rb = input.roundingBehavior;
    if (rb === undefined || rb === "") v.add("rounding_behavior", "is required for a package price: round_up or round_down");
    else if (rb !== "round_up" && rb !== "round_down") v.add("rounding_behavior", "must be round_up or round_down");
    if (amount && units && (rb === "round_up" || rb === "round_down")) {
      return { kind: "package", amount, packageUnits: units, rounding: rb };
    }
    return undefined;
  }
  v.add("price_type", "must be flat or package");
  return undefined;
}

/** Whether a price charges nothing whatever the quantity (every amount it has is zero). */
export function isFreePrice(p: Price): boolean {
  const zero = (m: Money | null) => m === null || dec(m.value).isZero();
  switch (p.kind) {
    case "flat":
    case "package":
      return zero(p.amount);
    case "tiered":
      return p.tiers.every((t) => zero(t.unitAmount) && zero(t.flatAmount));
    case "percentage":
      return dec(p.percent).isZero() && zero(p.fixedPerEvent);
  }
}

/** The largest amount a price charges per unit, package or event, to bound invoice lines. */
export function largestUnitAmount(p: Price): Decimal {
  const max = (xs: Decimal[]) => xs.reduce((a, b) => (b.gt(a) ? b : a), ZERO);
  switch (p.kind) {
    case "flat":
    case "package":
      return dec(p.amount.value);
    case "tiered":
      return max(p.tiers.flatMap((t) => [dec(t.unitAmount.value), dec(t.flatAmount?.value ?? "0")]));
    case "percentage":
      return max([dec(p.percent).div(100), dec(p.fixedPerEvent?.value ?? "0")]);
  }
}
