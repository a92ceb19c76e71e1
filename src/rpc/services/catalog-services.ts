/** Connect implementations of the catalog services: wire ⇄ domain only. */
import type { ServiceImpl } from "@connectrpc/connect";
import type { PricingMetricService as Metrics } from "../../billing/catalog/metrics.js";
import type { RateCardService as Cards } from "../../billing/catalog/rate-cards.js";
import type { RateCatalogService as Catalogs } from "../../billing/catalog/rate-catalogs.js";
import type { PricingMetricService } from "../../gen/billing/v1/pricing_metric_service_pb.js";
import type { RateCardService } from "../../gen/billing/v1/rate_card_service_pb.js";
import type { RateCatalogService } from "../../gen/billing/v1/rate_catalog_service_pb.js";
import type { SummaryService as Summaries } from "../../billing/metering/usage.js";
import { pageOf } from "../convert/common.js";
import { callerOf } from "../context.js";
import { summaryInput, summaryToPb } from "../convert/usage.js";
import { catalogRateToPb, catalogToPb, metricToPb, pricingMetricInput, rateCardToPb, ratesInput } from "../convert/catalog.js";

export function pricingMetricService(metrics: Metrics, summaries: Summaries): ServiceImpl<typeof PricingMetricService> {
  return {
    async createPricingMetricSummary(req, ctx) {
      const list = await summaries.summarize(callerOf(ctx), req.pricingMetricId, summaryInput(req));
      return { summaries: list.map(summaryToPb) };
    },
    async createPricingMetric(req, ctx) {
      return { pricingMetric: metricToPb(await metrics.create(callerOf(ctx), pricingMetricInput(req))) };
    },
    async getPricingMetric(req, ctx) {
      return { pricingMetric: metricToPb(await metrics.get(callerOf(ctx), req.pricingMetricId)) };
    },
    async listPricingMetrics(req, ctx) {
      return pageOf(await metrics.list(callerOf(ctx), req.limit, req.offset, { archived: req.archived }), "pricingMetrics", metricToPb);
    },
    async archivePricingMetric(req, ctx) {
      return { pricingMetric: metricToPb(await metrics.archive(callerOf(ctx), req.pricingMetricId)) };
    },
  };
}

export function rateCardService(cards: Cards): ServiceImpl<typeof RateCardService> {
  return {
    async createRateCard(req, ctx) {
      const card = await cards.create(callerOf(ctx), {
        billingInterval: req.billingInterval,
        name: req.name,
        description: req.description,
        metadata: req.metadata,
        rateCatalogId: req.rateCatalogId,
        defaultTaxRateIds: req.defaultTaxRateIds,
        ...ratesInput(req),
      });
      return { rateCard: rateCardToPb(card) };
    },
    async getRateCard(req, ctx) {
      return { rateCard: rateCardToPb(await cards.get(callerOf(ctx), req.rateCardId)) };
    },
    async listRateCards(req, ctx) {
      return pageOf(await cards.list(callerOf(ctx), req.limit, req.offset, { archived: req.archived }), "rateCards", rateCardToPb);
    },
    async archiveRateCard(req, ctx) {
      return { rateCard: rateCardToPb(await cards.archive(callerOf(ctx), req.rateCardId)) };
    },
    async setRateCardTaxRates(req, ctx) {
      return { rateCard: rateCardToPb(await cards.setTaxRates(callerOf(ctx), req.rateCardId, req.taxRateIds)) };
    },
  };
}

export function rateCatalogService(catalogs: Catalogs): ServiceImpl<typeof RateCatalogService> {
  return {
    async createRateCatalog(req, ctx) {
      return { rateCatalog: catalogToPb(await catalogs.create(callerOf(ctx), { name: req.name, description: req.description })) };
    },
    async getRateCatalog(req, ctx) {
      return { rateCatalog: catalogToPb(await catalogs.get(callerOf(ctx), req.rateCatalogId)) };
    },
    async listRateCatalogs(req, ctx) {
      return pageOf(await catalogs.list(callerOf(ctx), req.limit, req.offset), "rateCatalogs", catalogToPb);
    },
    async addRates(req, ctx) {
      const catalog = await catalogs.addRates(callerOf(ctx), req.rateCatalogId, { billingInterval: req.billingInterval, ...ratesInput(req) });
      return { rateCatalog: catalogToPb(catalog) };
    },
    async listCatalogRates(req, ctx) {
      return pageOf(await catalogs.listRates(callerOf(ctx), req.rateCatalogId, req.limit, req.offset), "rates", catalogRateToPb);
    },
  };
}
