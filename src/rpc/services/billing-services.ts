/** Connect implementations of subscriptions, invoices, customer access, the customer portal, checkout (0.1.5 SDK) and test clocks. */
import type { ServiceImpl } from "@connectrpc/connect";
import type { SubscriptionChanges } from "../../billing/subscriptions/changes.js";
import type { Invoices } from "../../billing/subscriptions/invoices.js";
import type { Invoice } from "../../billing/subscriptions/types.js";
import type { Pauses } from "../../billing/subscriptions/pauses.js";
import type { Subscriptions } from "../../billing/subscriptions/subscribe.js";
import type { TestClocks } from "../../billing/subscriptions/test-clocks.js";
import type { InvoiceService } from "../../gen/billing/v1/invoice_service_pb.js";
import type { SubscriptionService } from "../../gen/billing/v1/subscription_service_pb.js";
import type { BillingStates } from "../../billing/subscriptions/billing-state.js";
import type { CustomerPortal } from "../../billing/subscriptions/portal.js";
import type { CheckoutService } from "../../gen/billing/v1/checkout_service_pb.js";
import type { CustomerAccessService } from "../../gen/billing/v1/customer_access_service_pb.js";
import type { CustomerPortalService } from "../../gen/billing/v1/customer_portal_service_pb.js";
import type { TestClockService } from "../../gen/billing/v1/test_clock_service_pb.js";
import { callerOf } from "../context.js";
import { callbacksOf, clockToPb, invoiceToPb, subscriptionToPb } from "../convert/billing.js";
import { instantOf, pageOf, ts } from "../convert/common.js";
import type { InvoiceSettingsService } from "../../billing/taxes/settings.js";
import { invoiceSettingsToPb, updateInvoiceSettingsInput } from "../convert/taxes.js";

export function subscriptionService(subs: Subscriptions, changes: SubscriptionChanges, pauses: Pauses, hostedInvoiceUrl: (i: Invoice) => string): ServiceImpl<typeof SubscriptionService> {
  return {
    async createSubscription(req, ctx) {
      const r = await subs.create(callerOf(ctx), {
        rateCardId: req.rateCardId,
        subjectId: req.subjectId,
        callbacks: callbacksOf(req.checkoutCallbackUrls),
        createCheckoutSession: req.createCheckoutSession,
        fixedRateQuantities: req.fixedRateQuantities,
        rateMultipliers: req.ratePriceMultipliers,
        metadata: req.metadata,
        timelineId: req.subscriptionTimelineId,
        minimumCommitment: req.minimumCommitment,
        couponId: req.couponId,
      });
      return {
        result:
          r.kind === "success"
            ? { resultType: "success", subscription: subscriptionToPb(r.subscription) }
            : { resultType: "requires_action", action: { requiresActionType: "checkout", checkoutUrl: r.checkoutUrl } },
      };
    },
    async getSubscription(req, ctx) {
      return { subscription: subscriptionToPb(await subs.get(callerOf(ctx), req.subscriptionId)) };
    },
    async listSubscriptions(req, ctx) {
      return pageOf(await subs.list(callerOf(ctx), { subjectId: req.subjectId, rateCardId: req.rateCardId }, req.limit, req.offset), "subscriptions", subscriptionToPb);
    },
    async cancelSubscription(req, ctx) {
      const s = await changes.cancel(callerOf(ctx), req.subscriptionId, { atEndOfCycle: req.cancelAtEndOfCycle, reason: req.reason });
      return { subscription: subscriptionToPb(s) };
    },
    async pauseSubscription(req, ctx) {
      const r = await pauses.pause(callerOf(ctx), req.subscriptionId, { resumesAt: instantOf(req.resumesAt) });
      return { subscription: subscriptionToPb(r.subscription), cancelAtEndOfCycleCleared: r.clearedCancelAtEndOfCycle };
    },
    async resumeSubscription(req, ctx) {
      return { subscription: subscriptionToPb(await pauses.resume(callerOf(ctx), req.subscriptionId, { prorationBehavior: req.prorationBehavior })) };
    },
    async updateSubscription(req, ctx) {
      const r = await changes.update(callerOf(ctx), req.subscriptionId, {
        fixedRateQuantities: req.fixedRateQuantities,
        rateMultipliers: req.ratePriceMultipliers,
        metadata: req.metadata,
        prorationBehavior: req.prorationBehavior,
        minimumCommitment: req.minimumCommitment,
      });
      return {
        subscription: subscriptionToPb(r.subscription),
        prorationInvoice: r.prorationInvoice ? invoiceToPb(r.prorationInvoice, hostedInvoiceUrl(r.prorationInvoice)) : undefined,
      };
    },
    async changeRateCard(req, ctx) {
      const r = await changes.changeRateCard(callerOf(ctx), req.subscriptionId, {
        rateCardId: req.rateCardId,
        behavior: req.upgradeBehavior,
        callbacks: callbacksOf(req.checkoutCallbackUrls),
      });
      return {
        result: r.kind === "success" ? { type: "success", subscription: subscriptionToPb(r.subscription) } : { type: "requires_action", action: { type: "checkout", checkoutUrl: r.checkoutUrl } },
      };
    },
  };
}

export function invoiceService(subs: Invoices, settings: InvoiceSettingsService): ServiceImpl<typeof InvoiceService> {
  const pb = (i: Parameters<typeof subs.hostedInvoiceUrl>[0]) => invoiceToPb(i, subs.hostedInvoiceUrl(i));
  return {
    async listInvoices(req, ctx) {
      return pageOf(await subs.list(callerOf(ctx), { ...req, createdFrom: instantOf(req.createdFrom), createdTo: instantOf(req.createdTo) }), "invoices", pb);
    },
    async getInvoice(req, ctx) {
      return { invoice: pb(await subs.invoice(callerOf(ctx), req.invoiceId)) };
    },
    async finalizeInvoice(req, ctx) {
      return { invoice: pb(await subs.finalize(callerOf(ctx), req.invoiceId)) };
    },
    async voidInvoice(req, ctx) {
      return { invoice: pb(await subs.setInvoiceStatus(callerOf(ctx), req.invoiceId, "void")) };
    },
    async markInvoiceUncollectible(req, ctx) {
      return { invoice: pb(await subs.setInvoiceStatus(callerOf(ctx), req.invoiceId, "uncollectible")) };
    },
    async getInvoiceSettings(_req, ctx) {
      return { invoiceSettings: invoiceSettingsToPb(await settings.get(callerOf(ctx))) };
    },
    async updateInvoiceSettings(req, ctx) {
      return { invoiceSettings: invoiceSettingsToPb(await settings.update(callerOf(ctx), updateInvoiceSettingsInput(req))) };
    },
  };
}

export function testClockService(subs: TestClocks): ServiceImpl<typeof TestClockService> {
  return {
    async createTestClock(req, ctx) {
      return { testClock: clockToPb(await subs.createClock(callerOf(ctx), { name: req.name, frozenTime: instantOf(req.frozenTime) })) };
    },
    async getTestClock(req, ctx) {
      return { testClock: clockToPb(await subs.clock(callerOf(ctx), req.testClockId)) };
    },
    async advanceTestClock(req, ctx) {
      return { testClock: clockToPb(await subs.advanceClock(callerOf(ctx), req.testClockId, instantOf(req.frozenTime))) };
    },
  };
}

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
          carriedBalance: s.carriedBalance,
        },
      };
    },
  };
}

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
