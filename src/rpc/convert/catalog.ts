/** Catalog wire ⇄ domain: shapes only; the rules live in src/billing/catalog. */
import { create } from "@bufbuild/protobuf";
import type { CreatePricingMetricInput } from "../../billing/catalog/metrics.js";
import type { AmountInput, CatalogRate, FixedRate, Money, Price, PriceInput, PricingMetric, RateCard, RateCatalog, RatesInput, UsageRate } from "../../billing/catalog/types.js";
import { type Amount as AmountPb, type Price as PricePb, PriceSchema } from "../../gen/billing/v1/common_pb.js";
import { type PricingMetric as PricingMetricPb, PricingMetricSchema } from "../../gen/billing/v1/pricing_metric_pb.js";
import type { CreatePricingMetricRequest } from "../../gen/billing/v1/pricing_metric_service_pb.js";
import {
  type FixedRate as FixedRatePb,
  FixedRateSchema,
  type RateCard as RateCardPb,
  RateCardSchema,
  type UsageBasedRate as UsageBasedRatePb,
  UsageBasedRateSchema,
} from "../../gen/billing/v1/rate_card_pb.js";
import { type CatalogRate as CatalogRatePb, CatalogRateSchema, type RateCatalog as RateCatalogPb, RateCatalogSchema } from "../../gen/billing/v1/rate_catalog_pb.js";
import { ts } from "./common.js";

// ---- out ----

const amountPb = (m: Money) => ({ currencyCode: m.currency, value: m.value });

export function priceToPb(p: Price): PricePb {
  switch (p.kind) {
    case "flat":
      return create(PriceSchema, { priceType: "flat", amount: amountPb(p.amount) });
    case "package":
      return create(PriceSchema, { priceType: "package", amount: amountPb(p.amount), packageUnits: Number(p.packageUnits), roundingBehavior: p.rounding });
    case "tiered":
      return create(PriceSchema, {
        priceType: "tiered",
        tiersMode: p.mode,
        tiers: p.tiers.map((t) => ({ upTo: t.upTo ?? undefined, unitAmount: amountPb(t.unitAmount), flatAmount: t.flatAmount ? amountPb(t.flatAmount) : undefined })),
      });
    case "percentage":
      return create(PriceSchema, { priceType: "percentage", percent: p.percent, fixedAmountPerEvent: p.fixedPerEvent ? amountPb(p.fixedPerEvent) : undefined });
  }
}

export function fixedRateToPb(r: FixedRate): FixedRatePb {
  return create(FixedRateSchema, { id: r.id, code: r.code, name: r.name, description: r.description ?? undefined, price: priceToPb(r.price) });
}

export function usageRateToPb(r: UsageRate): UsageBasedRatePb {
  const base = {
    id: r.id,
    code: r.code,
    name: r.name,
    description: r.description ?? undefined,
    pricingMetricId: r.pricingMetricId,
    includedUnits: Number(r.includedUnits),
    usageBasedRateType: r.type,
    minimumAmount: r.minimumAmount ? amountPb(r.minimumAmount) : undefined,
    maximumAmount: r.maximumAmount ? amountPb(r.maximumAmount) : undefined,
  };
  if (r.type === "simple") return create(UsageBasedRateSchema, { ...base, price: priceToPb(r.price) });
  return create(UsageBasedRateSchema, {
    ...base,
    dimensions: r.dimensions.map((d) => ({ key: d.key, values: d.values, description: d.description ?? undefined })),
    pricingMatrix: { cells: r.cells.map((c) => ({ dimensionCoordinates: c.coordinates, price: priceToPb(c.price) })) },
  });
}

export function rateCardToPb(c: RateCard): RateCardPb {
  return create(RateCardSchema, {
    id: c.id,
    billingInterval: c.billingInterval,
    name: c.name,
    description: c.description ?? undefined,
    createdAt: ts(c.createdAt),
    updatedAt: ts(c.updatedAt),
    metadata: c.metadata,
    rateCatalogId: c.rateCatalogId ?? undefined,
    fixedRates: c.fixedRates.map(fixedRateToPb),
    usageBasedRates: c.usageRates.map(usageRateToPb),
    archived: c.archivedAt !== null,
    archivedAt: c.archivedAt ? ts(c.archivedAt) : undefined,
    defaultTaxRateIds: c.defaultTaxRateIds ?? [],
  });
}

export function metricToPb(m: PricingMetric): PricingMetricPb {
  return create(PricingMetricSchema, {
    id: m.id,
    eventName: m.eventName,
    name: m.name,
    unit: m.unit,
    dimensions: m.dimensions,
    aggregation: { aggregationType: m.aggregation.type, valueField: m.aggregation.valueField ?? undefined },
    archived: m.archivedAt !== null,
    archivedAt: m.archivedAt ? ts(m.archivedAt) : undefined,
  });
}

export function catalogToPb(c: RateCatalog): RateCatalogPb {
  return create(RateCatalogSchema, { id: c.id, name: c.name, description: c.description, rateCount: c.rateCount });
}

export function catalogRateToPb(r: CatalogRate): CatalogRatePb {
  const base = { id: r.id, interval: r.interval, rateCatalogId: r.catalogId, type: r.type };
  return r.type === "fixed" ? create(CatalogRateSchema, { ...base, fixed: fixedRateToPb(r.rate) }) : create(CatalogRateSchema, { ...base, usageBased: usageRateToPb(r.rate) });
}

// ---- in ----

function amountInput(a: AmountPb | undefined): AmountInput | undefined {
  return a ? { currencyCode: a.currencyCode, value: a.value } : undefined;
}

function priceInput(p: PricePb | undefined): PriceInput | undefined {
  if (!p) return undefined;
  return {
    priceType: p.priceType,
    amount: amountInput(p.amount),
    packageUnits: p.packageUnits,
    roundingBehavior: p.roundingBehavior,
    tiersMode: p.tiersMode,
    tiers: p.tiers.map((t) => ({ upTo: t.upTo, unitAmount: amountInput(t.unitAmount), flatAmount: amountInput(t.flatAmount) })),
    percent: p.percent,
    fixedAmountPerEvent: amountInput(p.fixedAmountPerEvent),
  };
}

export function ratesInput(req: { fixedRates: FixedRatePb[]; usageBasedRates: UsageBasedRatePb[] }): RatesInput {
  return {
    fixedRates: req.fixedRates.map((r) => ({ code: r.code, name: r.name, description: r.description ?? "", price: priceInput(r.price) })),
    usageBasedRates: req.usageBasedRates.map((r) => ({
      code: r.code,
      name: r.name,
      description: r.description ?? "",
      pricingMetricId: r.pricingMetricId,
      includedUnits: r.includedUnits,
      usageBasedRateType: r.usageBasedRateType,
      price: priceInput(r.price),
      dimensions: r.dimensions.map((d) => ({ key: d.key, values: d.values, description: d.description ?? "" })),
      pricingMatrix: r.pricingMatrix ? { cells: r.pricingMatrix.cells.map((c) => ({ dimensionCoordinates: c.dimensionCoordinates, price: priceInput(c.price) })) } : undefined,
      minimumAmount: amountInput(r.minimumAmount),
      maximumAmount: amountInput(r.maximumAmount),
    })),
  };
}

export function pricingMetricInput(req: CreatePricingMetricRequest): CreatePricingMetricInput {
  return {
    eventName: req.eventName,
    name: req.name,
    unit: req.unit,
    dimensions: req.dimensions,
    aggregation: req.aggregation ? { aggregationType: req.aggregation.aggregationType, valueField: req.aggregation.valueField } : undefined,
  };
}
