/**
 * What the billing engine reads besides subscriptions and invoices, cached: rate cards and
 * pricing metrics (never changed once created), a catalog's rates, an environment's mode and
 * payment provider (never changed), and its draft grace period (cached a few seconds).
 */
import { chargedRates } from "../catalog/addons.js";
import type { PricingMetricStore } from "../catalog/metrics.js";
import type { RateCardStore } from "../catalog/rate-cards.js";
import type { RateCatalogStore } from "../catalog/rate-catalogs.js";
import type { PricingMetric, RateCard } from "../catalog/types.js";
import type { EnvironmentMode } from "../tenancy.js";
import type { PaymentProviders } from "./payments.js";
import type { BillingStores } from "./ports.js";
import type { PaymentProvider } from "./types.js";

/** How long an environment's grace period setting is cached (an operator may change it). */
const GRACE_CACHE_MS = 5_000;

/** What the engine reads of the catalog: cards and metrics by ID, a catalog's rates (add-ons). */
export interface EngineCatalog {
  cards: Pick<RateCardStore, "get">;
  catalogs: Pick<RateCatalogStore, "ratesFor">;
  metrics: Pick<PricingMetricStore, "getMany">;
}

export class BillingReads {
  private readonly cards: EngineCatalog["cards"];
  readonly catalogs: EngineCatalog["catalogs"];
  private readonly metrics: EngineCatalog["metrics"];

  constructor(
    private readonly stores: BillingStores,
    catalog: EngineCatalog,
    /** The payment provider of each environment (payments.ts): its settings' choice, never test cards for live. */
    readonly payments: PaymentProviders,
  ) {
    this.cards = catalog.cards;
    this.catalogs = catalog.catalogs;
    this.metrics = catalog.metrics;
  }

  // An environment's mode never changes (environments are created with it), so it is cached.
  private readonly modeCache = new Map<string, EnvironmentMode>();

  /**
   * The payment provider of an environment, as its payment settings choose (payments.ts
   * forEnvironment): never the test provider for a live environment. An unknown environment has none.
   */
  async providerFor(environmentId: string): Promise<PaymentProvider | undefined> {
    const mode = await this.modeOf(environmentId);
    return mode === undefined ? undefined : this.payments.forEnvironment(environmentId, mode);
  }

  /** An environment's mode (cached), or undefined when there is no such environment. */
  async modeOf(environmentId: string): Promise<EnvironmentMode | undefined> {
    let mode = this.modeCache.get(environmentId);
    if (mode === undefined) {
      mode = await this.stores.directory.environmentMode(environmentId);
      if (mode === undefined) return undefined;
      if (this.modeCache.size > 10_000) this.modeCache.clear();
      this.modeCache.set(environmentId, mode);
    }
    return mode;
  }

  // Rate cards and pricing metrics never change once created, so they are cached for ever.
  private readonly cardCache = new Map<string, RateCard>();
  private readonly metricCache = new Map<string, PricingMetric>();

  async card(environmentId: string, id: string): Promise<RateCard> {
    const key = `${environmentId}/${id}`;
    const hit = this.cardCache.get(key);
    if (hit) return hit;
    const card = await this.cards.get(environmentId, id);
    if (!card) throw new Error(`rate card ${id} vanished`);
    if (this.cardCache.size > 10_000) this.cardCache.clear();
    this.cardCache.set(key, card);
    return card;
  }

  /** Pricing metrics by ID (cached). */
  async metricsOf(environmentId: string, ids: string[]): Promise<Map<string, PricingMetric>> {
    // The hits are taken before any wait: another call may empty a full cache meanwhile.
    const out = new Map<string, PricingMetric>();
    for (const id of ids) {
      const hit = this.metricCache.get(`${environmentId}/${id}`);
      if (hit) out.set(id, hit);
    }
    const missing = ids.filter((id) => !out.has(id));
    if (missing.length > 0) {
      const read = await this.metrics.getMany(environmentId, missing);
      if (this.metricCache.size > 10_000) this.metricCache.clear();
      for (const m of read) {
        this.metricCache.set(`${environmentId}/${m.id}`, m);
        out.set(m.id, m);
      }
    }
    return new Map(ids.map((id) => [id, out.get(id) as PricingMetric]));
  }

  /** The card's rates a subscription is charged for, catalog add-ons included. */
  async rates(card: RateCard, quantities: Record<string, string>) {
    const catalogRates = card.rateCatalogId ? await this.catalogs.ratesFor(card.environmentId, card.rateCatalogId, card.billingInterval) : [];
    return chargedRates(card, catalogRates, quantities);
  }

  private readonly graceCache = new Map<string, { seconds: number; until: number }>();

  /** An environment's draft grace period in seconds (cached a few seconds). */
  async graceSeconds(environmentId: string): Promise<number> {
    const hit = this.graceCache.get(environmentId);
    if (hit && hit.until > Date.now()) return hit.seconds;
    const seconds = await this.stores.directory.invoiceGraceSeconds(environmentId);
    if (this.graceCache.size > 10_000) this.graceCache.clear();
    this.graceCache.set(environmentId, { seconds, until: Date.now() + GRACE_CACHE_MS });
    return seconds;
  }
}
