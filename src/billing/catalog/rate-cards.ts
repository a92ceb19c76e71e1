/** Rate cards (plans): created whole and never changed. */
import { FailedPreconditionError, NotFoundError, Violations, invalid } from "../errors.js";
import { newId } from "../ids.js";
import { type Metadata, checkMetadata } from "../metadata.js";
import { type Page, type PageResult, checkPage } from "../pagination.js";
import type { Caller } from "../tenancy.js";
import type { TaxRateReader } from "../taxes/built-in.js";
import { checkTaxRateIds } from "../taxes/rates.js";
import { type ArchivedFilter, type PricingMetricStore, loadMetricsForNewRates } from "./metrics.js";
import { checkBillingInterval, checkRates, checkText } from "./rates.js";
import type { RateCatalogStore } from "./rate-catalogs.js";
import type { BillingInterval, RateCard, RatesInput } from "./types.js";

export interface RateCardStore {
  /**
   * Inserts the card and its rates in one transaction. With a catalog, also claims the catalog's
   * currency for the card's (atomically); throws FailedPreconditionError when the catalog already
   * uses another currency.
   */
  insert(card: RateCard): Promise<void>;
  get(environmentId: string, id: string): Promise<RateCard | undefined>;
  /** With `archived`, only the cards that are (true) or are not (false) archived. */
  list(environmentId: string, page: Page, filter?: ArchivedFilter): Promise<PageResult<RateCard>>;
  /**
   * Sets the card's `archivedAt` to `at` unless it is archived already (then it keeps its own),
   * atomically; the card as it is then, or undefined when there is no such card.
   */
  archive(environmentId: string, id: string, at: Date): Promise<RateCard | undefined>;
  /** Replaces the card's default tax rates; the card as it is then, or undefined when there is none. */
  setTaxRates(environmentId: string, id: string, taxRateIds: string[], at: Date): Promise<RateCard | undefined>;
}

function notFound(id: string): NotFoundError {
  return new NotFoundError("RATE_CARD_NOT_FOUND", `rate card ${JSON.stringify(id)} not found`, { rate_card_id: id });
}

export interface CreateRateCardInput extends RatesInput {
  billingInterval: string;
  name: string;
  description?: string;
  metadata: Metadata;
  rateCatalogId?: string;
  defaultTaxRateIds?: string[];
}

export class RateCardService {
  constructor(
    private readonly cards: RateCardStore,
    private readonly metrics: PricingMetricStore,
    private readonly catalogs: RateCatalogStore,
    private readonly now: () => Date,
    /** Tax rates by id (DESIGN §15): default tax rates must name active ones. */
    private readonly taxRates: TaxRateReader = async () => [],
  ) {}

  async create(caller: Caller, input: CreateRateCardInput): Promise<RateCard> {
    const v = new Violations();
    checkText(v, "name", input.name, 255, true);
    checkText(v, "description", input.description ?? "", 2000, false);
    checkBillingInterval(input.billingInterval, v);
    checkMetadata(input.metadata, v.at("metadata"));
    let catalogCurrency: string | null = null;
    if (input.rateCatalogId !== undefined) {
      const catalog = input.rateCatalogId === "" ? undefined : await this.catalogs.get(caller.environmentId, input.rateCatalogId);
      if (!catalog) v.add("rate_catalog_id", "no rate catalog with this ID exists");
      else catalogCurrency = catalog.currency;
    }
    const metrics = await loadMetricsForNewRates(this.metrics, caller.environmentId, input, v);
    const rates = checkRates(input, { metrics, currency: catalogCurrency, owner: "rate card" }, v);
    // A card's currency is its prices' (or its catalog's): a card of an empty catalog with no price of its own would have none,
    // and its invoices would be labelled in the default currency whatever the catalog's rates are priced in later.
    if (input.rateCatalogId && catalogCurrency === null && rates.currency === null) {
      v.add(
        "rate_catalog_id",
        "the rate catalog has no priced rates yet, and this card has none of its own: add the catalog's rates first (the card takes their currency), or give the card a priced rate",
      );
    }
    const defaultTaxRateIds = input.defaultTaxRateIds ?? [];
    await checkTaxRateIds(this.taxRates, caller.environmentId, defaultTaxRateIds, v.at("default_tax_rate_ids"));
    v.throwIfAny();
    const now = this.now();
    const card: RateCard = {
      id: newId("rc"),
      environmentId: caller.environmentId,
      name: input.name,
      description: input.description || null,
      billingInterval: input.billingInterval as BillingInterval,
      metadata: input.metadata,
      rateCatalogId: input.rateCatalogId || null,
      fixedRates: rates.fixed,
      usageRates: rates.usage,
      currency: rates.currency,
      createdAt: now,
      archivedAt: null,
      updatedAt: now,
      defaultTaxRateIds,
    };
    try {
      await this.cards.insert(card);
    } catch (err) {
      // The catalog took another currency between the check and the insert.
      if (err instanceof FailedPreconditionError) {
        invalid("rate_catalog_id", `the rate catalog's prices use another currency than ${card.currency}`);
      }
      throw err;
    }
    return card;
  }

  async get(caller: Caller, id: string): Promise<RateCard> {
    const card = id === "" ? undefined : await this.cards.get(caller.environmentId, id);
    if (!card) throw notFound(id);
    return card;
  }

  async list(caller: Caller, limit?: number, offset?: number, filter: ArchivedFilter = {}): Promise<PageResult<RateCard>> {
    const v = new Violations();
    const page = checkPage(limit, offset, v);
    v.throwIfAny();
    return this.cards.list(caller.environmentId, page, filter);
  }

  /**
   * Archives the card: no new subscription, timeline item or rate-card change may use it (see
   * subscriptions/lookups.ts); subscriptions already on it continue and renew. Archiving an
   * archived card changes nothing and answers it as it is.
   */
  async archive(caller: Caller, id: string): Promise<RateCard> {
    const card = id === "" ? undefined : await this.cards.archive(caller.environmentId, id, this.now());
    if (!card) throw notFound(id);
    return card;
  }

  /** Replaces the card's default tax rates: invoices finalized from then on use them. */
  async setTaxRates(caller: Caller, id: string, taxRateIds: string[]): Promise<RateCard> {
    const v = new Violations();
    await checkTaxRateIds(this.taxRates, caller.environmentId, taxRateIds, v.at("tax_rate_ids"));
    v.throwIfAny();
    const card = id === "" ? undefined : await this.cards.setTaxRates(caller.environmentId, id, taxRateIds, this.now());
    if (!card) throw notFound(id);
    return card;
  }
}
