/** Rate catalogs: named collections of rates, added in bulk per billing interval. */
import { FailedPreconditionError, NotFoundError, Violations, invalid } from "../errors.js";
import { newId } from "../ids.js";
import { type Page, type PageResult, checkPage } from "../pagination.js";
import type { Caller } from "../tenancy.js";
import { type PricingMetricStore, loadMetricsForNewRates } from "./metrics.js";
import { checkBillingInterval, checkRates, checkText } from "./rates.js";
import type { BillingInterval, CatalogRate, RateCatalog, RateSet, RatesInput } from "./types.js";

export interface RateCatalogStore {
  insert(catalog: RateCatalog): Promise<void>;
  get(environmentId: string, id: string): Promise<RateCatalog | undefined>;
  list(environmentId: string, page: Page): Promise<PageResult<RateCatalog>>;
  /** Codes of the catalog's rates for one interval. */
  codes(environmentId: string, catalogId: string, interval: BillingInterval): Promise<Set<string>>;
  /**
   * Adds the rates in one transaction, claiming the catalog's currency for them. Throws
   * FailedPreconditionError when the catalog uses another currency by then, and
   * AlreadyExistsError when a code was taken meanwhile (the unique key decides).
   */
  addRates(environmentId: string, catalogId: string, interval: BillingInterval, rates: RateSet): Promise<RateCatalog>;
  listRates(environmentId: string, catalogId: string, page: Page): Promise<PageResult<CatalogRate>>;
  /** Every rate of the catalog for one interval, in the order added. */
  ratesFor(environmentId: string, catalogId: string, interval: BillingInterval): Promise<CatalogRate[]>;
}

export class RateCatalogService {
  constructor(
    private readonly catalogs: RateCatalogStore,
    private readonly metrics: PricingMetricStore,
    private readonly now: () => Date,
  ) {}

  async create(caller: Caller, input: { name: string; description: string }): Promise<RateCatalog> {
    const v = new Violations();
    checkText(v, "name", input.name, 255, true);
    checkText(v, "description", input.description, 2000, false);
    v.throwIfAny();
    const catalog: RateCatalog = {
      id: newId("rcat"),
      environmentId: caller.environmentId,
      name: input.name,
      description: input.description,
      rateCount: 0,
      currency: null,
      createdAt: this.now(),
    };
    await this.catalogs.insert(catalog);
    return catalog;
  }

  async get(caller: Caller, id: string): Promise<RateCatalog> {
    const c = id === "" ? undefined : await this.catalogs.get(caller.environmentId, id);
    if (!c) throw new NotFoundError("RATE_CATALOG_NOT_FOUND", `rate catalog ${JSON.stringify(id)} not found`, { rate_catalog_id: id });
    return c;
  }

  async list(caller: Caller, limit?: number, offset?: number): Promise<PageResult<RateCatalog>> {
    const v = new Violations();
    const page = checkPage(limit, offset, v);
    v.throwIfAny();
    return this.catalogs.list(caller.environmentId, page);
  }

  async addRates(caller: Caller, catalogId: string, input: RatesInput & { billingInterval: string }): Promise<RateCatalog> {
    const catalog = await this.get(caller, catalogId);
    const v = new Violations();
    const interval = checkBillingInterval(input.billingInterval, v);
    if (input.fixedRates.length + input.usageBasedRates.length === 0) v.add("", "give at least one rate in fixed_rates or usage_based_rates");
    const taken = interval ? await this.catalogs.codes(caller.environmentId, catalog.id, interval) : new Set<string>();
    const metrics = await loadMetricsForNewRates(this.metrics, caller.environmentId, input, v);
    const rates = checkRates(input, { metrics, takenCodes: taken, currency: catalog.currency, owner: "rate catalog" }, v);
    v.throwIfAny();
    try {
      return await this.catalogs.addRates(caller.environmentId, catalog.id, interval as BillingInterval, rates);
    } catch (err) {
      if (err instanceof FailedPreconditionError) {
        invalid("", `the rate catalog's prices and rate cards use another currency than ${rates.currency}`);
      }
      throw err;
    }
  }

  async listRates(caller: Caller, catalogId: string, limit?: number, offset?: number): Promise<PageResult<CatalogRate>> {
    const v = new Violations();
    const page = checkPage(limit, offset, v);
    v.throwIfAny();
    const catalog = await this.get(caller, catalogId);
    return this.catalogs.listRates(caller.environmentId, catalog.id, page);
  }
}
