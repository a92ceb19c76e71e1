/**
 * Rate rules (DESIGN §5), shared by rate cards and rate catalogs. Everything is checked before
 * anything is written, and every violation carries its field path, e.g.
 * `usage_based_rates[1].pricing_matrix.cells[0].dimension_coordinates.region`.
 */
import type { Violations } from "../errors.js";
import { newId } from "../ids.js";
import { checkPrice, checkWhole } from "./prices.js";
import { BILLING_INTERVALS, type BillingInterval, type Dimension, type FixedRate, type MatrixCell, type Price, type PricingMetric, type RateSet, type RatesInput, type UsageRate } from "./types.js";

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

export function checkRates(input: RatesInput, ctx: RateContext, v: Violations): RateSet {
  const fixed: FixedRate[] = [];
  const usage: UsageRate[] = [];
  const codes = new Map<string, string>();
  const prices: { price: Price; path: Violations }[] = [];

  if (input.fixedRates.length + input.usageBasedRates.length > MAX_RATES) {
    v.add("", `a ${ctx.owner} can have at most ${MAX_RATES} rates per request`);
  }

  const checkCode = (rv: Violations, code: string, where: string) => {
    checkText(rv, "code", code, MAX_CODE, true);
    if (code === "") return;
    const first = codes.get(code);
    // Codes compare byte for byte, like every identifier: "Seats" and "seats" are two codes.
    if (first) rv.add("code", `duplicates the code ${JSON.stringify(code)} of ${first}`);
    else if (ctx.takenCodes?.has(code)) rv.add("code", `${JSON.stringify(code)} is already used by a rate of this ${ctx.owner} for the interval`);
    else codes.set(code, where);
  };

  input.fixedRates.forEach((r, i) => {
    const where = `fixed_rates[${i}]`;
    const rv = v.at("fixed_rates").at(i);
    checkCode(rv, r.code, where);
    checkText(rv, "name", r.name, MAX_NAME, true);
    checkText(rv, "description", r.description, MAX_DESCRIPTION, false);
    const pv = rv.at("price");
    const price = checkPrice(r.price, pv);
    if (price) {
      prices.push({ price, path: pv });
      fixed.push({ id: newId("rate"), code: r.code, name: r.name, description: r.description || null, price });
    }
  });

  input.usageBasedRates.forEach((r, i) => {
    const where = `usage_based_rates[${i}]`;
    const rv = v.at("usage_based_rates").at(i);
    checkCode(rv, r.code, where);
    checkText(rv, "name", r.name, MAX_NAME, true);
    checkText(rv, "description", r.description, MAX_DESCRIPTION, false);
    const included = checkWhole(r.includedUnits, 0, rv, "included_units");
    let metric: PricingMetric | undefined;
    if (r.pricingMetricId === "") rv.add("pricing_metric_id", "is required");
    else {
      metric = ctx.metrics.get(r.pricingMetricId);
      if (!metric) rv.add("pricing_metric_id", "no pricing metric with this ID exists");
    }
    const base = {
      id: newId("rate"),
      code: r.code,
      name: r.name,
      description: r.description || null,
      pricingMetricId: r.pricingMetricId,
      includedUnits: included ?? "0",
    };

    if (r.usageBasedRateType === "simple") {
      if (r.dimensions.length > 0) rv.add("dimensions", "is only for dimensional rates");
      if (r.pricingMatrix) rv.add("pricing_matrix", "is only for dimensional rates");
      const pv = rv.at("price");
      const price = checkPrice(r.price, pv);
      if (price) {
        prices.push({ price, path: pv });
        usage.push({ ...base, type: "simple", price });
      }
      return;
    }
    if (r.usageBasedRateType !== "dimensional") {
      rv.add("usage_based_rate_type", r.usageBasedRateType === "" ? "is required: simple or dimensional" : "must be simple or dimensional");
      return;
    }

    if (r.price) rv.add("price", "is not used by dimensional rates: each matrix cell has its price");
    const dimensions: Dimension[] = [];
    const byKey = new Map<string, Set<string>>();
    if (r.dimensions.length === 0) rv.add("dimensions", "is required for a dimensional rate");
    r.dimensions.forEach((d, j) => {
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

    const cells: MatrixCell[] = [];
    const mv = rv.at("pricing_matrix");
    const rawCells = r.pricingMatrix?.cells ?? [];
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
      const pv = cv.at("price");
      const price = checkPrice(cell.price, pv);
      if (price) {
        prices.push({ price, path: pv });
        cells.push({ coordinates: { ...cell.dimensionCoordinates }, price });
      }
    });
    usage.push({ ...base, type: "dimensional", dimensions, cells });
  });

  // One currency for every price: the owner's if it has one, else the first price's.
  const currency = ctx.currency ?? prices[0]?.price.amount.currency ?? null;
  for (const { price, path } of prices) {
    if (currency !== null && price.amount.currency !== currency) {
      path.at("amount").add("currency_code", `must be ${currency}: every price of a ${ctx.owner} uses one currency`);
    }
  }
  return { fixed, usage, currency };
}
