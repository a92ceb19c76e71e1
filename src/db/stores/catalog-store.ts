/**
 * Storage of the catalog: pricing metrics, rate cards, rate catalogs. Rates of cards and of
 * catalogs share one table (`owner_kind`), their matrix cells another; prices are DECIMAL(38,12)
 * columns on MySQL and exact text on SQLite.
 */
import { createHash } from "node:crypto";
import { In, type EntityManager } from "typeorm";
import type { PricingMetricStore } from "../../billing/catalog/metrics.js";
import { coordinatesKey } from "../../billing/catalog/rates.js";
import type { RateCardStore } from "../../billing/catalog/rate-cards.js";
import type { RateCatalogStore } from "../../billing/catalog/rate-catalogs.js";
import type {
  AggregationType,
  BillingInterval,
  CatalogRate,
  FixedRate,
  Price,
  PricingMetric,
  RateCard,
  RateCatalog,
  RateSet,
  RoundingBehavior,
  UsageRate,
} from "../../billing/catalog/types.js";
import { AlreadyExistsError, FailedPreconditionError } from "../../billing/errors.js";
import type { Page, PageResult } from "../../billing/pagination.js";
import { toPageResult } from "../../billing/pagination.js";
import type { Entities, PriceColumns, PricingMetricRow, RateCardRow, RateCatalogRow, RateCellRow, RateRow } from "../entities/index.js";
import { isUniqueViolation } from "../errors.js";
import { type Sql, chunks } from "../sql.js";
import { backfillTotals } from "./usage-store.js";

// ---- prices and rates ⇄ rows ----

function priceToColumns(p: Price): PriceColumns {
  return {
    price_type: p.kind,
    price_currency: p.amount.currency,
    price_value: p.amount.value,
    package_units: p.kind === "package" ? p.packageUnits : null,
    rounding_behavior: p.kind === "package" ? p.rounding : null,
  };
}

function priceFromColumns(c: PriceColumns): Price {
  const amount = { currency: c.price_currency ?? "", value: c.price_value ?? "0" };
  if (c.price_type === "package") {
    return { kind: "package", amount, packageUnits: c.package_units ?? "1", rounding: c.rounding_behavior as RoundingBehavior };
  }
  return { kind: "flat", amount };
}

const NO_PRICE: PriceColumns = { price_type: null, price_currency: null, price_value: null, package_units: null, rounding_behavior: null };

interface Owner {
  kind: "card" | "catalog";
  id: string;
  environmentId: string;
  interval: BillingInterval;
  at: Date;
}

function ratesToRows(owner: Owner, rates: { fixed: FixedRate[]; usage: UsageRate[] }): { rates: RateRow[]; cells: RateCellRow[] } {
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
    rows.push({ ...common(r), kind: "fixed", pricing_metric_id: null, usage_type: null, included_units: null, dimensions: null, ...priceToColumns(r.price) });
  }
  for (const r of rates.usage) {
    const usage = { kind: "usage_based", pricing_metric_id: r.pricingMetricId, usage_type: r.type, included_units: r.includedUnits };
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

function rateFromRows(row: RateRow, cells: RateCellRow[]): FixedRate | UsageRate {
  const base = { id: row.id, code: row.code, name: row.name, description: row.description };
  if (row.kind === "fixed") return { ...base, price: priceFromColumns(row) };
  const usage = { ...base, pricingMetricId: row.pricing_metric_id ?? "", includedUnits: row.included_units ?? "0" };
  if (row.usage_type === "simple") return { ...usage, type: "simple", price: priceFromColumns(row) };
  return {
    ...usage,
    type: "dimensional",
    dimensions: row.dimensions ?? [],
    cells: cells.map((c) => ({ coordinates: c.coordinates, price: priceFromColumns(c) })),
  };
}

/** Rates (and their cells) of the given rows, in row order. */
async function loadCells(em: EntityManager, entities: Entities, rows: RateRow[]): Promise<Map<string, RateCellRow[]>> {
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
function clashingCodes(set: { fixed: FixedRate[]; usage: UsageRate[] }, taken: Set<string> = new Set()): string[] {
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
function rateConflict(codes: string[], owner: "rate card" | "rate catalog"): AlreadyExistsError {
  const named = codes.map((c) => JSON.stringify(c)).join(", ");
  return new AlreadyExistsError(
    "RATE_CODE_EXISTS",
    codes.length > 0
      ? `the ${owner} already has a rate with the code ${named} for this interval`
      : `a rate of this request conflicts with another rate of the ${owner} (a unique key of its codes or matrix cells)`,
    codes.length > 0 ? { code: codes.join(",") } : {},
  );
}

async function insertRates(em: EntityManager, entities: Entities, owner: Owner, set: { fixed: FixedRate[]; usage: UsageRate[] }): Promise<void> {
  const { rates, cells } = ratesToRows(owner, set);
  // Chunked multi-row INSERTs: one statement per 500 rows.
  for (const part of chunks(rates)) await em.insert(entities.Rate, part);
  for (const part of chunks(cells)) await em.insert(entities.RateCell, part);
}

/**
 * Makes the catalog's currency `currency` (if it has none yet) inside the transaction, with the
 * catalog row locked on MySQL; throws FailedPreconditionError when it already has another one.
 */
async function claimCatalogCurrency(em: EntityManager, sql: Sql, environmentId: string, catalogId: string, currency: string): Promise<void> {
  const lock = sql.dialect === "mysql" ? " FOR UPDATE" : "";
  const rows: { currency: string | null }[] = await em.query(`SELECT currency FROM rate_catalogs WHERE id = ? AND environment_id = ?${lock}`, [
    catalogId,
    environmentId,
  ]);
  const current = rows[0]?.currency ?? null;
  if (current !== null && current !== currency) {
    throw new FailedPreconditionError("CURRENCY_MISMATCH", `the rate catalog uses ${current}`, { currency: current });
  }
  if (current === null) await em.query("UPDATE rate_catalogs SET currency = ? WHERE id = ?", [currency, catalogId]);
}

// ---- pricing metrics ----

function metricFromRow(r: PricingMetricRow): PricingMetric {
  return {
    id: r.id,
    environmentId: r.environment_id,
    eventName: r.event_name,
    name: r.name,
    unit: r.unit,
    dimensions: r.dimensions ?? [],
    aggregation: { type: r.aggregation_type as AggregationType, valueField: r.value_field },
    createdAt: r.created_at,
  };
}

export class SqlPricingMetricStore implements PricingMetricStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
  ) {}

  /**
   * Inserts the metric and, in the same transaction, adds the events already stored under its
   * event name to its hourly totals. The environment row is locked exclusively meanwhile, so an
   * event being ingested (which holds it shared) is either in this backfill or sees the metric.
   */
  async insert(m: PricingMetric): Promise<void> {
    await this.sql.transaction(async (em) => {
      if (this.sql.dialect === "mysql") await em.query("SELECT id FROM environments WHERE id = ? FOR UPDATE", [m.environmentId]);
      await em.insert(this.entities.PricingMetric, {
        id: m.id,
        environment_id: m.environmentId,
        event_name: m.eventName,
        name: m.name,
        unit: m.unit,
        dimensions: m.dimensions,
        aggregation_type: m.aggregation.type,
        value_field: m.aggregation.valueField,
        created_at: m.createdAt,
      });
      await backfillTotals(em, this.sql.dialect, m);
    });
  }

  async get(environmentId: string, id: string): Promise<PricingMetric | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.entities.PricingMetric, { environment_id: environmentId, id }));
    return r ? metricFromRow(r) : undefined;
  }

  async getMany(environmentId: string, ids: string[]): Promise<PricingMetric[]> {
    if (ids.length === 0) return [];
    const rows = await this.sql.run((em) => em.findBy(this.entities.PricingMetric, { environment_id: environmentId, id: In(ids) }));
    return rows.map(metricFromRow);
  }

  async list(environmentId: string, page: Page): Promise<PageResult<PricingMetric>> {
    const rows = await this.sql.run((em) =>
      em.find(this.entities.PricingMetric, { where: { environment_id: environmentId }, order: { seq: "ASC" }, take: page.limit + 1, skip: page.offset }),
    );
    return toPageResult(rows.map(metricFromRow), page);
  }
}

// ---- rate cards ----

export class SqlRateCardStore implements RateCardStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
  ) {}

  async insert(card: RateCard): Promise<void> {
    try {
      await this.insertCard(card);
    } catch (err) {
      if (isUniqueViolation(err)) throw rateConflict(clashingCodes({ fixed: card.fixedRates, usage: card.usageRates }), "rate card");
      throw err;
    }
  }

  private async insertCard(card: RateCard): Promise<void> {
    await this.sql.transaction(async (em) => {
      if (card.rateCatalogId && card.currency) {
        await claimCatalogCurrency(em, this.sql, card.environmentId, card.rateCatalogId, card.currency);
      }
      await em.insert(this.entities.RateCard, {
        id: card.id,
        environment_id: card.environmentId,
        name: card.name,
        description: card.description,
        billing_interval: card.billingInterval,
        currency: card.currency,
        metadata: card.metadata,
        rate_catalog_id: card.rateCatalogId,
        created_at: card.createdAt,
        updated_at: card.updatedAt,
      });
      const owner: Owner = { kind: "card", id: card.id, environmentId: card.environmentId, interval: card.billingInterval, at: card.createdAt };
      await insertRates(em, this.entities, owner, { fixed: card.fixedRates, usage: card.usageRates });
    });
  }

  private async hydrate(em: EntityManager, cards: RateCardRow[]): Promise<RateCard[]> {
    if (cards.length === 0) return [];
    const rates = await em.find(this.entities.Rate, { where: { owner_id: In(cards.map((c) => c.id)) }, order: { seq: "ASC" } });
    const cells = await loadCells(em, this.entities, rates);
    return cards.map((c) => {
      const own = rates.filter((r) => r.owner_id === c.id).map((r) => rateFromRows(r, cells.get(r.id) ?? []));
      return {
        id: c.id,
        environmentId: c.environment_id,
        name: c.name,
        description: c.description,
        billingInterval: c.billing_interval as BillingInterval,
        metadata: c.metadata ?? {},
        rateCatalogId: c.rate_catalog_id,
        fixedRates: own.filter((r): r is FixedRate => !("pricingMetricId" in r)),
        usageRates: own.filter((r): r is UsageRate => "pricingMetricId" in r),
        currency: c.currency,
        createdAt: c.created_at,
        updatedAt: c.updated_at,
      };
    });
  }

  async get(environmentId: string, id: string): Promise<RateCard | undefined> {
    return this.sql.run(async (em) => {
      const row = await em.findOneBy(this.entities.RateCard, { environment_id: environmentId, id });
      return row ? (await this.hydrate(em, [row]))[0] : undefined;
    });
  }

  async list(environmentId: string, page: Page): Promise<PageResult<RateCard>> {
    return this.sql.run(async (em) => {
      const rows = await em.find(this.entities.RateCard, {
        where: { environment_id: environmentId },
        order: { seq: "ASC" },
        take: page.limit + 1,
        skip: page.offset,
      });
      const result = toPageResult(rows, page);
      return { items: await this.hydrate(em, result.items), hasMore: result.hasMore };
    });
  }
}

// ---- rate catalogs ----

function catalogFromRow(r: RateCatalogRow): RateCatalog {
  return {
    id: r.id,
    environmentId: r.environment_id,
    name: r.name,
    description: r.description,
    rateCount: Number(r.rate_count),
    currency: r.currency,
    createdAt: r.created_at,
  };
}

function catalogRateFromRows(row: RateRow, cells: RateCellRow[]): CatalogRate {
  const rate = rateFromRows(row, cells);
  const base = { id: row.id, catalogId: row.owner_id, interval: row.billing_interval as BillingInterval };
  return row.kind === "fixed" ? { ...base, type: "fixed", rate: rate as FixedRate } : { ...base, type: "usage_based", rate: rate as UsageRate };
}

export class SqlRateCatalogStore implements RateCatalogStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
  ) {}

  async insert(c: RateCatalog): Promise<void> {
    await this.sql.run((em) =>
      em.insert(this.entities.RateCatalog, {
        id: c.id,
        environment_id: c.environmentId,
        name: c.name,
        description: c.description,
        rate_count: 0,
        currency: null,
        created_at: c.createdAt,
      }),
    );
  }

  async get(environmentId: string, id: string): Promise<RateCatalog | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.entities.RateCatalog, { environment_id: environmentId, id }));
    return r ? catalogFromRow(r) : undefined;
  }

  async list(environmentId: string, page: Page): Promise<PageResult<RateCatalog>> {
    const rows = await this.sql.run((em) =>
      em.find(this.entities.RateCatalog, { where: { environment_id: environmentId }, order: { seq: "ASC" }, take: page.limit + 1, skip: page.offset }),
    );
    return toPageResult(rows.map(catalogFromRow), page);
  }

  async codes(environmentId: string, catalogId: string, interval: BillingInterval): Promise<Set<string>> {
    const rows = await this.sql.run((em) =>
      em.find(this.entities.Rate, { select: { code: true }, where: { environment_id: environmentId, owner_id: catalogId, billing_interval: interval } }),
    );
    return new Set(rows.map((r) => r.code));
  }

  async addRates(environmentId: string, catalogId: string, interval: BillingInterval, rates: RateSet): Promise<RateCatalog> {
    try {
      return await this.sql.transaction(async (em) => {
        if (rates.currency) await claimCatalogCurrency(em, this.sql, environmentId, catalogId, rates.currency);
        const owner: Owner = { kind: "catalog", id: catalogId, environmentId, interval, at: new Date() };
        await insertRates(em, this.entities, owner, rates);
        const added = rates.fixed.length + rates.usage.length;
        await em.query("UPDATE rate_catalogs SET rate_count = rate_count + ? WHERE id = ?", [added, catalogId]);
        const row = await em.findOneByOrFail(this.entities.RateCatalog, { id: catalogId });
        return catalogFromRow(row);
      });
    } catch (err) {
      if (isUniqueViolation(err)) {
        // A concurrent add_rates took a code between the check and this write: name it.
        throw rateConflict(clashingCodes(rates, await this.codes(environmentId, catalogId, interval)), "rate catalog");
      }
      throw err;
    }
  }

  private async catalogRates(environmentId: string, catalogId: string, opts: { interval?: BillingInterval; page?: Page }): Promise<CatalogRate[]> {
    return this.sql.run(async (em) => {
      const rows = await em.find(this.entities.Rate, {
        where: { environment_id: environmentId, owner_id: catalogId, ...(opts.interval ? { billing_interval: opts.interval } : {}) },
        order: { seq: "ASC" },
        ...(opts.page ? { take: opts.page.limit + 1, skip: opts.page.offset } : {}),
      });
      const cells = await loadCells(em, this.entities, rows);
      return rows.map((r) => catalogRateFromRows(r, cells.get(r.id) ?? []));
    });
  }

  async listRates(environmentId: string, catalogId: string, page: Page): Promise<PageResult<CatalogRate>> {
    return toPageResult(await this.catalogRates(environmentId, catalogId, { page }), page);
  }

  ratesFor(environmentId: string, catalogId: string, interval: BillingInterval): Promise<CatalogRate[]> {
    return this.catalogRates(environmentId, catalogId, { interval });
  }
}
