/** In-memory fakes of what the billing engine reads of the catalog and of usage (EngineCatalog, UsageMeter). */
import type { CatalogRate, PricingMetric, RateCard } from "../../src/billing/catalog/types.js";
import { type Decimal, ZERO, dec } from "../../src/billing/money.js";
import type { UsageMeter } from "../../src/billing/subscriptions/invoice-building.js";
import type { EngineCatalog } from "../../src/billing/subscriptions/reads.js";

export class FakeCatalog implements EngineCatalog {
  readonly cardsById = new Map<string, RateCard>();
  readonly metricsById = new Map<string, PricingMetric>();
  readonly catalogRates = new Map<string, CatalogRate[]>();

  readonly cards: EngineCatalog["cards"] = { get: async (env, id) => structuredClone([this.cardsById.get(id)].find((c) => c?.environmentId === env)) };
  readonly catalogs: EngineCatalog["catalogs"] = { ratesFor: async (_env, catalogId, interval) => (this.catalogRates.get(catalogId) ?? []).filter((r) => r.interval === interval) };
  readonly metrics: EngineCatalog["metrics"] = { getMany: async (env, ids) => ids.flatMap((id) => [this.metricsById.get(id)].filter((m): m is PricingMetric => m?.environmentId === env)) };
}

/** Usage events as the meter sees them: a value at an instant, for a metric and a subject (no dimensions). */
export class FakeUsage implements UsageMeter {
  readonly events: { metricId: string; subjectId: string; at: Date; value: string }[] = [];

  record(metricId: string, subjectId: string, at: Date, value: string): void {
    this.events.push({ metricId, subjectId, at, value });
  }

  /** The sum of the values in [from, to). */
  async measure(metric: PricingMetric, subjectId: string, from: Date, to: Date): Promise<{ coordinates: Record<string, string>; value: Decimal }[]> {
    const mine = this.events.filter((e) => e.metricId === metric.id && e.subjectId === subjectId && e.at >= from && e.at < to);
    return [{ coordinates: {}, value: mine.reduce((acc, e) => acc.plus(dec(e.value)), ZERO) }];
  }
}
