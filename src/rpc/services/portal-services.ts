/** Connect implementations of the customer portal's session call and the standalone checkout (0.1.5 SDK). */
import type { ServiceImpl } from "@connectrpc/connect";
import type { CustomerPortal } from "../../billing/subscriptions/portal.js";
import type { Subscriptions } from "../../billing/subscriptions/subscribe.js";
import type { CheckoutService } from "../../gen/billing/v1/checkout_service_pb.js";
import type { CustomerPortalService } from "../../gen/billing/v1/customer_portal_service_pb.js";
import { callerOf } from "../context.js";
import { callbacksOf } from "../convert/billing.js";
import { ts } from "../convert/common.js";

export function customerPortalService(portal: CustomerPortal): ServiceImpl<typeof CustomerPortalService> {
  return {
    async createCustomerPortalSession(req, ctx) {
      const { session, url } = await portal.createSession(callerOf(ctx), { subjectId: req.subjectId, returnUrl: req.returnUrl });
      return { session: { url, subjectId: session.subjectId, expiresAt: ts(session.expiresAt) } };
    },
  };
}

export function checkoutService(subs: Subscriptions): ServiceImpl<typeof CheckoutService> {
  return {
    async createCheckout(req, ctx) {
      const { session, url } = await subs.checkout(callerOf(ctx), { rateCardId: req.rateCardId, subjectId: req.subjectId, callbacks: callbacksOf(req.checkoutCallbackUrls) });
      return { checkoutSession: { id: session.id, url, amount: { currencyCode: session.currency, value: session.amountDue } } };
    },
  };
}
