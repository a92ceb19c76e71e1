/**
 * Rates as rows, shared by the rate-card and rate-catalog stores: rates of cards and of catalogs
 * share one table (`owner_kind`), their matrix cells another; prices are DECIMAL(38,12) columns
 * on MySQL and exact text on SQLite (tiers: JSON of canonical decimal text).
 */
import { createHash } from "node:crypto";
import { In, type EntityManager } from "typeorm";
import { coordinatesKey } from "../../billing/catalog/rates.js";
import { type BillingInterval, type FixedRate, type Price, type RoundingBehavior, type TiersMode, type UsageRate, priceCurrency } from "../../billing/catalog/types.js";
import { canonicalDecimal } from "../../billing/money.js";
import { AlreadyExistsError, FailedPreconditionError } from "../../billing/errors.js";
import type { Entities, PriceColumns, RateCellRow, RateRow } from "../entities/index.js";
import { type Sql, chunks } from "../sql.js";

// ---- prices and rates ⇄ rows ----

/** No price (a dimensional rate's own row: its prices are in its cells). */
export const NO_PRICE: PriceColumns = {
  price_type: null,
  price_currency: null,
  price_value: null,
  package_units: null,
  rounding_behavior: null,
  tiers_mode: null,
  tiers: null,
  percent: null,
  fixed_per_event: null,
};

/**
 * A price as columns: the currency in `price_currency` for every kind; tiers as JSON holding
 * canonical decimal text (each tier's amounts are in the price's one currency, which validation
 * guarantees), the other amounts as decimal columns.
 */
export function priceToColumns(p: Price): PriceColumns {
  const currency = { ...NO_PRICE, price_type: p.kind, price_currency: priceCurrency(p) };
  switch (p.kind) {
    case "flat":
      return { ...currency, price_value: p.amount.value };
    case "package":
      return { ...currency, price_value: p.amount.value, package_units: p.packageUnits, rounding_behavior: p.rounding };
    case "tiered":
      return {
        ...currency,
        tiers_mode: p.mode,
        tiers: p.tiers.map((t) => ({ up_to: t.upTo, unit_amount: t.unitAmount.value, flat_amount: t.flatAmount?.value ?? null })),
      };
    case "percentage":
      return { ...currency, percent: p.percent, fixed_per_event: p.fixedPerEvent?.value ?? null };
  }
}

/** Tier text read back canonical ("1.500000000000" and "1.5" are one value), as decimal columns are. */
const canonical = (v: string | null): string | null => (v === null ? null : canonicalDecimal(v));

export function priceFromColumns(c: PriceColumns): Price {
  const currency = c.price_currency ?? "";
  const money = (value: string) => ({ currency, value });
  const amount = money(c.price_value ?? "0");
  switch (c.price_type) {
    case "package":
      return { kind: "package", amount, packageUnits: c.package_units ?? "1", rounding: c.rounding_behavior as RoundingBehavior };
    case "tiered":
      return {
        kind: "tiered",
        currency,
        mode: c.tiers_mode as TiersMode,
        tiers: (c.tiers ?? []).map((t) => {
          const flat = canonical(t.flat_amount);
          return { upTo: canonical(t.up_to), unitAmount: money(canonicalDecimal(t.unit_amount)), flatAmount: flat === null ? null : money(flat) };
        }),
      };
    case "percentage":
      return { kind: "percentage", currency, percent: c.percent ?? "0", fixedPerEvent: c.fixed_per_event === null ? null : money(c.fixed_per_event) };
    default:
      return { kind: "flat", amount };
  }
}

const NO_LIMITS = { minimum_amount: null, maximum_amount: null, limits_currency: null };

/** A usage rate's minimum and maximum: their values, and their one currency (the card's). */
function limitsToColumns(r: UsageRate): Pick<RateRow, "minimum_amount" | "maximum_amount" | "limits_currency"> {
  const currency = r.minimumAmount?.currency ?? r.maximumAmount?.currency ?? null;
  return { minimum_amount: r.minimumAmount?.value ?? null, maximum_amount: r.maximumAmount?.value ?? null, limits_currency: currency };
}

export interface Owner {
  kind: "card" | "catalog";
  id: string;
  environmentId: string;
  interval: BillingInterval;
  at: Date;
}

export function ratesToRows(owner: Owner, rates: { fixed: FixedRate[]; usage: UsageRate[] }): { rates: RateRow[]; cells: RateCellRow[] } {
  const common = (r: FixedRate | UsageRate) => ({
    id: r.id,
    environment_id: owner.environmentId,
    owner_kind: owner.kind,
    owner_id: owner.id,
    billing_interval: owner.interval,
    code: r.code,
    name: r.name,
    description: r.description,
    created_at: owner.at,
  });
  const rows: RateRow[] = [];
  const cells: RateCellRow[] = [];
  for (const r of rates.fixed) {
    rows.push({ ...common(r), kind: "fixed", pricing_metric_id: null, usage_type: null, included_units: null, dimensions: null, ...NO_LIMITS, ...priceToColumns(r.price) });
  }
  for (const r of rates.usage) {
    const usage = { kind: "usage_based", pricing_metric_id: r.pricingMetricId, usage_type: r.type, included_units: r.includedUnits, ...limitsToColumns(r) };
    if (r.type === "simple") {
      rows.push({ ...common(r), ...usage, dimensions: null, ...priceToColumns(r.price) });
      continue;
    }
    rows.push({ ...common(r), ...usage, dimensions: r.dimensions, ...NO_PRICE });
    for (const cell of r.cells) {
      cells.push({
        rate_id: r.id,
        owner_id: owner.id,
        coordinates: cell.coordinates,
        coordinates_hash: createHash("sha256").update(coordinatesKey(cell.coordinates)).digest("hex"),
        ...priceToColumns(cell.price),
      });
    }
  }
  return { rates: rows, cells };
}

export function rateFromRows(row: RateRow, cells: RateCellRow[]): FixedRate | UsageRate {
  const base = { id: row.id, code: row.code, name: row.name, description: row.description };
  if (row.kind === "fixed") return { ...base, price: priceFromColumns(row) };
  const limit = (value: string | null) => (value === null ? null : { currency: row.limits_currency ?? "", value });
  const usage = {
    ...base,
    pricingMetricId: row.pricing_metric_id ?? "",
    includedUnits: row.included_units ?? "0",
    minimumAmount: limit(row.minimum_amount),
    maximumAmount: limit(row.maximum_amount),
  };
  if (row.usage_type === "simple") return { ...usage, type: "simple", price: priceFromColumns(row) };
  return {
    ...usage,
    type: "dimensional",
    dimensions: row.dimensions ?? [],
    cells: cells.map((c) => ({ coordinates: c.coordinates, price: priceFromColumns(c) })),
  };
}

/** Rates (and their cells) of the given rows, in row order. */
export async function loadCells(em: EntityManager, entities: Entities, rows: RateRow[]): Promise<Map<string, RateCellRow[]>> {
  const byRate = new Map<string, RateCellRow[]>();
  const dimensional = rows.filter((r) => r.usage_type === "dimensional").map((r) => r.id);
  if (dimensional.length === 0) return byRate;
  const cells = await em.find(entities.RateCell, { where: { rate_id: In(dimensional) }, order: { seq: "ASC" } });
  for (const c of cells) {
    const list = byRate.get(c.rate_id) ?? [];
    list.push(c);
    byRate.set(c.rate_id, list);
  }
  return byRate;
}

/** The codes of `set` that occur more than once in it (byte for byte), then those in `taken`. */
export function clashingCodes(set: { fixed: FixedRate[]; usage: UsageRate[] }, taken: Set<string> = new Set()): string[] {
  const seen = new Set<string>();
  const clashes = new Set<string>();
  for (const { code } of [...set.fixed, ...set.usage]) {
    if (seen.has(code) || taken.has(code)) clashes.add(code);
    seen.add(code);
  }
  return [...clashes];
}

/**
 * A unique-key violation while writing rates, as the domain error that names the codes: the
 * domain checks codes (and cell coordinates) before writing, so this is a code taken by a
 * concurrent write, or a rule the check missed; either way a 409 naming them, never a 500.
 */
export function rateConflict(codes: string[], owner: "rate card" | "rate catalog"): AlreadyExistsError {
  const named = codes.map((c) => JSON.stringify(c)).join(", ");
  return new AlreadyExistsError(
    "RATE_CODE_EXISTS",
    codes.length > 0
      ? `the ${owner} already has a rate with the code ${named} for this interval`
      : `a rate of this request conflicts with another rate of the ${owner} (a unique key of its codes or matrix cells)`,
    codes.length > 0 ? { code: codes.join(",") } : {},
  );
}

export async function insertRates(em: EntityManager, entities: Entities, owner: Owner, set: { fixed: FixedRate[]; usage: UsageRate[] }): Promise<void> {
  const { rates, cells } = ratesToRows(owner, set);
  // Chunked multi-row INSERTs: one statement per 500 rows.
  for (const part of chunks(rates)) await em.insert(entities.Rate, part);
  for (const part of chunks(cells)) await em.insert(entities.RateCell, part);
}

/**
 * Makes the catalog's currency `currency` (if it has none yet) inside the transaction, with the
 * catalog row locked on MySQL; throws FailedPreconditionError when it already has another one.
 */
export async function claimCatalogCurrency(em: EntityManager, sql: Sql, environmentId: string, catalogId: string, currency: string): Promise<void> {
  const lock = sql.dialect === "mysql" ? " FOR UPDATE" : "";
  const rows: { currency: string | null }[] = await em.query(`SELECT currency FROM rate_catalogs WHERE id = ? AND environment_id = ?${lock}`, [catalogId, environmentId]);
  const current = rows[0]?.currency ?? null;
  if (current !== null && current !== currency) {
    throw new FailedPreconditionError("CURRENCY_MISMATCH", `the rate catalog uses ${current}`, { currency: current });
  }
  if (current === null) await em.query("UPDATE rate_catalogs SET currency = ? WHERE environment_id = ? AND id = ?", [currency, environmentId, catalogId]);
}
