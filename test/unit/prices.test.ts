/** Price rules (src/billing/catalog/prices.ts), table-driven: which inputs make a price, and what each refusal names. */
import test from "ava";
import { checkAmount, checkPrice, checkWhole } from "../../src/billing/catalog/prices.js";
import type { Price, PriceInput } from "../../src/billing/catalog/types.js";
import { InvalidArgumentError, Violations } from "../../src/billing/errors.js";

/** Runs a check and returns what it returned, and the violations as "field: description". */
function run<T>(check: (v: Violations) => T): { value: T; violations: string[] } {
  const v = new Violations("price");
  const value = check(v);
  try {
    v.throwIfAny();
    return { value, violations: [] };
  } catch (e) {
    if (!(e instanceof InvalidArgumentError)) throw e;
    return { value, violations: e.violations.map((x) => `${x.field}: ${x.description}`) };
  }
}

const usd = (value: string) => ({ currencyCode: "usd", value });

const priceCases: [string, PriceInput | undefined, Price | undefined, string[]][] = [
  ["flat", { priceType: "flat", amount: usd("250") }, { kind: "flat", amount: { currency: "USD", value: "250" } }, []],
  ["flat is the default type", { priceType: "", amount: usd("1.50") }, { kind: "flat", amount: { currency: "USD", value: "1.5" } }, []],
  ["zero is a price", { priceType: "flat", amount: usd("0") }, { kind: "flat", amount: { currency: "USD", value: "0" } }, []],
  [
    "package",
    { priceType: "package", amount: usd("500"), packageUnits: 100, roundingBehavior: "round_up" },
    { kind: "package", amount: { currency: "USD", value: "500" }, packageUnits: "100", rounding: "round_up" },
    [],
  ],
  [
    "package inferred from its fields",
    { priceType: "", amount: usd("500"), packageUnits: 1, roundingBehavior: "round_down" },
    { kind: "package", amount: { currency: "USD", value: "500" }, packageUnits: "1", rounding: "round_down" },
    [],
  ],
  ["missing", undefined, undefined, ["price: is required"]],
  ["no amount", { priceType: "flat" }, undefined, ["price.amount: is required"]],
  ["negative amount", { priceType: "flat", amount: usd("-1") }, undefined, ["price.amount.value: must be at least 0"]],
  ["negative zero is zero", { priceType: "flat", amount: usd("-0") }, { kind: "flat", amount: { currency: "USD", value: "0" } }, []],
  ["not a number", { priceType: "flat", amount: usd("1,5") }, undefined, ["price.amount.value: must be a decimal number"]],
  ["empty value", { priceType: "flat", amount: usd("") }, undefined, ["price.amount.value: is required"]],
  ["13 decimals", { priceType: "flat", amount: usd("0.0000000000001") }, undefined, ["price.amount.value: must have at most 12 digits after the decimal point"]],
  ["bad currency", { priceType: "flat", amount: { currencyCode: "US", value: "1" } }, undefined, ["price.amount.currency_code: must be an active ISO 4217 currency code"]],
  ["not an ISO 4217 code", { priceType: "flat", amount: { currencyCode: "XYZ", value: "1" } }, undefined, ["price.amount.currency_code: must be an active ISO 4217 currency code"]],
  ["no currency", { priceType: "flat", amount: { currencyCode: "", value: "1" } }, undefined, ["price.amount.currency_code: is required"]],
  [
    "flat with package fields",
    { priceType: "flat", amount: usd("1"), packageUnits: 10, roundingBehavior: "round_up" },
    undefined,
    ["price.package_units: is only for package prices", "price.rounding_behavior: is only for package prices"],
  ],
  [
    "package without its fields",
    { priceType: "package", amount: usd("1") },
    undefined,
    ["price.package_units: is required for a package price", "price.rounding_behavior: is required for a package price: round_up or round_down"],
  ],
  ["package of zero units", { priceType: "package", amount: usd("1"), packageUnits: 0, roundingBehavior: "round_up" }, undefined, ["price.package_units: must be at least 1"]],
  ["package of 1.5 units", { priceType: "package", amount: usd("1"), packageUnits: 1.5, roundingBehavior: "round_up" }, undefined, ["price.package_units: must be a whole number"]],
  ["package, unknown rounding", { priceType: "package", amount: usd("1"), packageUnits: 2, roundingBehavior: "nearest" }, undefined, ["price.rounding_behavior: must be round_up or round_down"]],
  ["unknown type", { priceType: "graduated", amount: usd("1") }, undefined, ["price.price_type: must be flat, package, tiered or percentage"]],
];
for (const [name, input, want, violations] of priceCases) {
  test(`checkPrice: ${name}`, (t) => {
    const got = run((v) => checkPrice(input, v));
    t.deepEqual(got.value, want);
    t.deepEqual(got.violations, violations);
  });
}

const wholeCases: [number, number, string | undefined, string[]][] = [
  [1, 1, "1", []],
  [0, 0, "0", []],
  [Number.MAX_SAFE_INTEGER, 1, String(Number.MAX_SAFE_INTEGER), []],
  [Number.MAX_SAFE_INTEGER + 1, 1, undefined, [`price.n: must be at most ${Number.MAX_SAFE_INTEGER}`]],
  [0, 1, undefined, ["price.n: must be at least 1"]],
  [2.5, 1, undefined, ["price.n: must be a whole number"]],
  [Number.NaN, 1, undefined, ["price.n: must be a whole number"]],
  [Number.POSITIVE_INFINITY, 1, undefined, ["price.n: must be a whole number"]],
];
for (const [value, min, want, violations] of wholeCases) {
  test(`checkWhole(${value}, min ${min})`, (t) => {
    const got = run((v) => checkWhole(value, min, v, "n"));
    t.is(got.value, want);
    t.deepEqual(got.violations, violations);
  });
}

test("checkAmount upper-cases the currency and writes the value canonically", (t) => {
  const got = run((v) => checkAmount({ currencyCode: "eur", value: "0012.3400" }, v));
  t.deepEqual(got, { value: { currency: "EUR", value: "12.34" }, violations: [] });
});

test("checkAmount refuses 21 digits before the point", (t) => {
  const got = run((v) => checkAmount({ currencyCode: "EUR", value: "1".repeat(21) }, v));
  t.is(got.value, undefined);
  t.deepEqual(got.violations, ["price.value: must have at most 20 digits before the decimal point"]);
});
