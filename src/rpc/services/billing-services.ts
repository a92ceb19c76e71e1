/** Connect implementations of subscriptions, invoices, customer access and test clocks. */
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type { SubscriptionChanges } from "../../billing/subscriptions/changes.js";
import type { Invoices } from "../../billing/subscriptions/invoices.js";
import type { Invoice } from "../../billing/subscriptions/types.js";
import type { Pauses } from "../../billing/subscriptions/pauses.js";
import type { Subscriptions } from "../../billing/subscriptions/subscribe.js";
import type { TestClocks } from "../../billing/subscriptions/test-clocks.js";
import type { InvoiceService } from "../../gen/billing/v1/invoice_service_pb.js";
import type { SubscriptionService } from "../../gen/billing/v1/subscription_service_pb.js";
import type { TestClockService } from "../../gen/billing/v1/test_clock_service_pb.js";
import { callerOf } from "../context.js";
import { callbacksOf, clockToPb, invoiceToPb, subscriptionToPb } from "../convert/billing.js";
import { instantOf } from "../convert/common.js";
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
      const page = await subs.list(callerOf(ctx), { subjectId: req.subjectId, rateCardId: req.rateCardId }, req.limit, req.offset);
      return { hasMore: page.hasMore, subscriptions: page.items.map(subscriptionToPb) };
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

export function invoiceService(subs: Invoices, settings?: InvoiceSettingsService): ServiceImpl<typeof InvoiceService> {
  const pb = (i: Parameters<typeof subs.hostedInvoiceUrl>[0]) => invoiceToPb(i, subs.hostedInvoiceUrl(i));
  return {
    async listInvoices(req, ctx) {
      const page = await subs.list(callerOf(ctx), {
        subjectId: req.subjectId,
        status: req.status,
        createdFrom: instantOf(req.createdFrom),
        createdTo: instantOf(req.createdTo),
        number: req.number,
        limit: req.limit,
        offset: req.offset,
      });
      return { hasMore: page.hasMore, invoices: page.items.map(pb) };
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
      if (!settings) throw new ConnectError("invoice settings are not served", Code.Unimplemented);
      return { invoiceSettings: invoiceSettingsToPb(await settings.get(callerOf(ctx))) };
    },
    async updateInvoiceSettings(req, ctx) {
      if (!settings) throw new ConnectError("invoice settings are not served", Code.Unimplemented);
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
