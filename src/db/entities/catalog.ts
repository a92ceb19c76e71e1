/** Tables of the catalog: pricing metrics, rate cards, rate catalogs and their rates and cells. */
import { EntitySchema } from "typeorm";
import { type Dialect, type ExactText, decimalColumn, idColumn, intColumn, jsonColumn, seqColumn, textColumn, timeColumn } from "../columns.js";

export interface PricingMetricRow {
  seq?: string;
  id: string;
  environment_id: string;
  event_name: string;
  name: string;
  unit: string;
  dimensions: string[];
  aggregation_type: string;
  value_field: string | null;
  created_at: Date;
  archived_at: Date | null;
}

export interface RateCardRow {
  seq?: string;
  id: string;
  environment_id: string;
  name: string;
  description: string | null;
  billing_interval: string;
  currency: string | null;
  metadata: Record<string, string>;
  rate_catalog_id: string | null;
  created_at: Date;
  updated_at: Date;
  archived_at: Date | null;
  /** DESIGN §15: tax rate IDs (JSON); NULL on cards made before: none. */
  default_tax_rate_ids?: string[] | null;
}

export interface RateCatalogRow {
  seq?: string;
  id: string;
  environment_id: string;
  name: string;
  description: string;
  rate_count: number;
  currency: string | null;
  created_at: Date;
}

/** A tier as stored: canonical decimal text in the price's currency (`price_currency`). */
export interface TierColumn {
  up_to: string | null;
  unit_amount: string;
  flat_amount: string | null;
}

/** Price columns, shared by rates (simple and fixed) and matrix cells. */
export interface PriceColumns {
  price_type: string | null;
  price_currency: string | null;
  /** Flat and package prices: the amount. */
  price_value: string | null;
  package_units: string | null;
  rounding_behavior: string | null;
  /** Tiered prices: graduated or volume, and the tiers. */
  tiers_mode: string | null;
  tiers: TierColumn[] | null;
  /** Percentage prices: the percent and the fee per counted event. */
  percent: string | null;
  fixed_per_event: string | null;
}

/** A rate of a rate card or of a rate catalog (owner_kind), in the order given. */
export interface RateRow extends PriceColumns {
  seq?: string;
  id: string;
  environment_id: string;
  owner_kind: string;
  owner_id: string;
  billing_interval: string;
  kind: string;
  code: string;
  name: string;
  description: string | null;
  pricing_metric_id: string | null;
  usage_type: string | null;
  included_units: string | null;
  dimensions: { key: string; values: string[]; description: string | null }[] | null;
  created_at: Date;
  /** Usage-based rates: the per-period minimum and maximum, in `limits_currency`. */
  minimum_amount: string | null;
  maximum_amount: string | null;
  limits_currency: string | null;
}

export interface RateCellRow extends PriceColumns {
  seq?: string;
  rate_id: string;
  owner_id: string;
  coordinates: Record<string, string>;
  /** SHA-256 of the canonical coordinates: the unique key of a cell within its rate. */
  coordinates_hash: string;
}

/** The price columns of rates and matrix cells. */
function priceColumnsOf(dialect: Dialect) {
  return {
    price_type: textColumn(10),
    price_currency: textColumn(3),
    price_value: decimalColumn(dialect, true),
    package_units: decimalColumn(dialect, true),
    rounding_behavior: textColumn(10),
    tiers_mode: textColumn(10),
    tiers: jsonColumn(dialect, true),
    percent: decimalColumn(dialect, true),
    fixed_per_event: decimalColumn(dialect, true),
  };
}

export function catalogEntities(dialect: Dialect, exact: ExactText) {
  const priceColumns = priceColumnsOf(dialect);

  const PricingMetric = new EntitySchema<PricingMetricRow>({
    name: "PricingMetric",
    tableName: "pricing_metrics",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      event_name: textColumn(255, false),
      name: textColumn(255, false),
      unit: textColumn(255, false),
      dimensions: jsonColumn(dialect),
      aggregation_type: textColumn(12, false),
      value_field: textColumn(100),
      created_at: timeColumn(),
      archived_at: timeColumn(true),
    }),
    uniques: [{ name: "uq_pricing_metrics_id", columns: ["id"] }],
    indices: [
      { name: "ix_pricing_metrics_env_seq", columns: ["environment_id", "seq"] },
      { name: "ix_pricing_metrics_env_event", columns: ["environment_id", "event_name"] },
    ],
  });

  const RateCard = new EntitySchema<RateCardRow>({
    name: "RateCard",
    tableName: "rate_cards",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      name: textColumn(255, false),
      description: textColumn(2000),
      billing_interval: textColumn(8, false),
      currency: textColumn(3),
      metadata: jsonColumn(dialect),
      rate_catalog_id: textColumn(32),
      created_at: timeColumn(),
      updated_at: timeColumn(),
      archived_at: timeColumn(true),
      default_tax_rate_ids: jsonColumn(dialect, true),
    }),
    uniques: [{ name: "uq_rate_cards_id", columns: ["id"] }],
    indices: [{ name: "ix_rate_cards_env_seq", columns: ["environment_id", "seq"] }],
  });

  const RateCatalog = new EntitySchema<RateCatalogRow>({
    name: "RateCatalog",
    tableName: "rate_catalogs",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      name: textColumn(255, false),
      description: textColumn(2000, false),
      rate_count: intColumn(),
      currency: textColumn(3),
      created_at: timeColumn(),
    }),
    uniques: [{ name: "uq_rate_catalogs_id", columns: ["id"] }],
    indices: [{ name: "ix_rate_catalogs_env_seq", columns: ["environment_id", "seq"] }],
  });

  const Rate = new EntitySchema<RateRow>({
    name: "Rate",
    tableName: "rates",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      owner_kind: textColumn(8, false),
      owner_id: idColumn(),
      billing_interval: textColumn(8, false),
      kind: textColumn(12, false),
      code: textColumn(100, false),
      name: textColumn(255, false),
      description: textColumn(2000),
      pricing_metric_id: textColumn(32),
      usage_type: textColumn(12),
      included_units: decimalColumn(dialect, true),
      dimensions: jsonColumn(dialect, true),
      created_at: timeColumn(),
      minimum_amount: decimalColumn(dialect, true),
      maximum_amount: decimalColumn(dialect, true),
      limits_currency: textColumn(3),
      ...priceColumns,
    }),
    uniques: [
      { name: "uq_rates_id", columns: ["id"] },
      { name: "uq_rates_owner_interval_code", columns: ["owner_id", "billing_interval", "code"] },
    ],
    indices: [{ name: "ix_rates_owner_seq", columns: ["owner_id", "seq"] }],
  });

  const RateCell = new EntitySchema<RateCellRow>({
    name: "RateCell",
    tableName: "rate_cells",
    columns: exact({
      seq: seqColumn(dialect),
      rate_id: idColumn(),
      owner_id: idColumn(),
      coordinates: jsonColumn(dialect),
      coordinates_hash: textColumn(64, false),
      ...priceColumns,
    }),
    uniques: [{ name: "uq_rate_cells_rate_coordinates", columns: ["rate_id", "coordinates_hash"] }],
    indices: [{ name: "ix_rate_cells_owner_seq", columns: ["owner_id", "seq"] }],
  });

  return { PricingMetric, RateCard, RateCatalog, Rate, RateCell };
}
