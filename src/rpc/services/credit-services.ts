/** Connect implementation of the credit service (DESIGN §14): wire ⇄ domain only. */
import type { ServiceImpl } from "@connectrpc/connect";
import type { Credits } from "../../billing/credits/grants.js";
import type { CreditService } from "../../gen/billing/v1/credit_service_pb.js";
import { pageOf } from "../convert/common.js";
import { callerOf } from "../context.js";
import { createGrantInput, grantToPb, ledgerEntryToPb, settingsInput, settingsToPb } from "../convert/credits.js";

export function creditService(credits: Credits): ServiceImpl<typeof CreditService> {
  return {
    async createCreditGrant(req, ctx) {
      const out = await credits.create(callerOf(ctx), createGrantInput(req));
      return { creditGrant: grantToPb(out.grant), checkoutUrl: out.checkoutUrl ?? undefined };
    },
    async getCreditGrant(req, ctx) {
      return { creditGrant: grantToPb(await credits.get(callerOf(ctx), req.creditGrantId)) };
    },
    async listCreditGrants(req, ctx) {
      return pageOf(await credits.list(callerOf(ctx), req), "creditGrants", grantToPb);
    },
    async voidCreditGrant(req, ctx) {
      return { creditGrant: grantToPb(await credits.void(callerOf(ctx), req.creditGrantId)) };
    },
    async listCreditLedger(req, ctx) {
      return pageOf(await credits.ledger(callerOf(ctx), req.subjectId, { limit: req.limit, offset: req.offset, currency: req.currencyCode }), "entries", ledgerEntryToPb);
    },
    async getCreditSettings(req, ctx) {
      return { creditSettings: settingsToPb(await credits.settings(callerOf(ctx), req.subjectId, req.currencyCode)) };
    },
    async updateCreditSettings(req, ctx) {
      return { creditSettings: settingsToPb(await credits.updateSettings(callerOf(ctx), req.subjectId, settingsInput(req))) };
    },
  };
}
