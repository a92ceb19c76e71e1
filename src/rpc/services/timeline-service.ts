import { create } from "@bufbuild/protobuf";
import { NullValue, ValueSchema } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { TimelineService as Timelines } from "../../billing/subscriptions/timelines.js";
import type { Timeline, TimelineItem } from "../../billing/subscriptions/types.js";
import { type SubscriptionTimeline as TimelinePb, SubscriptionTimelineSchema, type TimelineItem as TimelineItemPb, TimelineItemSchema } from "../../gen/billing/v1/subscription_timeline_pb.js";
import type { SubscriptionTimelineService } from "../../gen/billing/v1/subscription_timeline_service_pb.js";
import { callerOf } from "../context.js";
import { callbacksOf } from "../convert/billing.js";
import { instantOf, pageOf, toPb, ts } from "../convert/common.js";

const timelineToPb = (t: Timeline): TimelinePb => toPb(SubscriptionTimelineSchema, t);

function itemToPb(i: TimelineItem): TimelineItemPb {
  return toPb(TimelineItemSchema, {
    ...i,
    subscriptionTimelineId: i.timelineId,
    period: {
      start: ts(i.start),
      end: create(ValueSchema, i.end ? { kind: { case: "stringValue", value: i.end.toISOString().replace(".000Z", "Z") } } : { kind: { case: "nullValue", value: NullValue.NULL_VALUE } }),
      inclusiveStart: true,
      inclusiveEnd: false,
    },
    subscriptionInput: { rateCardId: i.rateCardId, fixedRateQuantities: i.fixedRateQuantities, ratePriceMultipliers: i.rateMultipliers },
    updatedAt: i.createdAt,
  });
}

export function subscriptionTimelineService(timelines: Timelines): ServiceImpl<typeof SubscriptionTimelineService> {
  return {
    async createSubscriptionTimeline(req, ctx) {
      return { subscriptionTimeline: timelineToPb(await timelines.create(callerOf(ctx), { rateCardId: req.rateCardId, subjectId: req.subjectId })) };
    },
    async getSubscriptionTimeline(req, ctx) {
      return { subscriptionTimeline: timelineToPb(await timelines.get(callerOf(ctx), req.subscriptionTimelineId)) };
    },
    async listSubscriptionTimelines(req, ctx) {
      return pageOf(await timelines.list(callerOf(ctx), req.limit, req.offset), "subscriptionTimelines", timelineToPb);
    },
    async createTimelineItems(req, ctx) {
      const items = await timelines.addItems(
        callerOf(ctx),
        req.subscriptionTimelineId,
        req.items.map((i) => {
          const end = i.period?.end?.kind;
          return {
            start: instantOf(i.period?.start),
            end: end?.case === "stringValue" ? end.value : end === undefined || end.case === "nullValue" ? null : "not a time",
            rateCardId: i.subscriptionInput?.rateCardId ?? "",
            fixedRateQuantities: i.subscriptionInput?.fixedRateQuantities ?? {},
            rateMultipliers: i.subscriptionInput?.ratePriceMultipliers ?? {},
          };
        }),
      );
      return { items: items.map(itemToPb) };
    },
    async listTimelineItems(req, ctx) {
      return pageOf(await timelines.items(callerOf(ctx), req.subscriptionTimelineId, req.limit, req.offset), "items", itemToPb);
    },
    async startSubscriptionTimeline(req, ctx) {
      const r = await timelines.start(callerOf(ctx), req.subscriptionTimelineId, {
        callbacks: callbacksOf(req.checkoutCallbackUrls),
        createCheckoutSession: req.createCheckoutSession,
        effectiveAt: instantOf(req.effectiveAt),
      });
      return {
        result:
          r.kind === "success"
            ? { resultType: "success", subscriptionTimeline: timelineToPb(r.timeline) }
            : { resultType: "requires_action", action: { requiresActionType: "checkout", checkoutUrl: r.checkoutUrl } },
      };
    },
  };
}
