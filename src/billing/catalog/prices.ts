/**
 * Price rules (DESIGN §5, §13): one shape per price type, amounts ≥ 0 in an active ISO 4217
 * currency, package units ≥ 1; tiered and percentage prices in tiered-prices.ts.
 */
import type { Violations } from "../errors.js";
import { type Decimal, ZERO, dec } from "../money.js";
import { checkAmount } from "./amounts.js";
import { checkPercentage, checkTiered } from "./tiered-prices.js";
import type { Money, Price, PriceInput } from "./types.js";

export { checkAmount };

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

/** The price types, and which of the kind-specific fields each may carry. */
const PRICE_TYPES = ["flat", "package", "tiered", "percentage"] as const;
type PriceType = (typeof PRICE_TYPES)[number];

/**
 * Fields a price of `type` must not carry (DESIGN §13): each kind has its own fields, and a
 * field of another kind is a mistake worth a 400 rather than silently ignored. `tiers: []` is
 * what every client sends for "no tiers", so only a non-empty list counts.
 */
function checkForeignFields(input: PriceInput, type: PriceType, v: Violations): void {
  const present = {
    amount: input.amount !== undefined,
    package_units: input.packageUnits !== undefined,
    rounding_behavior: input.roundingBehavior !== undefined,
    tiers_mode: input.tiersMode !== undefined && input.tiersMode !== "",
    tiers: (input.tiers ?? []).length > 0,
    percent: input.percent !== undefined && input.percent !== "",
    fixed_amount_per_event: input.fixedAmountPerEvent !== undefined,
  };
  const owner: Record<keyof typeof present, PriceType[]> = {
    amount: ["flat", "package"],
    package_units: ["package"],
    rounding_behavior: ["package"],
    tiers_mode: ["tiered"],
    tiers: ["tiered"],
    percent: ["percentage"],
    fixed_amount_per_event: ["percentage"],
  };
  for (const [field, is] of Object.entries(present) as [keyof typeof present, boolean][]) {
    if (!is || owner[field].includes(type)) continue;
    v.add(field, field === "amount" ? `is not used by ${type} prices` : `is only for ${owner[field].join(" and ")} prices`);
  }
}

/**
 * Checks a price at path `v`; returns it when valid. An empty `price_type` means flat, or
 * package when package fields are given (as before tiers existed). A percentage price's
 * currency is its `fixed_amount_per_event`'s, or "" when it has none: the rate card's other
 * prices name it (checkRates resolves it once every price is read).
 */
export function checkPrice(input: PriceInput | undefined, v: Violations): Price | undefined {
  if (!input) {
    v.add("", "is required");
    return undefined;
  }
  const looksPackage = input.packageUnits !== undefined || input.roundingBehavior !== undefined;
  const type = input.priceType === "" ? (looksPackage ? "package" : "flat") : input.priceType;
  if (!PRICE_TYPES.includes(type as PriceType)) {
    v.add("price_type", "must be flat, package, tiered or percentage");
    return undefined;
  }
  checkForeignFields(input, type as PriceType, v);
  if (type === "tiered") return checkTiered(input, v);
  if (type === "percentage") return checkPercentage(input, v);
  const amount = checkAmount(input.amount, v.at("amount"));
  if (type === "flat") return amount && !looksPackage ? { kind: "flat", amount } : undefined;
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
