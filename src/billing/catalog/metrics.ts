/** Pricing metrics: which events, which value, which aggregation, which dimensions. */
import { NotFoundError, Violations } from "../errors.js";
import { newId } from "../ids.js";
import { type Page, type PageResult, checkPage } from "../pagination.js";
import type { Caller } from "../tenancy.js";
import { checkText, metricIdsOf } from "./rates.js";
import { AGGREGATION_TYPES, type AggregationType, type PricingMetric, type RatesInput } from "./types.js";

export interface PricingMetricStore {
  insert(metric: PricingMetric): Promise<void>;
  get(environmentId: string, id: string): Promise<PricingMetric | undefined>;
  /** The metrics of the environment among `ids` (unknown IDs are simply absent). */
  getMany(environmentId: string, ids: string[]): Promise<PricingMetric[]>;
  /** With `archived`, only the metrics that are (true) or are not (false) archived. */
  list(environmentId: string, page: Page, filter?: ArchivedFilter): Promise<PageResult<PricingMetric>>;
  /**
   * Sets the metric's `archivedAt` to `at` unless it is archived already (then it keeps its
   * own), atomically; the metric as it is then, or undefined when there is no such metric.
   */
  archive(environmentId: string, id: string, at: Date): Promise<PricingMetric | undefined>;
}

/** A list's `archived` filter: absent, every item; true, only archived ones; false, only the others. */
export interface ArchivedFilter {
  archived?: boolean;
}

/**
 * The pricing metrics a rate input names, by ID, for checkRates; a rate naming an archived one
 * is refused at `usage_based_rates[i].pricing_metric_id` (no new rate may use it). The archived
 * metric stays in the map, so the rate's other checks (dimensions) still run.
 */
export async function loadMetricsForNewRates(store: Pick<PricingMetricStore, "getMany">, environmentId: string, input: RatesInput, v: Violations): Promise<Map<string, PricingMetric>> {
  const metrics = new Map((await store.getMany(environmentId, metricIdsOf(input))).map((m) => [m.id, m]));
  input.usageBasedRates.forEach((r, i) => {
    const m = metrics.get(r.pricingMetricId);
    if (m?.archivedAt) v.at("usage_based_rates").at(i).add("pricing_metric_id", `is archived: pricing metric ${m.id} was archived at ${m.archivedAt.toISOString()}; no new rate may use it`);
  });
  return metrics;
}

function notFound(id: string): NotFoundError {
  return new NotFoundError("PRICING_METRIC_NOT_FOUND", `pricing metric ${JSON.stringify(id)} not found`, { pricing_metric_id: id });
}

export interface CreatePricingMetricInput {
  eventName: string;
  name: string;
  unit: string;
  dimensions: string[];
  aggregation?: { aggregationType: string; valueField?: string };
}

export const MAX_DIMENSIONS = 20;
const FIELD = /^[A-Za-z0-9_.:-]{1,100}$/;

export class PricingMetricService {
  constructor(
    private readonly store: PricingMetricStore,
    private readonly now: () => Date,
  ) {}

  async create(caller: Caller, input: CreatePricingMetricInput): Promise<PricingMetric> {
    const v = new Violations();
    for (const [field, value] of [
      ["event_name", input.eventName],
      ["name", input.name],
      ["unit", input.unit],
    ] as const)
      checkText(v, field, value, 255, true);
    if (input.dimensions.length > MAX_DIMENSIONS) v.add("dimensions", `must have at most ${MAX_DIMENSIONS} entries`);
    const seen = new Set<string>();
    input.dimensions.forEach((d, i) => {
      if (!FIELD.test(d)) v.at("dimensions").at(i).add("", "must be 1 to 100 letters, digits or _ . : -");
      else if (seen.has(d))
        v.at("dimensions")
          .at(i)
          .add("", `duplicates ${JSON.stringify(d)}`);
      seen.add(d);
    });
    const av = v.at("aggregation");
    let aggregation: PricingMetric["aggregation"] | undefined;
    if (!input.aggregation) av.add("", "is required");
    else {
      const type = input.aggregation.aggregationType as AggregationType;
      const field = input.aggregation.valueField;
      if (!AGGREGATION_TYPES.includes(type)) {
        av.add("aggregation_type", input.aggregation.aggregationType === "" ? "is required: sum, count, max, last or unique_count" : "must be sum, count, max, last or unique_count");
      } else if (type === "count") {
        if (field) av.add("value_field", "is not used by count");
        else aggregation = { type, valueField: null };
      } else if (!field) {
        av.add("value_field", `is required for ${type}`);
      } else if (!FIELD.test(field)) {
        av.add("value_field", "must be 1 to 100 letters, digits or _ . : -");
      } else if (seen.has(field)) {
        av.add("value_field", "must not also be a dimension");
      } else {
        aggregation = { type, valueField: field };
      }
    }
    v.throwIfAny();
    const metric: PricingMetric = {
      id: newId("pm"),
      environmentId: caller.environmentId,
      eventName: input.eventName,
      name: input.name,
      unit: input.unit,
      dimensions: input.dimensions,
      aggregation: aggregation as PricingMetric["aggregation"],
      createdAt: this.now(),
      archivedAt: null,
    };
    await this.store.insert(metric);
    return metric;
  }

  async get(caller: Caller, id: string): Promise<PricingMetric> {
    const m = id === "" ? undefined : await this.store.get(caller.environmentId, id);
    if (!m) throw notFound(id);
    return m;
  }

  async list(caller: Caller, limit?: number, offset?: number, filter: ArchivedFilter = {}): Promise<PageResult<PricingMetric>> {
    const v = new Violations();
    const page = checkPage(limit, offset, v);
    v.throwIfAny();
    return this.store.list(caller.environmentId, page, filter);
  }

  /**
   * Archives the metric: no new rate may use it; rates already using it keep metering and
   * billing, and its events are still accepted. Archiving an archived metric changes nothing.
   */
  async archive(caller: Caller, id: string): Promise<PricingMetric> {
    const m = id === "" ? undefined : await this.store.archive(caller.environmentId, id, this.now());
    if (!m) throw notFound(id);
    return m;
  }
}
