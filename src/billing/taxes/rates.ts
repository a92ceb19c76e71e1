/** Tax rates (DESIGN §15): created, read, listed and archived; never changed otherwise. */
import type { ArchivedFilter } from "../catalog/metrics.js";
import { NotFoundError, Violations } from "../errors.js";
import { newId } from "../ids.js";
import { type Metadata, checkMetadata } from "../metadata.js";
import { formatDecimal, parseDecimal } from "../money.js";
import { type Page, type PageResult, checkPage } from "../pagination.js";
import type { Caller } from "../tenancy.js";
import type { TaxRateReader } from "./built-in.js";
import { checkCountry } from "./details.js";
import type { TaxRate } from "./types.js";

/** Storage port. Implementations scope every query to `environmentId`. */
export interface TaxRateStore {
  insert(rate: TaxRate): Promise<void>;
  get(environmentId: string, id: string): Promise<TaxRate | undefined>;
  list(environmentId: string, page: Page, filter: ArchivedFilter): Promise<PageResult<TaxRate>>;
  /** Marks the rate archived (once); the rate as it is then, or undefined when there is none. */
  archive(environmentId: string, id: string): Promise<TaxRate | undefined>;
  /** Rates by id, archived ones too. */
  byIds: TaxRateReader;
}

export interface CreateTaxRateInput {
  displayName: string;
  percentage: string;
  inclusive: boolean;
  country?: string;
  region?: string;
  description?: string;
  metadata: Metadata;
}

export const MAX_DISPLAY_NAME = 50;
const MAX_PERCENT_PLACES = 4;

/** An exact percentage, 0..100 with at most 4 decimal places, canonical; a violation otherwise. */
export function checkPercentage(text: string, field: string, v: Violations): string {
  const d = text.trim() === "" ? undefined : parseDecimal(text);
  if (!d) {
    v.add(field, text.trim() === "" ? "is required" : "must be a decimal number");
    return text;
  }
  if (d.lt(0) || d.gt(100)) v.add(field, "must be from 0 to 100");
  else if (d.decimalPlaces() > MAX_PERCENT_PLACES) v.add(field, `must have at most ${MAX_PERCENT_PLACES} decimal places`);
  return formatDecimal(d);
}

/**
 * Each of `ids` a tax rate of the environment, not archived, given once; violations at
 * `v`'s path with the index (e.g. `default_tax_rate_ids[1]`).
 */
export async function checkTaxRateIds(read: TaxRateReader, environmentId: string, ids: readonly string[], v: Violations): Promise<void> {
  const found = new Map((ids.length === 0 ? [] : await read(environmentId, [...new Set(ids)])).map((r) => [r.id, r]));
  const seen = new Set<string>();
  ids.forEach((id, i) => {
    const r = found.get(id);
    if (seen.has(id)) v.at(i).add("", "repeats a tax rate given before");
    else if (!r) v.at(i).add("", "no tax rate with this ID exists");
    else if (r.archived) v.at(i).add("", "the tax rate is archived");
    seen.add(id);
  });
}

function notFound(id: string): NotFoundError {
  return new NotFoundError("TAX_RATE_NOT_FOUND", `tax rate ${JSON.stringify(id)} not found`, { tax_rate_id: id });
}

export class TaxRates {
  constructor(
    private readonly store: TaxRateStore,
    private readonly now: () => Date,
  ) {}

  async create(caller: Caller, input: CreateTaxRateInput): Promise<TaxRate> {
    const v = new Violations();
    const name = input.displayName.trim();
    if (name === "") v.add("display_name", "is required");
    else if (input.displayName.length > MAX_DISPLAY_NAME) v.add("display_name", `must have at most ${MAX_DISPLAY_NAME} characters`);
    const percentage = checkPercentage(input.percentage, "percentage", v);
    const country = input.country === undefined || input.country === "" ? null : checkCountry(input.country, "country", v);
    const region = input.region === undefined || input.region === "" ? null : input.region.toUpperCase();
    if (region !== null && country === null) v.add("region", "needs a country");
    if (region !== null && !/^[A-Z0-9]{1,3}$/.test(region)) v.add("region", "must be an ISO 3166-2 subdivision code without the country, e.g. CA");
    if ((input.description ?? "").length > 500) v.add("description", "must have at most 500 characters");
    checkMetadata(input.metadata, v.at("metadata"));
    v.throwIfAny();
    const rate: TaxRate = {
      id: newId("txr"),
      environmentId: caller.environmentId,
      displayName: input.displayName,
      percentage,
      inclusive: input.inclusive,
      country,
      region,
      description: input.description || null,
      archived: false,
      createdAt: this.now(),
      metadata: input.metadata,
    };
    await this.store.insert(rate);
    return rate;
  }

  async get(caller: Caller, id: string): Promise<TaxRate> {
    const rate = id === "" ? undefined : await this.store.get(caller.environmentId, id);
    if (!rate) throw notFound(id);
    return rate;
  }

  async list(caller: Caller, limit?: number, offset?: number, filter: ArchivedFilter = {}): Promise<PageResult<TaxRate>> {
    const v = new Violations();
    const page = checkPage(limit, offset, v);
    v.throwIfAny();
    return this.store.list(caller.environmentId, page, filter);
  }

  /** Archiving an archived rate changes nothing and answers it. */
  async archive(caller: Caller, id: string): Promise<TaxRate> {
    const rate = id === "" ? undefined : await this.store.archive(caller.environmentId, id);
    if (!rate) throw notFound(id);
    return rate;
  }

  /** For the other use cases: `ids` exist, are not archived and are not repeated. */
  checkIds(environmentId: string, ids: readonly string[], v: Violations): Promise<void> {
    return checkTaxRateIds(this.store.byIds, environmentId, ids, v);
  }
}
