/**
 * Table definitions. EntitySchema (not decorators) keeps column types explicit and lets the
 * same definitions load under tsx without decorator metadata. Rows are plain objects; stores
 * map them to domain types.
 */
import { EntitySchema, type EntitySchemaColumnOptions } from "typeorm";
import { DEFAULT_BINARY_COLLATION, type Dialect, decimalColumn, idColumn, intColumn, jsonColumn, seqColumn, sumColumn, textColumn, timeColumn, withBinaryText } from "../columns.js";

export interface EnvironmentRow {
  id: string;
  name: string;
  mode: string;
  created_at: Date;
  /** Per-key rate-limit overrides (requests a second; NULL: the server's default, 0: unlimited). */
  rate_limit_ingest_rps?: number | null;
  rate_limit_api_rps?: number | null;
}

export interface ApiKeyRow {
  id: string;
  environment_id: string;
  kind: string;
  prefix: string;
  key_hash: string;
  created_at: Date;
  revoked_at: Date | null;
}

export interface SubjectRow {
  /** Insertion order: the clustered key on MySQL, and the order of every listing. */
  seq?: string;
  id: string;
  environment_id: string;
  external_id: string | null;
  /** Equal to external_id while the subject is live, NULL once deleted: the unique key frees it. */
  external_id_key: string | null;
  email: string | null;
  name: string | null;
  metadata: Record<string, string>;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
  test_clock_id: string | null;
  payment_method_id: string | null;
}

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

/** Price columns, shared by rates (simple and fixed) and matrix cells. */
export interface PriceColumns {
  price_type: string | null;
  price_currency: string | null;
  price_value: string | null;
  package_units: string | null;
  rounding_behavior: string | null;
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
}

export interface RateCellRow extends PriceColumns {
  seq?: string;
  rate_id: string;
  owner_id: string;
  coordinates: Record<string, string>;
  /** SHA-256 of the canonical coordinates: the unique key of a cell within its rate. */
  coordinates_hash: string;
}

/** A usage event as received: append-only. */
export interface UsageEventRow {
  seq?: string;
  id: string;
  environment_id: string;
  idempotency_key: string;
  /** SHA-256 of the payload: a repeat of the key with the same one is a duplicate. */
  fingerprint: string;
  subject_id: string;
  event_name: string;
  occurred_at: Date;
  data: Record<string, string>;
  created_at: Date;
}

/** Exact hourly totals of one pricing metric for one subject and one combination of its dimensions. */
export interface UsageRollupRow {
  metric_id: string;
  subject_id: string;
  bucket_start: Date;
  dims_hash: string;
  dims: Record<string, string>;
  sum_value: string;
  event_count: string;
  max_value: string | null;
  last_value: string | null;
  last_at: Date | null;
  last_key: string | null;
}

export interface SubscriptionRow {
  seq?: string;
  id: string;
  environment_id: string;
  subject_id: string;
  rate_card_id: string;
  status: string;
  cancels_at_end_of_cycle: boolean;
  anchor: Date;
  cycle_index: number;
  period_start: Date;
  period_end: Date;
  usage_since: Date;
  fixed_rate_quantities: Record<string, string>;
  rate_multipliers: Record<string, string>;
  metadata: Record<string, string>;
  test_clock_id: string | null;
  timeline_id: string | null;
  cancelled_at: Date | null;
  cancel_reason: string | null;
  billing_error: string | null;
  billing_attempts: number;
  billing_failed_at: Date | null;
  billing_retry_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface InvoiceRow {
  seq?: string;
  id: string;
  environment_id: string;
  subject_id: string;
  subscription_id: string;
  period_key: string;
  status: string;
  currency: string;
  total: string;
  hosted_token: string;
  period_start: Date;
  period_end: Date;
  created_at: Date;
  updated_at: Date;
}

export interface InvoiceLineRow {
  seq?: string;
  invoice_id: string;
  position: number;
  description: string;
  quantity: string;
  unit_amount: string;
  amount: string;
}

export interface PaymentMethodRow {
  seq?: string;
  id: string;
  environment_id: string;
  subject_id: string;
  brand: string;
  last4: string;
  behavior: string;
  created_at: Date;
}

export interface CheckoutRow {
  seq?: string;
  id: string;
  environment_id: string;
  token: string;
  subject_id: string;
  kind: string;
  payload: Record<string, unknown>;
  success_url: string;
  cancelled_url: string;
  status: string;
  amount_due: string;
  currency: string;
  description: string;
  expires_at: Date;
  created_at: Date;
}

export interface TestClockRow {
  seq?: string;
  id: string;
  environment_id: string;
  name: string;
  frozen_time: Date;
  created_at: Date;
}

export interface TimelineRow {
  seq?: string;
  id: string;
  environment_id: string;
  subject_id: string;
  rate_card_id: string;
  subscription_id: string | null;
  status: string;
  effective_at: Date | null;
  next_transition_at: Date | null;
  test_clock_id: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface TimelineItemRow {
  seq?: string;
  id: string;
  timeline_id: string;
  environment_id: string;
  period_start: Date;
  period_end: Date | null;
  rate_card_id: string;
  fixed_rate_quantities: Record<string, string>;
  rate_multipliers: Record<string, string>;
  created_at: Date;
}

/**
 * The tables of `dialect`. On MySQL every text column has `binaryCollation` (the server's binary
 * no-pad collation, see columns.ts), so identifiers compare byte for byte as on SQLite.
 */
export function buildEntities(dialect: Dialect, binaryCollation: string = DEFAULT_BINARY_COLLATION) {
  const exact = <T extends Record<string, EntitySchemaColumnOptions>>(columns: T): T => withBinaryText(dialect, binaryCollation, columns);

  const Environment = new EntitySchema<EnvironmentRow>({
    name: "Environment",
    tableName: "environments",
    columns: exact({
      id: idColumn(true),
      name: textColumn(100, false),
      mode: textColumn(8, false),
      created_at: timeColumn(),
      rate_limit_ingest_rps: { type: "int", nullable: true },
      rate_limit_api_rps: { type: "int", nullable: true },
    }),
    uniques: [{ name: "uq_environments_name", columns: ["name"] }],
  });

  const ApiKey = new EntitySchema<ApiKeyRow>({
    name: "ApiKey",
    tableName: "api_keys",
    columns: exact({
      id: idColumn(true),
      environment_id: idColumn(),
      kind: textColumn(16, false),
      prefix: textColumn(24, false),
      key_hash: textColumn(64, false),
      created_at: timeColumn(),
      revoked_at: timeColumn(true),
    }),
    uniques: [{ name: "uq_api_keys_key_hash", columns: ["key_hash"] }],
    indices: [{ name: "ix_api_keys_environment", columns: ["environment_id"] }],
  });

  const Subject = new EntitySchema<SubjectRow>({
    name: "Subject",
    tableName: "subjects",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      external_id: textColumn(255),
      external_id_key: textColumn(255),
      email: textColumn(254),
      name: textColumn(255),
      metadata: jsonColumn(dialect),
      created_at: timeColumn(),
      updated_at: timeColumn(),
      deleted_at: timeColumn(true),
      test_clock_id: textColumn(32),
      payment_method_id: textColumn(32),
    }),
    uniques: [
      { name: "uq_subjects_id", columns: ["id"] },
      { name: "uq_subjects_env_external_id", columns: ["environment_id", "external_id_key"] },
    ],
    indices: [{ name: "ix_subjects_env_seq", columns: ["environment_id", "seq"] }],
  });

  const priceColumns = {
    price_type: textColumn(8),
    price_currency: textColumn(3),
    price_value: decimalColumn(dialect, true),
    package_units: decimalColumn(dialect, true),
    rounding_behavior: textColumn(10),
  };

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
      aggregation_type: textColumn(8, false),
      value_field: textColumn(100),
      created_at: timeColumn(),
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

  const UsageEvent = new EntitySchema<UsageEventRow>({
    name: "UsageEvent",
    tableName: "usage_events",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      idempotency_key: textColumn(255, false),
      fingerprint: textColumn(64, false),
      subject_id: idColumn(),
      event_name: textColumn(255, false),
      occurred_at: timeColumn(),
      data: jsonColumn(dialect),
      created_at: timeColumn(),
    }),
    uniques: [{ name: "uq_usage_events_env_key", columns: ["environment_id", "idempotency_key"] }],
    indices: [
      { name: "ix_usage_events_subject_name_time", columns: ["subject_id", "event_name", "occurred_at"] },
      // A new metric's backfill reads its event name's events of one environment only.
      { name: "ix_usage_events_env_name", columns: ["environment_id", "event_name"] },
    ],
  });

  /** Exact totals of one grain: `usage_rollups` per hour, `usage_rollups_minute` per minute. */
  const rollups = (name: string, tableName: string) =>
    new EntitySchema<UsageRollupRow>({
      name,
      tableName,
      columns: exact({
        metric_id: { ...idColumn(), primary: true },
        subject_id: { ...idColumn(), primary: true },
        bucket_start: { ...timeColumn(), primary: true },
        dims_hash: { ...textColumn(64, false), primary: true },
        dims: jsonColumn(dialect),
        sum_value: sumColumn(dialect),
        event_count: { type: "bigint", nullable: false },
        max_value: decimalColumn(dialect, true),
        last_value: decimalColumn(dialect, true),
        last_at: timeColumn(true),
        last_key: textColumn(255),
      }),
    });
  const UsageRollup = rollups("UsageRollup", "usage_rollups");
  const UsageRollupMinute = rollups("UsageRollupMinute", "usage_rollups_minute");

  const Subscription = new EntitySchema<SubscriptionRow>({
    name: "Subscription",
    tableName: "subscriptions",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      subject_id: idColumn(),
      rate_card_id: idColumn(),
      status: textColumn(12, false),
      cancels_at_end_of_cycle: { type: "boolean", nullable: false },
      anchor: timeColumn(),
      cycle_index: intColumn(),
      period_start: timeColumn(),
      period_end: timeColumn(),
      usage_since: timeColumn(),
      fixed_rate_quantities: jsonColumn(dialect),
      rate_multipliers: jsonColumn(dialect),
      metadata: jsonColumn(dialect),
      test_clock_id: textColumn(32),
      timeline_id: textColumn(32),
      cancelled_at: timeColumn(true),
      cancel_reason: textColumn(500),
      // A cycle close that failed: set aside until billing_retry_at (real time), error kept.
      billing_error: textColumn(500),
      billing_attempts: { type: "int", nullable: false, default: 0 },
      billing_failed_at: timeColumn(true),
      billing_retry_at: timeColumn(true),
      created_at: timeColumn(),
      updated_at: timeColumn(),
    }),
    uniques: [{ name: "uq_subscriptions_id", columns: ["id"] }],
    indices: [
      { name: "ix_subscriptions_env_seq", columns: ["environment_id", "seq"] },
      { name: "ix_subscriptions_subject", columns: ["subject_id", "status"] },
      { name: "ix_subscriptions_due", columns: ["status", "test_clock_id", "period_end"] },
    ],
  });

  const Invoice = new EntitySchema<InvoiceRow>({
    name: "Invoice",
    tableName: "invoices",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      subject_id: idColumn(),
      subscription_id: idColumn(),
      period_key: textColumn(40, false),
      status: textColumn(16, false),
      currency: textColumn(3, false),
      total: sumColumn(dialect),
      hosted_token: textColumn(64, false),
      period_start: timeColumn(),
      period_end: timeColumn(),
      created_at: timeColumn(),
      updated_at: timeColumn(),
    }),
    uniques: [
      { name: "uq_invoices_id", columns: ["id"] },
      { name: "uq_invoices_subscription_period", columns: ["subscription_id", "period_key"] },
      { name: "uq_invoices_hosted_token", columns: ["hosted_token"] },
    ],
    indices: [{ name: "ix_invoices_subject_seq", columns: ["subject_id", "seq"] }],
  });

  const InvoiceLine = new EntitySchema<InvoiceLineRow>({
    name: "InvoiceLine",
    tableName: "invoice_lines",
    columns: exact({
      seq: seqColumn(dialect),
      invoice_id: idColumn(),
      position: intColumn(),
      description: textColumn(1000, false),
      quantity: sumColumn(dialect),
      unit_amount: sumColumn(dialect),
      amount: sumColumn(dialect),
    }),
    indices: [{ name: "ix_invoice_lines_invoice", columns: ["invoice_id", "position"] }],
  });

  const PaymentMethod = new EntitySchema<PaymentMethodRow>({
    name: "PaymentMethod",
    tableName: "payment_methods",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      subject_id: idColumn(),
      brand: textColumn(20, false),
      last4: textColumn(4, false),
      behavior: textColumn(20, false),
      created_at: timeColumn(),
    }),
    uniques: [{ name: "uq_payment_methods_id", columns: ["id"] }],
  });

  const Checkout = new EntitySchema<CheckoutRow>({
    name: "Checkout",
    tableName: "checkout_sessions",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      token: textColumn(64, false),
      subject_id: idColumn(),
      kind: textColumn(12, false),
      payload: jsonColumn(dialect),
      success_url: textColumn(2000, false),
      cancelled_url: textColumn(2000, false),
      status: textColumn(12, false),
      amount_due: sumColumn(dialect),
      currency: textColumn(3, false),
      description: textColumn(500, false),
      expires_at: timeColumn(),
      created_at: timeColumn(),
    }),
    uniques: [
      { name: "uq_checkout_sessions_id", columns: ["id"] },
      { name: "uq_checkout_sessions_token", columns: ["token"] },
    ],
  });

  const TestClock = new EntitySchema<TestClockRow>({
    name: "TestClock",
    tableName: "test_clocks",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      name: textColumn(255, false),
      frozen_time: timeColumn(),
      created_at: timeColumn(),
    }),
    uniques: [{ name: "uq_test_clocks_id", columns: ["id"] }],
  });

  const Timeline = new EntitySchema<TimelineRow>({
    name: "Timeline",
    tableName: "subscription_timelines",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      subject_id: idColumn(),
      rate_card_id: idColumn(),
      subscription_id: textColumn(32),
      status: textColumn(12, false),
      effective_at: timeColumn(true),
      next_transition_at: timeColumn(true),
      test_clock_id: textColumn(32),
      created_at: timeColumn(),
      updated_at: timeColumn(),
    }),
    uniques: [{ name: "uq_subscription_timelines_id", columns: ["id"] }],
    indices: [
      { name: "ix_subscription_timelines_env_seq", columns: ["environment_id", "seq"] },
      { name: "ix_subscription_timelines_due", columns: ["status", "test_clock_id", "next_transition_at"] },
    ],
  });

  const TimelineItem = new EntitySchema<TimelineItemRow>({
    name: "TimelineItem",
    tableName: "timeline_items",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      timeline_id: idColumn(),
      environment_id: idColumn(),
      period_start: timeColumn(),
      period_end: timeColumn(true),
      rate_card_id: idColumn(),
      fixed_rate_quantities: jsonColumn(dialect),
      rate_multipliers: jsonColumn(dialect),
      created_at: timeColumn(),
    }),
    uniques: [{ name: "uq_timeline_items_id", columns: ["id"] }],
    indices: [{ name: "ix_timeline_items_timeline_start", columns: ["timeline_id", "period_start"] }],
  });

  return {
    Timeline,
    TimelineItem,
    Environment,
    ApiKey,
    Subject,
    PricingMetric,
    RateCard,
    RateCatalog,
    Rate,
    RateCell,
    UsageEvent,
    UsageRollup,
    UsageRollupMinute,
    Subscription,
    Invoice,
    InvoiceLine,
    PaymentMethod,
    Checkout,
    TestClock,
  };
}

export type Entities = ReturnType<typeof buildEntities>;
