/** Connect implementation of customer access: a subject's billing state, wire ⇄ domain only. */
import type { ServiceImpl } from "@connectrpc/connect";
import type { BillingStates } from "../../billing/subscriptions/billing-state.js";
import type { CustomerAccessService } from "../../gen/billing/v1/customer_access_service_pb.js";
import { callerOf } from "../context.js";

export function customerAccessService(subs: BillingStates): ServiceImpl<typeof CustomerAccessService> {
  return {
    async getBillingState(req, ctx) {
      const s = await subs.billingState(callerOf(ctx), req.subjectId);
      return {
        billingState: {
          hasActiveSubscription: s.hasActiveSubscription,
          hasOverageForUsage: s.hasOverage,
          activeSubscriptions: s.active,
          pausedSubscriptions: s.paused,
          usageData: s.usage.map((u) => ({ includedUnits: Number(u.includedUnits), pricingMetricId: u.pricingMetricId, rateName: u.rateName, usedUnits: u.usedUnits })),
          creditBalance: s.creditBalance,
          availableCredit: s.availableCredit,
        },
      };
    },
  };
}
