/** Storage of pricing metrics. */
import { In, IsNull } from "typeorm";
import type { ArchivedFilter, PricingMetricStore } from "../../billing/catalog/metrics.js";
import type { AggregationType, PricingMetric } from "../../billing/catalog/types.js";
import type { Page, PageResult } from "../../billing/pagination.js";
import { toPageResult } from "../../billing/pagination.js";
import type { Entities, PricingMetricRow } from "../entities/index.js";
import type { Sql } from "../sql.js";
import { archivedWhere } from "./rate-card-store.js";
import { backfillTotals } from "./usage-store.js";

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
    archivedAt: r.archived_at,
  };
}

export class SqlPricingMetricStore implements PricingMetricStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
    /** Told of a backfill's progress: the events added so far after each page of 5,000. */
    private readonly onBackfill?: (metric: PricingMetric, events: number, startedAt: number) => void,
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
        archived_at: m.archivedAt,
      });
      const started = Date.now();
      const report = this.onBackfill;
      await backfillTotals(em, this.sql.dialect, m, undefined, report && ((n) => report(m, n, started)));
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

  async list(environmentId: string, page: Page, filter: ArchivedFilter = {}): Promise<PageResult<PricingMetric>> {
    const where = { environment_id: environmentId, ...archivedWhere(filter) };
    const rows = await this.sql.run((em) => em.find(this.entities.PricingMetric, { where, order: { seq: "ASC" }, take: page.limit + 1, skip: page.offset }));
    return toPageResult(rows.map(metricFromRow), page);
  }

  async archive(environmentId: string, id: string, at: Date): Promise<PricingMetric | undefined> {
    // Only a metric not archived yet takes the time: archiving again keeps the first one.
    return this.sql.transaction(async (em) => {
      await em.update(this.entities.PricingMetric, { environment_id: environmentId, id, archived_at: IsNull() }, { archived_at: at });
      const r = await em.findOneBy(this.entities.PricingMetric, { environment_id: environmentId, id });
      return r ? metricFromRow(r) : undefined;
    });
  }
}
