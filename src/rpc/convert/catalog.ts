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
import { toPb } from "./common.js";

// ---- out ----

const amountPb = (m: Money) => ({ currencyCode: m.currency, value: m.value });

function priceToPb(p: Price): PricePb {
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

function fixedRateToPb(r: FixedRate): FixedRatePb {
  return toPb(FixedRateSchema, { ...r, price: priceToPb(r.price) });
}

function usageRateToPb(r: UsageRate): UsageBasedRatePb {
  return toPb(UsageBasedRateSchema, {
    ...r,
    includedUnits: Number(r.includedUnits),
    usageBasedRateType: r.type,
    price: r.type === "simple" ? priceToPb(r.price) : undefined,
    pricingMatrix: r.type === "simple" ? undefined : { cells: r.cells.map((c) => ({ dimensionCoordinates: c.coordinates, price: priceToPb(c.price) })) },
    minimumAmount: r.minimumAmount && amountPb(r.minimumAmount),
    maximumAmount: r.maximumAmount && amountPb(r.maximumAmount),
  });
}

export function rateCardToPb(c: RateCard): RateCardPb {
  return toPb(RateCardSchema, { ...c, fixedRates: c.fixedRates.map(fixedRateToPb), usageBasedRates: c.usageRates.map(usageRateToPb), archived: c.archivedAt !== null });
}

export function metricToPb(m: PricingMetric): PricingMetricPb {
  return toPb(PricingMetricSchema, { ...m, aggregation: { aggregationType: m.aggregation.type, valueField: m.aggregation.valueField }, archived: m.archivedAt !== null });
}

export const catalogToPb = (c: RateCatalog): RateCatalogPb => toPb(RateCatalogSchema, c);

export function catalogRateToPb(r: CatalogRate): CatalogRatePb {
  return toPb(CatalogRateSchema, {
    ...r,
    rateCatalogId: r.catalogId,
    fixed: r.type === "fixed" ? fixedRateToPb(r.rate) : undefined,
    usageBased: r.type === "fixed" ? undefined : usageRateToPb(r.rate),
  });
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
