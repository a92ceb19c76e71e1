/** Storage of rate cards (their rates are rows of the shared rates table, rate-rows.ts). */
import { type EntityManager, In, IsNull, Not } from "typeorm";
import type { ArchivedFilter } from "../../billing/catalog/metrics.js";
import type { RateCardStore } from "../../billing/catalog/rate-cards.js";
import type { BillingInterval, FixedRate, RateCard, UsageRate } from "../../billing/catalog/types.js";
import type { Page, PageResult } from "../../billing/pagination.js";
import { toPageResult } from "../../billing/pagination.js";
import type { Entities, RateCardRow } from "../entities/index.js";
import { isUniqueViolation } from "../errors.js";
import type { Sql } from "../sql.js";
import { type Owner, rateFromRows, loadCells, clashingCodes, rateConflict, insertRates, claimCatalogCurrency } from "./rate-rows.js";

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
        archived_at: card.archivedAt,
        default_tax_rate_ids: card.defaultTaxRateIds ?? [],
      });
      const owner: Owner = { kind: "card", id: card.id, environmentId: card.environmentId, interval: card.billingInterval, at: card.createdAt };
      await insertRates(em, this.entities, owner, { fixed: card.fixedRates, usage: card.usageRates });
    });
  }

  private async hydrate(em: EntityManager, cards: RateCardRow[]): Promise<RateCard[]> {
    if (cards.length === 0) return [];
    // The cards' environment (a page of cards is one environment's).
    const environmentIds = [...new Set(cards.map((c) => c.environment_id))];
    const rates = await em.find(this.entities.Rate, {
      where: environmentIds.map((environment_id) => ({ environment_id, owner_id: In(cards.filter((c) => c.environment_id === environment_id).map((c) => c.id)) })),
      order: { seq: "ASC" },
    });
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
        archivedAt: c.archived_at,
        updatedAt: c.updated_at,
        defaultTaxRateIds: c.default_tax_rate_ids ?? [],
      };
    });
  }

  async get(environmentId: string, id: string): Promise<RateCard | undefined> {
    return this.sql.run(async (em) => {
      const row = await em.findOneBy(this.entities.RateCard, { environment_id: environmentId, id });
      return row ? (await this.hydrate(em, [row]))[0] : undefined;
    });
  }

  async list(environmentId: string, page: Page, filter: ArchivedFilter = {}): Promise<PageResult<RateCard>> {
    return this.sql.run(async (em) => {
      const rows = await em.find(this.entities.RateCard, {
        where: { environment_id: environmentId, ...archivedWhere(filter) },
        order: { seq: "ASC" },
        take: page.limit + 1,
        skip: page.offset,
      });
      const result = toPageResult(rows, page);
      return { items: await this.hydrate(em, result.items), hasMore: result.hasMore };
    });
  }

  /** Replaces a card's default tax rates (DESIGN §15); the card as it is then. */
  async setTaxRates(environmentId: string, id: string, ids: string[], at: Date): Promise<RateCard | undefined> {
    return this.sql.transaction(async (em) => {
      await em.update(this.entities.RateCard, { environment_id: environmentId, id }, { default_tax_rate_ids: ids, updated_at: at });
      const row = await em.findOneBy(this.entities.RateCard, { environment_id: environmentId, id });
      return row ? (await this.hydrate(em, [row]))[0] : undefined;
    });
  }

  async archive(environmentId: string, id: string, at: Date): Promise<RateCard | undefined> {
    // Only a card not archived yet takes the time: archiving again keeps the first one.
    return this.sql.transaction(async (em) => {
      await em.update(this.entities.RateCard, { environment_id: environmentId, id, archived_at: IsNull() }, { archived_at: at, updated_at: at });
      const row = await em.findOneBy(this.entities.RateCard, { environment_id: environmentId, id });
      return row ? (await this.hydrate(em, [row]))[0] : undefined;
    });
  }
}

/** The `where` of a list's `archived` filter (rate cards and pricing metrics alike). */
export function archivedWhere(filter: ArchivedFilter): { archived_at?: ReturnType<typeof IsNull> } {
  if (filter.archived === undefined) return {};
  return { archived_at: filter.archived ? Not(IsNull()) : IsNull() };
}
