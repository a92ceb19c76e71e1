/**
 * The catalog's domain types. Money and quantities are canonical decimal strings (see
 * money.ts); rates are immutable once created.
 */
import type { Metadata } from "../metadata.js";

export type BillingInterval = "monthly" | "yearly";
export const BILLING_INTERVALS: readonly BillingInterval[] = ["monthly", "yearly"];

export type RoundingBehavior = "round_up" | "round_down";

export interface Money {
  /** ISO 4217, upper-case. */
  currency: string;
  /** Smallest currency units, canonical decimal text. */
  value: string;
}

export type TiersMode = "graduated" | "volume";

/** One tier of a tiered price: the units after the previous tier's `upTo`, up to and including its own. */
export interface Tier {
  /** Canonical decimal text; null on the last tier (no bound). */
  upTo: string | null;
  unitAmount: Money;
  /** Charged once when the tier is touched (graduated) or reached (volume). */
  flatAmount: Money | null;
}

/**
 * A price (DESIGN §13). Every kind names its currency: flat and package through `amount`,
 * tiered and percentage through `currency` (see `priceCurrency`).
 */
export type Price =
  | { kind: "flat"; amount: Money }
  | { kind: "package"; amount: Money; packageUnits: string; rounding: RoundingBehavior }
  | { kind: "tiered"; currency: string; mode: TiersMode; tiers: Tier[] }
  | {
      kind: "percentage";
      currency: string;
      /** Percent of the period's sum, canonical decimal text (e.g. "2.9"). */
      percent: string;
      /** Charged per counted event; null when none. */
      fixedPerEvent: Money | null;
    };

/** The currency a price is in. */
export function priceCurrency(p: Price): string {
  return p.kind === "flat" || p.kind === "package" ? p.amount.currency : p.currency;
}

export interface FixedRate {
  id: string;
  code: string;
  name: string;
  description: string | null;
  price: Price;
}

export interface Dimension {
  key: string;
  values: string[];
  description: string | null;
}

export interface MatrixCell {
  coordinates: Record<string, string>;
  price: Price;
}

interface UsageRateBase {
  id: string;
  code: string;
  name: string;
  description: string | null;
  pricingMetricId: string;
  /** Whole units included before the price applies, canonical decimal text. */
  includedUnits: string;
  /** Per period, the rate's amount is raised to this (a line of kind "minimum"); null when none. */
  minimumAmount: Money | null;
  /** Per period, the rate's amount is capped at this (a line of kind "maximum"); null when none. */
  maximumAmount: Money | null;
}

export type UsageRate = (UsageRateBase & { type: "simple"; price: Price }) | (UsageRateBase & { type: "dimensional"; dimensions: Dimension[]; cells: MatrixCell[] });

export interface RateSet {
  fixed: FixedRate[];
  usage: UsageRate[];
  /** The one currency of every price, or null when there are no rates. */
  currency: string | null;
}

export interface RateCard {
  id: string;
  environmentId: string;
  name: string;
  description: string | null;
  billingInterval: BillingInterval;
  metadata: Metadata;
  rateCatalogId: string | null;
  fixedRates: FixedRate[];
  usageRates: UsageRate[];
  currency: string | null;
  createdAt: Date;
  updatedAt: Date;
  /** When it was archived (no new subscriptions); null while it is not. */
  archivedAt: Date | null;
  /** Tax rates its subscriptions' invoices apply unless the subject sets its own (DESIGN §15); absent: none. */
  defaultTaxRateIds?: string[];
}

export type AggregationType = "sum" | "count" | "max" | "last" | "unique_count";
export const AGGREGATION_TYPES: readonly AggregationType[] = ["sum", "count", "max", "last", "unique_count"];

export interface PricingMetric {
  id: string;
  environmentId: string;
  eventName: string;
  name: string;
  unit: string;
  dimensions: string[];
  aggregation: { type: AggregationType; valueField: string | null };
  createdAt: Date;
  /** When it was archived (no new rates may use it); null while it is not. */
  archivedAt: Date | null;
}

export interface RateCatalog {
  id: string;
  environmentId: string;
  name: string;
  description: string;
  rateCount: number;
  /** The one currency of the catalog's prices, or null while it has none. */
  currency: string | null;
  createdAt: Date;
}

export type CatalogRate =
  | { id: string; catalogId: string; interval: BillingInterval; type: "fixed"; rate: FixedRate }
  | { id: string; catalogId: string; interval: BillingInterval; type: "usage_based"; rate: UsageRate };

// ---- Input, as it comes off the wire (strings may be empty, numbers may be absent) ----

export interface AmountInput {
  currencyCode: string;
  value: string;
}

export interface TierInput {
  /** Absent: no bound. */
  upTo?: string;
  unitAmount?: AmountInput;
  flatAmount?: AmountInput;
}

export interface PriceInput {
  priceType: string;
  amount?: AmountInput;
  packageUnits?: number;
  roundingBehavior?: string;
  tiersMode?: string;
  tiers?: TierInput[];
  percent?: string;
  fixedAmountPerEvent?: AmountInput;
}

export interface FixedRateInput {
  code: string;
  name: string;
  description: string;
  price?: PriceInput;
}

export interface DimensionInput {
  key: string;
  values: string[];
  description: string;
}

export interface UsageRateInput {
  code: string;
  name: string;
  description: string;
  pricingMetricId: string;
  includedUnits: number;
  usageBasedRateType: string;
  price?: PriceInput;
  dimensions: DimensionInput[];
  pricingMatrix?: { cells: { dimensionCoordinates: Record<string, string>; price?: PriceInput }[] };
  minimumAmount?: AmountInput;
  maximumAmount?: AmountInput;
}

export interface RatesInput {
  fixedRates: FixedRateInput[];
  usageBasedRates: UsageRateInput[];
}
