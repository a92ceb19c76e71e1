/** Connect implementation of tax rates (DESIGN §15): wire ⇄ domain only. */
import type { ServiceImpl } from "@connectrpc/connect";
import type { TaxRates } from "../../billing/taxes/rates.js";
import type { TaxRateService } from "../../gen/billing/v1/tax_rate_service_pb.js";
import { pageOf } from "../convert/common.js";
import { callerOf } from "../context.js";
import { taxRateToPb } from "../convert/taxes.js";

export function taxRateService(rates: TaxRates): ServiceImpl<typeof TaxRateService> {
  return {
    async createTaxRate(req, ctx) {
      return { taxRate: taxRateToPb(await rates.create(callerOf(ctx), req)) };
    },
    async getTaxRate(req, ctx) {
      return { taxRate: taxRateToPb(await rates.get(callerOf(ctx), req.taxRateId)) };
    },
    async listTaxRates(req, ctx) {
      return pageOf(await rates.list(callerOf(ctx), req.limit, req.offset, { archived: req.archived }), "taxRates", taxRateToPb);
    },
    async archiveTaxRate(req, ctx) {
      return { taxRate: taxRateToPb(await rates.archive(callerOf(ctx), req.taxRateId)) };
    },
  };
}
