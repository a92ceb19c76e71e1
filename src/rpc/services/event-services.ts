/** Connect implementations of webhook endpoints and the event feed. */
import type { JsonObject } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import type { EndpointInput, WebhookEndpoints } from "../../billing/events/endpoints.js";
import type { EventFeed } from "../../billing/events/feed.js";
import type { StoredEvent } from "../../billing/events/types.js";
import type { Delivery, DeliveryAttempt, WebhookEndpoint } from "../../billing/events/webhooks.js";
import { invalid } from "../../billing/errors.js";
import { EventSchema } from "../../gen/billing/v1/event_pb.js";
import type { EventService } from "../../gen/billing/v1/event_service_pb.js";
import { WebhookDeliveryAttemptSchema, WebhookDeliverySchema, WebhookEndpointSchema } from "../../gen/billing/v1/webhook_endpoint_pb.js";
import type { UpdateWebhookEndpointRequest, WebhookEndpointService } from "../../gen/billing/v1/webhook_endpoint_service_pb.js";
import { callerOf } from "../context.js";
import { instantOf, pageOf, toPb } from "../convert/common.js";

/** `data` as a JSON object (a Struct), as webhook bodies carry it; the store keeps its JSON text. */
const eventToPb = (e: StoredEvent, mode: string) => toPb(EventSchema, { ...e, mode, data: JSON.parse(e.data) as JsonObject });

/** `withSecret`: only the answers of create and rotate carry the signing secret. */
const endpointToPb = (e: WebhookEndpoint, withSecret = false) => toPb(WebhookEndpointSchema, { ...e, secret: withSecret ? e.secret : undefined });
const deliveryToPb = (d: Delivery) => toPb(WebhookDeliverySchema, d);
const attemptToPb = (a: DeliveryAttempt) => toPb(WebhookDeliveryAttemptSchema, a);

const UPDATABLE = new Set(["url", "description", "event_types", "status"]);

/** With an update_mask (a JSON body's keys), exactly the fields it names; without, the fields set. */
function updateInput(req: UpdateWebhookEndpointRequest): EndpointInput {
  const paths = req.updateMask?.paths ?? [];
  if (paths.length === 0) {
    return { url: req.url, description: req.description, eventTypes: req.eventTypes.length > 0 ? req.eventTypes : undefined, status: req.status };
  }
  paths.forEach((p, i) => {
    if (!UPDATABLE.has(p) && p !== "endpoint_id") invalid(`update_mask.paths[${i}]`, `cannot name "${p}": an update changes url, description, event_types or status`);
  });
  const named = new Set(paths);
  return {
    url: named.has("url") ? (req.url ?? "") : undefined,
    description: named.has("description") ? (req.description ?? null) : undefined,
    eventTypes: named.has("event_types") ? req.eventTypes : undefined,
    status: named.has("status") ? (req.status ?? "") : undefined,
  };
}

export function webhookEndpointService(endpoints: WebhookEndpoints): ServiceImpl<typeof WebhookEndpointService> {
  return {
    async createWebhookEndpoint(req, ctx) {
      const e = await endpoints.create(callerOf(ctx), { url: req.url, description: req.description, eventTypes: req.eventTypes });
      return { webhookEndpoint: endpointToPb(e, true) };
    },
    async getWebhookEndpoint(req, ctx) {
      return { webhookEndpoint: endpointToPb(await endpoints.get(callerOf(ctx), req.endpointId)) };
    },
    async listWebhookEndpoints(req, ctx) {
      return pageOf(await endpoints.list(callerOf(ctx), req.limit, req.offset), "webhookEndpoints", (e) => endpointToPb(e));
    },
    async updateWebhookEndpoint(req, ctx) {
      return { webhookEndpoint: endpointToPb(await endpoints.update(callerOf(ctx), req.endpointId, updateInput(req))) };
    },
    async deleteWebhookEndpoint(req, ctx) {
      const e = await endpoints.delete(callerOf(ctx), req.endpointId);
      return { id: e.id, deleted: true };
    },
    async rotateWebhookEndpointSecret(req, ctx) {
      return { webhookEndpoint: endpointToPb(await endpoints.rotateSecret(callerOf(ctx), req.endpointId), true) };
    },
    async listWebhookDeliveries(req, ctx) {
      return pageOf(await endpoints.deliveries(callerOf(ctx), req.endpointId, { status: req.status, eventId: req.eventId }, req.limit, req.offset), "deliveries", deliveryToPb);
    },
    async listWebhookDeliveryAttempts(req, ctx) {
      return pageOf(await endpoints.attempts(callerOf(ctx), req.endpointId, req.deliveryId, req.limit, req.offset), "attempts", attemptToPb);
    },
    async replayWebhookEvents(req, ctx) {
      const failedSince = instantOf(req.failedSince);
      if (failedSince && Number.isNaN(failedSince.getTime())) invalid("failed_since", "is not a valid instant");
      return { replayed: await endpoints.replay(callerOf(ctx), req.endpointId, { eventId: req.eventId, failedSince }) };
    },
  };
}

/** `stopped`: the server is stopping (open streams end). */
export function eventService(feed: EventFeed, stopped?: AbortSignal): ServiceImpl<typeof EventService> {
  return {
    async *watchEvents(req, ctx) {
      const caller = callerOf(ctx);
      const signal = stopped ? AbortSignal.any([ctx.signal, stopped]) : ctx.signal;
      for await (const e of feed.watch(caller, req.after, req.types, signal)) yield { event: eventToPb(e, caller.mode) };
      if (ctx.signal.aborted) throw ctx.signal.reason;
    },
    async listEvents(req, ctx) {
      const caller = callerOf(ctx);
      const page = await feed.list(caller, req.after, req.types, req.limit);
      return { events: page.events.map((e) => eventToPb(e, caller.mode)), hasMore: page.hasMore };
    },
    async getEvent(req, ctx) {
      const caller = callerOf(ctx);
      return { event: eventToPb(await feed.get(caller, req.eventId), caller.mode) };
    },
  };
}
