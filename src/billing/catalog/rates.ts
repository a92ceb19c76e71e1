/**
 * Rate rules (DESIGN §5), shared by rate cards and rate catalogs. Everything is checked before
 * anything is written, and every violation carries its field path, e.g.
 * `usage_based_rates[1].pricing_matrix.cells[0].dimension_coordinates.region`.
 */
import type { Violations } from "../errors.js";
import { newId } from "../ids.js";
import { dec } from "../money.js";
import { checkAmount, checkPrice, checkWhole } from "./prices.js";
import {
  BILLING_INTERVALS,
  type BillingInterval,
  type Dimension,
  type DimensionInput,
  type FixedRate,
  type FixedRateInput,
  type MatrixCell,
  type Money,
  type Price,
  type PriceInput,
  type PricingMetric,
  type RateSet,
  type RatesInput,
  type UsageRate,
  type UsageRateInput,
  priceCurrency,
} from "./types.js";

export const MAX_RATES = 500;
export const MAX_CELLS = 2000;
export const MAX_DIMENSION_VALUES = 500;
export const MAX_CODE = 100;
export const MAX_NAME = 255;
export const MAX_DESCRIPTION = 2000;

export interface RateContext {
  /** Pricing metrics of the caller's environment, by ID, for every ID the input names. */
  metrics: ReadonlyMap<string, PricingMetric>;
  /** Codes already taken (a catalog's codes for the interval). */
  takenCodes?: ReadonlySet<string>;
  /** The currency every price must use (a catalog's or its cards'); otherwise the first price's. */
  currency?: string | null;
  /** Words for the error messages: "rate card" or "rate catalog". */
  owner: string;
}

/** Canonical text of a cell's coordinates: the unique key of the cell within its rate. */
export function coordinatesKey(coordinates: Record<string, string>): string {
  return JSON.stringify(
    Object.keys(coordinates)
      .sort()
      .map((k) => [k, coordinates[k]]),
  );
}

/**
 * Whether `rate`'s charge over a span is the sum of its charges over the span's parts, its usage
 * only adding up: no minimum or maximum amount (each part would apply its own, prorated) and no
 * volume-tiered price (reaching a tier lowers every unit's price: 10 users at 10, 100; 11 at 5,
 * 55). What a usage window split at a change may be priced in parts for (usage-term-changes.ts,
 * first-seen.ts).
 */
export function chargeAddsUp(rate: Pick<UsageRate, "minimumAmount" | "maximumAmount"> & ({ type: "simple"; price: Price } | { type: "dimensional"; cells: MatrixCell[] })): boolean {
  if (rate.minimumAmount || rate.maximumAmount) return false;
  const prices = rate.type === "simple" ? [rate.price] : rate.cells.map((c) => c.price);
  return prices.every((p) => p.kind !== "tiered" || p.mode !== "volume");
}

/** The pricing metric IDs a rate input names, to load them in one query. */
export function metricIdsOf(input: RatesInput): string[] {
  return [...new Set(input.usageBasedRates.map((r) => r.pricingMetricId).filter((id) => id !== ""))];
}

/** A text field: required (not blank) when `required`, at most `max` characters. */
export function checkText(v: Violations, field: string, value: string, max: number, required: boolean): void {
  if (required && value.trim() === "") v.add(field, "is required");
  else if (value.length > max) v.add(field, `must have at most ${max} characters`);
}

/** The billing interval, or undefined (and a violation) when it is not monthly or yearly. */
export function checkBillingInterval(value: string, v: Violations): BillingInterval | undefined {
  if (BILLING_INTERVALS.includes(value as BillingInterval)) return value as BillingInterval;
  v.add("billing_interval", value === "" ? "is required: monthly or yearly" : "must be monthly or yearly");
  return undefined;
}

/** What the checks of one request share: the codes seen so far, every price and limit (for the currency rule). */
interface RatesCheck {
  ctx: RateContext;
  /** Each code seen so far, with where it was first seen (`fixed_rates[0]`). */
  codes: Map<string, string>;
  prices: { price: Price; path: Violations }[];
  /** Minimum and maximum amounts, at their paths (`usage_based_rates[0].minimum_amount`). */
  limits: { amount: Money; path: Violations }[];
}

export function checkRates(input: RatesInput, ctx: RateContext, v: Violations): RateSet {
  const fixed: FixedRate[] = [];
  const usage: UsageRate[] = [];
  const check: RatesCheck = { ctx, codes: new Map(), prices: [], limits: [] };

  if (input.fixedRates.length + input.usageBasedRates.length > MAX_RATES) {
    v.add("", `a ${ctx.owner} can have at most ${MAX_RATES} rates per request`);
  }
  input.fixedRates.forEach((r, i) => {
    const rate = checkFixedRate(check, r, i, v.at("fixed_rates").at(i));
    if (rate) fixed.push(rate);
  });
  input.usageBasedRates.forEach((r, i) => {
    const rate = checkUsageRate(check, r, i, v.at("usage_based_rates").at(i));
    if (rate) usage.push(rate);
  });

  return { fixed, usage, currency: checkCurrency(check) };
}

/**
 * One currency for every price and limit (DESIGN §5): the owner's if it has one, else the first
 * price's that names one. A percentage price without a fee names none ("" from checkPrice): it
 * takes that currency, set here once every price is read; with none to take, its
 * `fixed_amount_per_event` is needed to name it. Minimum and maximum amounts must be in it too.
 */
function checkCurrency(check: RatesCheck): string | null {
  const named = check.prices.find((p) => priceCurrency(p.price) !== "");
  const currency = check.ctx.currency ?? (named ? priceCurrency(named.price) : null);
  const must = `must be ${currency}: every price of a ${check.ctx.owner} uses one currency`;
  for (const { price, path } of check.prices) {
    if (price.kind === "percentage" && price.currency === "") {
      if (currency === null) path.add("fixed_amount_per_event", `is needed to name the price's currency: no other price of the ${check.ctx.owner} names one`);
      else price.currency = currency;
    } else if (currency !== null && priceCurrency(price) !== currency) {
      currencyPath(price, path).add("currency_code", must);
    }
  }
  for (const { amount, path } of check.limits) {
    if (currency !== null && amount.currency !== currency) path.add("currency_code", must);
  }
  return currency;
}

/** Where a price names its currency: its amount, first tier's unit amount, or fee per event. */
function currencyPath(p: Price, path: Violations): Violations {
  if (p.kind === "tiered") return path.at("tiers").at(0).at("unit_amount");
  if (p.kind === "percentage") return path.at("fixed_amount_per_event");
  return path.at("amount");
}

/** A rate's code: required, unique within the request and not taken already. */
function checkCode(check: RatesCheck, rv: Violations, code: string, where: string): void {
  checkText(rv, "code", code, MAX_CODE, true);
  if (code === "") return;
  const first = check.codes.get(code);
  // Codes compare byte for byte, like every identifier: "Seats" and "seats" are two codes.
  if (first) rv.add("code", `duplicates the code ${JSON.stringify(code)} of ${first}`);
  else if (check.ctx.takenCodes?.has(code)) rv.add("code", `${JSON.stringify(code)} is already used by a rate of this ${check.ctx.owner} for the interval`);
  else check.codes.set(code, where);
}

/** Where a price is used: a fixed rate, or a usage rate (its metric and included units, at `rv`). */
type PriceUse = { rate: "fixed" } | { rate: "usage"; metric: PricingMetric | undefined; includedUnits: string | undefined; rv: Violations; reported: { includedUnits: boolean } };

/** A price at `pv`, kept for the currency rule; undefined when it is invalid. */
function checkedPrice(check: RatesCheck, input: PriceInput | undefined, pv: Violations, use: PriceUse): Price | undefined {
  const price = checkPrice(input, pv);
  if (price?.kind === "percentage" && !percentageAllowed(use, pv)) return undefined;
  if (price) check.prices.push({ price, path: pv });
  return price;
}

/**
 * Where a percentage price may be used (DESIGN §13): only on usage-based rates (simple or in
 * dimensional cells), only when the rate's metric aggregates `sum` (the sum of a money value in
 * the smallest unit; a count or maximum is no amount to take a percent of), and only without
 * included units (units of money are not given away by the unit). A rule a rate breaks is
 * reported once per price using it.
 */
function percentageAllowed(use: PriceUse, pv: Violations): boolean {
  if (use.rate === "fixed") {
    pv.add("price_type", "percentage prices are only for usage-based rates");
    return false;
  }
  let ok = true;
  if (use.metric && use.metric.aggregation.type !== "sum") {
    pv.add("price_type", `a percentage price needs a pricing metric that aggregates sum (of a money value in the smallest unit); ${use.metric.id} aggregates ${use.metric.aggregation.type}`);
    ok = false;
  }
  if (use.includedUnits !== undefined && use.includedUnits !== "0") {
    if (!use.reported.includedUnits) use.rv.add("included_units", "must be 0 for a rate with a percentage price");
    use.reported.includedUnits = true;
    ok = false;
  }
  return ok;
}

/**
 * A usage rate's minimum and maximum per period: amounts ≥ 0 in the card's one currency
 * (checkCurrency), the maximum at least the minimum.
 */
function checkLimits(check: RatesCheck, r: UsageRateInput, rv: Violations): { minimumAmount: Money | null; maximumAmount: Money | null } | undefined {
  const limit = (input: UsageRateInput["minimumAmount"], field: string) => {
    if (input === undefined) return null;
    const amount = checkAmount(input, rv.at(field));
    if (amount) check.limits.push({ amount, path: rv.at(field) });
    return amount;
  };
  const minimumAmount = limit(r.minimumAmount, "minimum_amount");
  const maximumAmount = limit(r.maximumAmount, "maximum_amount");
  if (minimumAmount === undefined || maximumAmount === undefined) return undefined;
  if (minimumAmount && maximumAmount && dec(maximumAmount.value).lt(dec(minimumAmount.value))) {
    rv.add("maximum_amount", `must be at least minimum_amount (${minimumAmount.value})`);
    return undefined;
  }
  return { minimumAmount, maximumAmount };
}

function checkFixedRate(check: RatesCheck, r: FixedRateInput, i: number, rv: Violations): FixedRate | undefined {
  checkCode(check, rv, r.code, `fixed_rates[${i}]`);
  checkText(rv, "name", r.name, MAX_NAME, true);
  checkText(rv, "description", r.description, MAX_DESCRIPTION, false);
  const price = checkedPrice(check, r.price, rv.at("price"), { rate: "fixed" });
  return price ? { id: newId("rate"), code: r.code, name: r.name, description: r.description || null, price } : undefined;
}

function checkUsageRate(check: RatesCheck, r: UsageRateInput, i: number, rv: Violations): UsageRate | undefined {
  checkCode(check, rv, r.code, `usage_based_rates[${i}]`);
  checkText(rv, "name", r.name, MAX_NAME, true);
  checkText(rv, "description", r.description, MAX_DESCRIPTION, false);
  const included = checkWhole(r.includedUnits, 0, rv, "included_units");
  let metric: PricingMetric | undefined;
  if (r.pricingMetricId === "") rv.add("pricing_metric_id", "is required");
  else {
    metric = check.ctx.metrics.get(r.pricingMetricId);
    if (!metric) rv.add("pricing_metric_id", "no pricing metric with this ID exists");
  }
  const limits = checkLimits(check, r, rv);
  const base = {
    id: newId("rate"),
    code: r.code,
    name: r.name,
    description: r.description || null,
    pricingMetricId: r.pricingMetricId,
    includedUnits: included ?? "0",
    minimumAmount: limits?.minimumAmount ?? null,
    maximumAmount: limits?.maximumAmount ?? null,
  };
  // Where this rate's prices are used; included_units is reported once, however many cells use percentages.
  const use: PriceUse = { rate: "usage", metric, includedUnits: included, rv, reported: { includedUnits: false } };

  if (r.usageBasedRateType === "simple") {
    if (r.dimensions.length > 0) rv.add("dimensions", "is only for dimensional rates");
    if (r.pricingMatrix) rv.add("pricing_matrix", "is only for dimensional rates");
    const price = checkedPrice(check, r.price, rv.at("price"), use);
    return price && limits ? { ...base, type: "simple", price } : undefined;
  }
  if (r.usageBasedRateType !== "dimensional") {
    rv.add("usage_based_rate_type", r.usageBasedRateType === "" ? "is required: simple or dimensional" : "must be simple or dimensional");
    return undefined;
  }

  if (r.price) rv.add("price", "is not used by dimensional rates: each matrix cell has its price");
  const byKey = new Map<string, Set<string>>();
  const dimensions = checkDimensions(r.dimensions, metric, byKey, rv);
  const cells = checkCells(check, r.pricingMatrix?.cells ?? [], byKey, rv.at("pricing_matrix"), use);
  return { ...base, type: "dimensional", dimensions, cells };
}

/** A dimensional rate's dimensions; `byKey` gets each key's values (the first of a duplicated key). */
function checkDimensions(input: DimensionInput[], metric: PricingMetric | undefined, byKey: Map<string, Set<string>>, rv: Violations): Dimension[] {
  const dimensions: Dimension[] = [];
  if (input.length === 0) rv.add("dimensions", "is required for a dimensional rate");
  input.forEach((d, j) => {
    const dv = rv.at("dimensions").at(j);
    checkText(dv, "key", d.key, MAX_NAME, true);
    checkText(dv, "description", d.description, MAX_DESCRIPTION, false);
    if (d.key !== "" && byKey.has(d.key)) dv.add("key", `duplicates the key ${JSON.stringify(d.key)}`);
    else if (d.key !== "" && metric && !metric.dimensions.includes(d.key)) {
      dv.add("key", `is not a dimension of pricing metric ${metric.id} (its dimensions: ${metric.dimensions.join(", ") || "none"})`);
    }
    if (d.values.length === 0) dv.add("values", "is required: at least one value");
    if (d.values.length > MAX_DIMENSION_VALUES) dv.add("values", `must have at most ${MAX_DIMENSION_VALUES} values`);
    const values = new Set<string>();
    d.values.forEach((value, k) => {
      if (value === "") dv.at("values").at(k).add("", "must not be empty");
      else if (values.has(value))
        dv.at("values")
          .at(k)
          .add("", `duplicates the value ${JSON.stringify(value)}`);
      values.add(value);
    });
    if (d.key !== "" && !byKey.has(d.key)) byKey.set(d.key, values);
    dimensions.push({ key: d.key, values: d.values, description: d.description || null });
  });
  return dimensions;
}

type CellInput = NonNullable<UsageRateInput["pricingMatrix"]>["cells"][number];

/** A dimensional rate's pricing matrix: each cell names one value of every dimension, once. */
function checkCells(check: RatesCheck, rawCells: CellInput[], byKey: Map<string, Set<string>>, mv: Violations, use: PriceUse): MatrixCell[] {
  const cells: MatrixCell[] = [];
  if (rawCells.length === 0) mv.add("cells", "is required: at least one cell");
  if (rawCells.length > MAX_CELLS) mv.add("cells", `must have at most ${MAX_CELLS} cells`);
  const seen = new Map<string, number>();
  rawCells.forEach((cell, j) => {
    const cv = mv.at("cells").at(j);
    const coordsV = cv.at("dimension_coordinates");
    let complete = true;
    for (const [key, value] of Object.entries(cell.dimensionCoordinates)) {
      const values = byKey.get(key);
      if (!values) {
        coordsV.add(key, "is not a dimension of this rate");
        complete = false;
      } else if (!values.has(value)) {
        coordsV.add(key, `must be one of the values of dimension ${JSON.stringify(key)}: ${[...values].join(", ")}`);
        complete = false;
      }
    }
    for (const key of byKey.keys()) {
      if (!(key in cell.dimensionCoordinates)) {
        coordsV.add(key, "is required: a cell names every dimension of the rate");
        complete = false;
      }
    }
    if (complete) {
      const k = coordinatesKey(cell.dimensionCoordinates);
      const first = seen.get(k);
      if (first !== undefined) coordsV.add("", `duplicates the coordinates of cells[${first}]`);
      else seen.set(k, j);
    }
    const price = checkedPrice(check, cell.price, cv.at("price"), use);
    if (price) cells.push({ coordinates: { ...cell.dimensionCoordinates }, price });
  });
  return cells;
}
