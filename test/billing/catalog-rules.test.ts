/**
 * Catalog rules (DESIGN §5), table-driven over the pure checker: each row breaks one rule of a
 * valid card and names the field paths it must be reported at.
 */
import test from "ava";
import { chargedRates, offeredAddOns } from "../../src/billing/catalog/addons.js";
import { checkRates } from "../../src/billing/catalog/rates.js";
import type { CatalogRate, PricingMetric, RateCard, RatesInput } from "../../src/billing/catalog/types.js";
import { Violations } from "../../src/billing/errors.js";

const metric: PricingMetric = {
  id: "pm_tokens",
  environmentId: "env",
  eventName: "tokens",
  name: "Tokens",
  unit: "token",
  dimensions: ["region", "model"],
  aggregation: { type: "sum", valueField: "n" },
  createdAt: new Date(0),
  archivedAt: null,
};
const metrics = new Map([[metric.id, metric]]);

const usd = (value: string) => ({ currencyCode: "USD", value });

function validCard(): RatesInput {
  return {
    fixedRates: [{ code: "seats", name: "Seats", description: "", price: { priceType: "", amount: usd("2000") } }],
    usageBasedRates: [
      {
        code: "tokens",
        name: "Tokens",
        description: "",
        pricingMetricId: "pm_tokens",
        includedUnits: 1000,
        usageBasedRateType: "simple",
        price: { priceType: "package", amount: usd("10"), packageUnits: 1000, roundingBehavior: "round_up" },
        dimensions: [],
      },
      {
        code: "by_region",
        name: "Tokens by region",
        description: "",
        pricingMetricId: "pm_tokens",
        includedUnits: 0,
        usageBasedRateType: "dimensional",
        dimensions: [{ key: "region", values: ["eu", "us"], description: "" }],
        pricingMatrix: {
          cells: [
            { dimensionCoordinates: { region: "eu" }, price: { priceType: "", amount: usd("2") } },
            { dimensionCoordinates: { region: "us" }, price: { priceType: "", amount: usd("1") } },
          ],
        },
      },
    ],
  };
}

function violations(input: RatesInput, extra: { takenCodes?: Set<string>; currency?: string } = {}): string[] {
  const v = new Violations();
  checkRates(input, { metrics, owner: "rate card", ...extra }, v);
  try {
    v.throwIfAny();
    return [];
  } catch (err) {
    return (err as { violations: { field: string }[] }).violations.map((x) => x.field);
  }
}

test("the valid card has no violations, and its currency is USD", (t) => {
  t.deepEqual(violations(validCard()), []);
  const v = new Violations();
  const set = checkRates(validCard(), { metrics, owner: "rate card" }, v);
  t.is(set.currency, "USD");
  t.is(set.fixed.length, 1);
  t.is(set.usage.length, 2);
});

const rules: [string, (c: RatesInput) => void, string[], { takenCodes?: Set<string>; currency?: string }?][] = [
  ["duplicate codes across fixed and usage rates", (c) => void (c.usageBasedRates[0]!.code = "seats"), ["usage_based_rates[0].code"]],
  ["duplicate codes within fixed rates", (c) => c.fixedRates.push({ ...c.fixedRates[0]! }), ["fixed_rates[1].code"]],
  ["a code taken in the catalog for the interval", (c) => void (c.fixedRates[0]!.code = "old"), ["fixed_rates[0].code"], { takenCodes: new Set(["old"]) }],
  ["an empty code", (c) => void (c.fixedRates[0]!.code = ""), ["fixed_rates[0].code"]],
  ["mixed currencies", (c) => void (c.usageBasedRates[1]!.pricingMatrix!.cells[1]!.price!.amount!.currencyCode = "EUR"), ["usage_based_rates[1].pricing_matrix.cells[1].price.amount.currency_code"]],
  [
    "a currency other than the catalog's",
    (c) => c,
    [
      "fixed_rates[0].price.amount.currency_code",
      "usage_based_rates[0].price.amount.currency_code",
      "usage_based_rates[1].pricing_matrix.cells[0].price.amount.currency_code",
      "usage_based_rates[1].pricing_matrix.cells[1].price.amount.currency_code",
    ],
    { currency: "EUR" },
  ],
  ["a bad currency code", (c) => void (c.fixedRates[0]!.price!.amount!.currencyCode = "US"), ["fixed_rates[0].price.amount.currency_code"]],
  ["package without package_units", (c) => void (c.usageBasedRates[0]!.price!.packageUnits = undefined), ["usage_based_rates[0].price.package_units"]],
  ["package without rounding_behavior", (c) => void (c.usageBasedRates[0]!.price!.roundingBehavior = undefined), ["usage_based_rates[0].price.rounding_behavior"]],
  ["package with an unknown rounding_behavior", (c) => void (c.usageBasedRates[0]!.price!.roundingBehavior = "nearest"), ["usage_based_rates[0].price.rounding_behavior"]],
  ["package_units 0", (c) => void (c.usageBasedRates[0]!.price!.packageUnits = 0), ["usage_based_rates[0].price.package_units"]],
  ["package_units 0.5", (c) => void (c.usageBasedRates[0]!.price!.packageUnits = 0.5), ["usage_based_rates[0].price.package_units"]],
  ["package fields on a flat price", (c) => void Object.assign(c.fixedRates[0]!.price!, { priceType: "flat", packageUnits: 10 }), ["fixed_rates[0].price.package_units"]],
  ["an unknown price_type", (c) => void (c.fixedRates[0]!.price!.priceType = "tiered"), ["fixed_rates[0].price.price_type"]],
  ["a negative flat amount", (c) => void (c.fixedRates[0]!.price!.amount = usd("-0.01")), ["fixed_rates[0].price.amount.value"]],
  ["a negative package amount", (c) => void (c.usageBasedRates[0]!.price!.amount = usd("-1")), ["usage_based_rates[0].price.amount.value"]],
  ["an amount that is not a number", (c) => void (c.fixedRates[0]!.price!.amount = usd("ten")), ["fixed_rates[0].price.amount.value"]],
  ["an amount with 13 decimal places", (c) => void (c.fixedRates[0]!.price!.amount = usd("0.0000000000001")), ["fixed_rates[0].price.amount.value"]],
  ["a missing price", (c) => void (c.fixedRates[0]!.price = undefined), ["fixed_rates[0].price"]],
  ["a missing amount", (c) => void (c.fixedRates[0]!.price!.amount = undefined), ["fixed_rates[0].price.amount"]],
  ["negative included_units", (c) => void (c.usageBasedRates[0]!.includedUnits = -1), ["usage_based_rates[0].included_units"]],
  ["fractional included_units", (c) => void (c.usageBasedRates[0]!.includedUnits = 1.5), ["usage_based_rates[0].included_units"]],
  ["a usage rate without usage_based_rate_type", (c) => void (c.usageBasedRates[0]!.usageBasedRateType = ""), ["usage_based_rates[0].usage_based_rate_type"]],
  ["an unknown usage_based_rate_type", (c) => void (c.usageBasedRates[0]!.usageBasedRateType = "tiered"), ["usage_based_rates[0].usage_based_rate_type"]],
  ["an unknown pricing_metric_id", (c) => void (c.usageBasedRates[0]!.pricingMetricId = "pm_other_env"), ["usage_based_rates[0].pricing_metric_id"]],
  ["a missing pricing_metric_id", (c) => void (c.usageBasedRates[0]!.pricingMetricId = ""), ["usage_based_rates[0].pricing_metric_id"]],
  ["a missing name", (c) => void (c.fixedRates[0]!.name = " "), ["fixed_rates[0].name"]],
  ["dimensions on a simple rate", (c) => void (c.usageBasedRates[0]!.dimensions = [{ key: "region", values: ["eu"], description: "" }]), ["usage_based_rates[0].dimensions"]],
  [
    "a matrix cell with an unknown key",
    (c) => void (c.usageBasedRates[1]!.pricingMatrix!.cells[0]!.dimensionCoordinates.shape = "x"),
    ["usage_based_rates[1].pricing_matrix.cells[0].dimension_coordinates.shape"],
  ],
  [
    "a matrix cell with an unknown value",
    (c) => void (c.usageBasedRates[1]!.pricingMatrix!.cells[0]!.dimensionCoordinates.region = "mars"),
    ["usage_based_rates[1].pricing_matrix.cells[0].dimension_coordinates.region"],
  ],
  [
    "a matrix cell missing a key",
    (c) => void delete c.usageBasedRates[1]!.pricingMatrix!.cells[0]!.dimensionCoordinates.region,
    ["usage_based_rates[1].pricing_matrix.cells[0].dimension_coordinates.region"],
  ],
  ["duplicate coordinates", (c) => void (c.usageBasedRates[1]!.pricingMatrix!.cells[1]!.dimensionCoordinates.region = "eu"), ["usage_based_rates[1].pricing_matrix.cells[1].dimension_coordinates"]],
  [
    "a dimension its metric does not have",
    (c) => void (c.usageBasedRates[1]!.dimensions[0]!.key = "color"),
    [
      "usage_based_rates[1].dimensions[0].key",
      "usage_based_rates[1].pricing_matrix.cells[0].dimension_coordinates.region",
      "usage_based_rates[1].pricing_matrix.cells[1].dimension_coordinates.region",
      "usage_based_rates[1].pricing_matrix.cells[0].dimension_coordinates.color",
      "usage_based_rates[1].pricing_matrix.cells[1].dimension_coordinates.color",
    ],
  ],
  ["a duplicate dimension key", (c) => c.usageBasedRates[1]!.dimensions.push({ key: "region", values: ["eu"], description: "" }), ["usage_based_rates[1].dimensions[1].key"]],
  [
    "a dimension without values",
    (c) => void (c.usageBasedRates[1]!.dimensions[0]!.values = []),
    [
      "usage_based_rates[1].dimensions[0].values",
      "usage_based_rates[1].pricing_matrix.cells[0].dimension_coordinates.region",
      "usage_based_rates[1].pricing_matrix.cells[1].dimension_coordinates.region",
    ],
  ],
  ["a duplicate dimension value", (c) => void c.usageBasedRates[1]!.dimensions[0]!.values.push("eu"), ["usage_based_rates[1].dimensions[0].values[2]"]],
  [
    "a dimensional rate without dimensions",
    (c) => void (c.usageBasedRates[1]!.dimensions = []),
    ["usage_based_rates[1].dimensions", "usage_based_rates[1].pricing_matrix.cells[0].dimension_coordinates.region", "usage_based_rates[1].pricing_matrix.cells[1].dimension_coordinates.region"],
  ],
  ["a dimensional rate without cells", (c) => void (c.usageBasedRates[1]!.pricingMatrix = undefined), ["usage_based_rates[1].pricing_matrix.cells"]],
  ["a price on a dimensional rate", (c) => void (c.usageBasedRates[1]!.price = { priceType: "", amount: usd("1") }), ["usage_based_rates[1].price"]],
];

for (const [title, mutate, fields, extra] of rules) {
  test(`rule: ${title}`, (t) => {
    const card = validCard();
    mutate(card);
    t.deepEqual(violations(card, extra).sort(), [...fields].sort());
  });
}

test("a combination without a cell is allowed (billed at zero)", (t) => {
  const card = validCard();
  card.usageBasedRates[1]!.dimensions.push({ key: "model", values: ["small", "large"], description: "" });
  for (const cell of card.usageBasedRates[1]!.pricingMatrix!.cells) cell.dimensionCoordinates.model = "small";
  t.deepEqual(violations(card), []);
});

// ---- catalog add-ons ----

const card: RateCard = {
  id: "rc_1",
  environmentId: "env",
  name: "Pro",
  description: null,
  billingInterval: "monthly",
  metadata: {},
  rateCatalogId: "rcat_1",
  fixedRates: [{ id: "r1", code: "seats", name: "Seats", description: null, price: { kind: "flat", amount: { currency: "USD", value: "100" } } }],
  usageRates: [],
  currency: "USD",
  createdAt: new Date(0),
  updatedAt: new Date(0),
  archivedAt: null,
};
const flat = { kind: "flat" as const, amount: { currency: "USD", value: "5" } };
const catalogRates: CatalogRate[] = [
  { id: "c1", catalogId: "rcat_1", interval: "monthly", type: "fixed", rate: { id: "c1", code: "support", name: "Support", description: null, price: flat } },
  { id: "c2", catalogId: "rcat_1", interval: "yearly", type: "fixed", rate: { id: "c2", code: "support_y", name: "Support", description: null, price: flat } },
  { id: "c3", catalogId: "rcat_1", interval: "monthly", type: "fixed", rate: { id: "c3", code: "seats", name: "Catalog seats", description: null, price: flat } },
  {
    id: "c4",
    catalogId: "rcat_1",
    interval: "monthly",
    type: "usage_based",
    rate: { id: "c4", code: "api", name: "API", description: null, pricingMetricId: "pm", includedUnits: "0", minimumAmount: null, maximumAmount: null, type: "simple", price: flat },
  },
];

test("add-ons: the catalog's rates of the card's interval whose codes the card does not use", (t) => {
  t.deepEqual(
    offeredAddOns(card, catalogRates).map((r) => r.id),
    ["c1", "c4"],
  );
});

const addOnCases: [Record<string, string>, string[], string[]][] = [
  [{}, ["seats"], []],
  [{ support: "0" }, ["seats"], []],
  [{ support: "0.5" }, ["seats"], []],
  [{ support: "1" }, ["seats", "support"], []],
  [{ support: "3", api: "1" }, ["seats", "support"], ["api"]],
  [{ support_y: "5" }, ["seats"], []],
];
for (const [quantities, fixed, usage] of addOnCases) {
  test(`add-ons charged for quantities ${JSON.stringify(quantities)}`, (t) => {
    const charged = chargedRates(card, catalogRates, quantities);
    t.deepEqual(
      charged.fixed.map((r) => r.code),
      fixed,
    );
    t.deepEqual(
      charged.usage.map((r) => r.code),
      usage,
    );
    t.is(charged.fixed.find((r) => r.code === "seats")?.id, "r1", "the card's own rate wins over the catalog's");
  });
}
