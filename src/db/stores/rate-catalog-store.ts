/** Storage of rate catalogs and their rates (rows of the shared rates table, rate-rows.ts). */
import type { RateCatalogStore } from "../../billing/catalog/rate-catalogs.js";
import type { BillingInterval, CatalogRate, FixedRate, RateCatalog, RateSet, UsageRate } from "../../billing/catalog/types.js";
import type { Page, PageResult } from "../../billing/pagination.js";
import { toPageResult } from "../../billing/pagination.js";
import type { Entities, RateCatalogRow, RateCellRow, RateRow } from "../entities/index.js";
import { isUniqueViolation } from "../errors.js";
import type { Sql } from "../sql.js";
import { type Owner, rateFromRows, loadCells, clashingCodes, rateConflict, insertRates, claimCatalogCurrency } from "./rate-rows.js";

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
    await this.sql.write((em) =>
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
    const rows = await this.sql.run((em) => em.find(this.entities.RateCatalog, { where: { environment_id: environmentId }, order: { seq: "ASC" }, take: page.limit + 1, skip: page.offset }));
    return toPageResult(rows.map(catalogFromRow), page);
  }

  async codes(environmentId: string, catalogId: string, interval: BillingInterval): Promise<Set<string>> {
    const rows = await this.sql.run((em) => em.find(this.entities.Rate, { select: { code: true }, where: { environment_id: environmentId, owner_id: catalogId, billing_interval: interval } }));
    return new Set(rows.map((r) => r.code));
  }

  async addRates(environmentId: string, catalogId: string, interval: BillingInterval, rates: RateSet): Promise<RateCatalog> {
    try {
      return await this.sql.transaction(async (em) => {
        if (rates.currency) await claimCatalogCurrency(em, this.sql, environmentId, catalogId, rates.currency);
        const owner: Owner = { kind: "catalog", id: catalogId, environmentId, interval, at: new Date() };
        await insertRates(em, this.entities, owner, rates);
        const added = rates.fixed.length + rates.usage.length;
        await em.query("UPDATE rate_catalogs SET rate_count = rate_count + ? WHERE environment_id = ? AND id = ?", [added, environmentId, catalogId]);
        const row = await em.findOneByOrFail(this.entities.RateCatalog, { environment_id: environmentId, id: catalogId });
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
