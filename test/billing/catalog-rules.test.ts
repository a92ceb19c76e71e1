/**
 * Catalog rules (DESIGN §5), table-driven over the pure checker: each row breaks one rule of a
 * valid card and names the field paths it must be reported at.
 */
import test from "ava";
import { chargedRates, offeredAddOns } from "../../src/billing/catalog/addons.js";
import { checkRates } from "../../src/billing/catalog/rates.js";
import { type CatalogRate, type Price, type PricingMetric, type RateCard, type RatesInput, priceCurrency } from "../../src/billing/catalog/types.js";
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
const counted: PricingMetric = { ...metric, id: "pm_calls", eventName: "calls", aggregation: { type: "count", valueField: null } };
const metrics = new Map([
  [metric.id, metric],
  [counted.id, counted],
]);

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

function described(input: RatesInput, extra: { takenCodes?: Set<string>; currency?: string } = {}): { field: string; description: string }[] {
  const v = new Violations();
  checkRates(input, { metrics, owner: "rate card", ...extra }, v);
  try {
    v.throwIfAny();
    return [];
  } catch (err) {
    return (err as { violations: { field: string; description: string }[] }).violations;
  }
}

function violations(input: RatesInput, extra: { takenCodes?: Set<string>; currency?: string } = {}): string[] {
  return described(input, extra).map((x) => x.field);
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
  ["an unknown price_type", (c) => void (c.fixedRates[0]!.price!.priceType = "stepped"), ["fixed_rates[0].price.price_type"]],
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

// ---- tiered and percentage prices, minimum and maximum (DESIGN §13) ----

const tier = (upTo: string | undefined, unit: string, flat?: string, currency = "USD") => ({
  upTo,
  unitAmount: { currencyCode: currency, value: unit },
  ...(flat === undefined ? {} : { flatAmount: { currencyCode: currency, value: flat } }),
});
const graduated = (...tiers: ReturnType<typeof tier>[]) => ({ priceType: "tiered", tiersMode: "graduated", tiers });
const percentage = (percent: string, fee?: string, currency = "USD") => ({
  priceType: "percentage",
  percent,
  ...(fee === undefined ? {} : { fixedAmountPerEvent: { currencyCode: currency, value: fee } }),
});
/** The simple usage rate's price (usage_based_rates[0]), with no included units. */
const usagePrice = (c: RatesInput, price: object) => {
  c.usageBasedRates[0]!.price = price as never;
  c.usageBasedRates[0]!.includedUnits = 0;
};

test("valid tiered and percentage prices, and limits, make their domain shapes", (t) => {
  const c = validCard();
  c.fixedRates[0]!.price = { ...graduated(tier("5", "1000"), tier(undefined, "800", "500")) };
  usagePrice(c, percentage("2.9", "30"));
  c.usageBasedRates[0]!.minimumAmount = usd("1000");
  c.usageBasedRates[0]!.maximumAmount = usd("1000");
  c.usageBasedRates[1]!.pricingMatrix!.cells[0]!.price = { priceType: "tiered", tiersMode: "volume", tiers: [tier("100.5", "3"), tier(undefined, "2")] };
  c.usageBasedRates[1]!.pricingMatrix!.cells[1]!.price = percentage("1.000000000001");
  const v = new Violations();
  const set = checkRates(c, { metrics, owner: "rate card" }, v);
  t.true(v.empty);
  t.deepEqual(set.fixed[0]!.price, {
    kind: "tiered",
    currency: "USD",
    mode: "graduated",
    tiers: [
      { upTo: "5", unitAmount: { currency: "USD", value: "1000" }, flatAmount: null },
      { upTo: null, unitAmount: { currency: "USD", value: "800" }, flatAmount: { currency: "USD", value: "500" } },
    ],
  });
  const simple = set.usage[0]!;
  t.deepEqual(simple.type === "simple" && simple.price, { kind: "percentage", currency: "USD", percent: "2.9", fixedPerEvent: { currency: "USD", value: "30" } });
  t.deepEqual(
    [simple.minimumAmount, simple.maximumAmount],
    [
      { currency: "USD", value: "1000" },
      { currency: "USD", value: "1000" },
    ],
  );
  const dimensional = set.usage[1]!;
  // A percentage without a fee takes the card's currency, named by the other prices.
  t.deepEqual(dimensional.type === "dimensional" && dimensional.cells[1]!.price, { kind: "percentage", currency: "USD", percent: "1.000000000001", fixedPerEvent: null });
});

const priceRules: [string, (c: RatesInput) => void, [string, string][], { currency?: string }?][] = [
  ["XYZ is not an ISO 4217 code", (c) => void (c.fixedRates[0]!.price!.amount!.currencyCode = "XYZ"), [["fixed_rates[0].price.amount.currency_code", "must be an active ISO 4217 currency code"]]],
  ["a withdrawn code (HRK)", (c) => void (c.fixedRates[0]!.price!.amount!.currencyCode = "HRK"), [["fixed_rates[0].price.amount.currency_code", "must be an active ISO 4217 currency code"]]],
  [
    "XYZ in a tier",
    (c) => usagePrice(c, graduated(tier("10", "1"), tier(undefined, "1", undefined, "XYZ"))),
    [["usage_based_rates[0].price.tiers[1].unit_amount.currency_code", "must be an active ISO 4217 currency code"]],
  ],
  [
    "XYZ in a minimum",
    (c) => void (c.usageBasedRates[0]!.minimumAmount = { currencyCode: "XYZ", value: "1" }),
    [["usage_based_rates[0].minimum_amount.currency_code", "must be an active ISO 4217 currency code"]],
  ],
  [
    "tiered without tiers_mode",
    (c) => usagePrice(c, { ...graduated(tier(undefined, "1")), tiersMode: undefined }),
    [["usage_based_rates[0].price.tiers_mode", "is required for a tiered price: graduated or volume"]],
  ],
  ["tiered with an unknown tiers_mode", (c) => usagePrice(c, { ...graduated(tier(undefined, "1")), tiersMode: "stepped" }), [["usage_based_rates[0].price.tiers_mode", "must be graduated or volume"]]],
  ["tiered without tiers", (c) => usagePrice(c, graduated()), [["usage_based_rates[0].price.tiers", "is required for a tiered price: at least one tier, the last with up_to null"]]],
  [
    "101 tiers",
    (c) => usagePrice(c, graduated(...Array.from({ length: 100 }, (_, i) => tier(String(i + 1), "1")), tier(undefined, "1"))),
    [["usage_based_rates[0].price.tiers", "must have at most 100 tiers"]],
  ],
  [
    "up_to not increasing",
    (c) => usagePrice(c, graduated(tier("10", "1"), tier("20", "1"), tier("20", "1"), tier(undefined, "1"))),
    [["usage_based_rates[0].price.tiers[2].up_to", "must be greater than tiers[1].up_to (20)"]],
  ],
  ["up_to 0", (c) => usagePrice(c, graduated(tier("0", "1"), tier(undefined, "1"))), [["usage_based_rates[0].price.tiers[0].up_to", "must be greater than 0"]]],
  ["up_to negative", (c) => usagePrice(c, graduated(tier("-5", "1"), tier(undefined, "1"))), [["usage_based_rates[0].price.tiers[0].up_to", "must be greater than 0"]]],
  ["up_to not a number", (c) => usagePrice(c, graduated(tier("ten", "1"), tier(undefined, "1"))), [["usage_based_rates[0].price.tiers[0].up_to", "must be a decimal number"]]],
  [
    "up_to with 13 decimals",
    (c) => usagePrice(c, graduated(tier("1.0000000000001", "1"), tier(undefined, "1"))),
    [["usage_based_rates[0].price.tiers[0].up_to", "must have at most 12 digits after the decimal point"]],
  ],
  ["the last up_to set", (c) => usagePrice(c, graduated(tier("10", "1"), tier("20", "1"))), [["usage_based_rates[0].price.tiers[1].up_to", "must be null on the last tier (it has no bound)"]]],
  [
    "a null up_to before the last",
    (c) => usagePrice(c, graduated(tier("10", "1"), tier(undefined, "1"), tier(undefined, "1"))),
    [["usage_based_rates[0].price.tiers[1].up_to", "is required on every tier but the last"]],
  ],
  ["a tier without unit_amount", (c) => usagePrice(c, graduated({ upTo: undefined } as never)), [["usage_based_rates[0].price.tiers[0].unit_amount", "is required"]]],
  ["a negative unit_amount", (c) => usagePrice(c, graduated(tier(undefined, "-1"))), [["usage_based_rates[0].price.tiers[0].unit_amount.value", "must be at least 0"]]],
  ["a negative flat_amount", (c) => usagePrice(c, graduated(tier(undefined, "1", "-1"))), [["usage_based_rates[0].price.tiers[0].flat_amount.value", "must be at least 0"]]],
  [
    "two currencies in one tiered price",
    (c) => usagePrice(c, graduated(tier("10", "1"), tier(undefined, "1", "5", "EUR"))),
    [
      ["usage_based_rates[0].price.tiers[1].unit_amount.currency_code", "must be USD: every amount of a price uses one currency"],
      ["usage_based_rates[0].price.tiers[1].flat_amount.currency_code", "must be USD: every amount of a price uses one currency"],
    ],
  ],
  [
    "a tiered price in another currency than the card's",
    (c) => usagePrice(c, graduated(tier(undefined, "1", undefined, "EUR"))),
    [["usage_based_rates[0].price.tiers[0].unit_amount.currency_code", "must be USD: every price of a rate card uses one currency"]],
  ],
  [
    "tiered with amount, package_units, rounding_behavior",
    (c) => usagePrice(c, { ...graduated(tier(undefined, "1")), amount: usd("1"), packageUnits: 10, roundingBehavior: "round_up" }),
    [
      ["usage_based_rates[0].price.amount", "is not used by tiered prices"],
      ["usage_based_rates[0].price.package_units", "is only for package prices"],
      ["usage_based_rates[0].price.rounding_behavior", "is only for package prices"],
    ],
  ],
  [
    "flat with tiers, tiers_mode, percent, fixed_amount_per_event",
    (c) => void Object.assign(c.fixedRates[0]!.price!, { tiersMode: "volume", tiers: [tier(undefined, "1")], percent: "2", fixedAmountPerEvent: usd("1") }),
    [
      ["fixed_rates[0].price.tiers_mode", "is only for tiered prices"],
      ["fixed_rates[0].price.tiers", "is only for tiered prices"],
      ["fixed_rates[0].price.percent", "is only for percentage prices"],
      ["fixed_rates[0].price.fixed_amount_per_event", "is only for percentage prices"],
    ],
  ],
  ["package with percent", (c) => void (c.usageBasedRates[0]!.price!.percent = "1"), [["usage_based_rates[0].price.percent", "is only for percentage prices"]]],
  [
    "percentage with amount and tiers",
    (c) => usagePrice(c, { ...percentage("2"), amount: usd("1"), tiers: [tier(undefined, "1")] }),
    [
      ["usage_based_rates[0].price.amount", "is not used by percentage prices"],
      ["usage_based_rates[0].price.tiers", "is only for tiered prices"],
    ],
  ],
  ["percentage on a fixed rate", (c) => void (c.fixedRates[0]!.price = percentage("2", "1")), [["fixed_rates[0].price.price_type", "percentage prices are only for usage-based rates"]]],
  [
    "percentage on a count metric",
    (c) => {
      usagePrice(c, percentage("2", "1"));
      c.usageBasedRates[0]!.pricingMetricId = "pm_calls";
    },
    [["usage_based_rates[0].price.price_type", "a percentage price needs a pricing metric that aggregates sum (of a money value in the smallest unit); pm_calls aggregates count"]],
  ],
  [
    "percentage with included units",
    (c) => {
      usagePrice(c, percentage("2", "1"));
      c.usageBasedRates[0]!.includedUnits = 10;
    },
    [["usage_based_rates[0].included_units", "must be 0 for a rate with a percentage price"]],
  ],
  [
    "percentage cells with included units: reported once",
    (c) => {
      c.usageBasedRates[1]!.includedUnits = 5;
      for (const cell of c.usageBasedRates[1]!.pricingMatrix!.cells) cell.price = percentage("2");
    },
    [["usage_based_rates[1].included_units", "must be 0 for a rate with a percentage price"]],
  ],
  ["percent over 100", (c) => usagePrice(c, percentage("100.5")), [["usage_based_rates[0].price.percent", "must be between 0 and 100"]]],
  ["percent negative", (c) => usagePrice(c, percentage("-1")), [["usage_based_rates[0].price.percent", "must be between 0 and 100"]]],
  ["percent with 13 decimals", (c) => usagePrice(c, percentage("1.0000000000001")), [["usage_based_rates[0].price.percent", "must have at most 12 digits after the decimal point"]]],
  ["percent missing", (c) => usagePrice(c, { priceType: "percentage" }), [["usage_based_rates[0].price.percent", "is required for a percentage price: 0 to 100, e.g. 2.9"]]],
  ["percent not a number", (c) => usagePrice(c, percentage("2,9")), [["usage_based_rates[0].price.percent", "must be a decimal number"]]],
  [
    "a fee in another currency than the card's",
    (c) => usagePrice(c, percentage("2", "1", "EUR")),
    [["usage_based_rates[0].price.fixed_amount_per_event.currency_code", "must be USD: every price of a rate card uses one currency"]],
  ],
  [
    "a percentage without a fee on a card naming no currency",
    (c) => {
      c.fixedRates = [];
      c.usageBasedRates = [c.usageBasedRates[0]!];
      usagePrice(c, percentage("2"));
    },
    [["usage_based_rates[0].price.fixed_amount_per_event", "is needed to name the price's currency: no other price of the rate card names one"]],
  ],
  ["a negative minimum", (c) => void (c.usageBasedRates[0]!.minimumAmount = usd("-1")), [["usage_based_rates[0].minimum_amount.value", "must be at least 0"]]],
  [
    "a maximum below the minimum",
    (c) => Object.assign(c.usageBasedRates[0]!, { minimumAmount: usd("100"), maximumAmount: usd("99.5") }),
    [["usage_based_rates[0].maximum_amount", "must be at least minimum_amount (100)"]],
  ],
  [
    "a maximum in another currency",
    (c) => void (c.usageBasedRates[1]!.maximumAmount = { currencyCode: "EUR", value: "5" }),
    [["usage_based_rates[1].maximum_amount.currency_code", "must be USD: every price of a rate card uses one currency"]],
  ],
  [
    "a minimum in another currency than the catalog's",
    (c) => {
      c.fixedRates = [];
      c.usageBasedRates = [c.usageBasedRates[0]!];
      c.usageBasedRates[0]!.price!.amount!.currencyCode = "EUR";
      c.usageBasedRates[0]!.minimumAmount = usd("5");
    },
    [["usage_based_rates[0].minimum_amount.currency_code", "must be EUR: every price of a rate card uses one currency"]],
    { currency: "EUR" },
  ],
];

for (const [title, mutate, want, extra] of priceRules) {
  test(`price rule: ${title}`, (t) => {
    const c = validCard();
    mutate(c);
    t.deepEqual(
      described(c, extra).map((x) => [x.field, x.description]),
      want,
    );
  });
}

test("a percentage without a fee takes the catalog's currency", (t) => {
  const c = validCard();
  c.fixedRates = [];
  c.usageBasedRates = [c.usageBasedRates[0]!];
  usagePrice(c, percentage("2"));
  const v = new Violations();
  const set = checkRates(c, { metrics, owner: "rate catalog", currency: "JPY" }, v);
  t.true(v.empty);
  t.is(set.currency, "JPY");
  t.is(priceCurrency((set.usage[0] as { price: Price }).price), "JPY");
});

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
