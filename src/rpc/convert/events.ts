/** Events and webhook endpoints: domain → wire. */
import { type JsonObject, create } from "@bufbuild/protobuf";
import type { StoredEvent } from "../../billing/events/types.js";
import type { Delivery, DeliveryAttempt, WebhookEndpoint } from "../../billing/events/webhooks.js";
import { type Event as EventPb, EventSchema } from "../../gen/billing/v1/event_pb.js";
import {
  type WebhookDeliveryAttempt as AttemptPb,
  WebhookDeliveryAttemptSchema,
  type WebhookDelivery as DeliveryPb,
  WebhookDeliverySchema,
  type WebhookEndpoint as EndpointPb,
  WebhookEndpointSchema,
} from "../../gen/billing/v1/webhook_endpoint_pb.js";
import { ts } from "./common.js";

/** `data` as a JSON object (a Struct), as webhook bodies carry it; the store keeps its JSON text. */
export function eventToPb(e: StoredEvent, mode: string): EventPb {
  const data = JSON.parse(e.data) as JsonObject;
  return create(EventSchema, { id: e.id, type: e.type, createdAt: ts(e.createdAt), environmentId: e.environmentId, mode, data });
}

/** `withSecret`: only the answers of create and rotate carry the signing secret. */
export function endpointToPb(e: WebhookEndpoint, withSecret = false): EndpointPb {
  return create(WebhookEndpointSchema, {
    id: e.id,
    url: e.url,
    description: e.description ?? undefined,
    eventTypes: e.eventTypes,
    status: e.status,
    secret: withSecret ? e.secret : undefined,
    failingSince: e.failingSince ? ts(e.failingSince) : undefined,
    createdAt: ts(e.createdAt),
    updatedAt: ts(e.updatedAt),
  });
}

export function deliveryToPb(d: Delivery): DeliveryPb {
  return create(WebhookDeliverySchema, {
    id: d.id,
    endpointId: d.endpointId,
    eventId: d.eventId,
    eventType: d.eventType,
    status: d.status,
    attempts: d.attempts,
    nextAttemptAt: d.nextAttemptAt ? ts(d.nextAttemptAt) : undefined,
    lastAttemptAt: d.lastAttemptAt ? ts(d.lastAttemptAt) : undefined,
    lastStatusCode: d.lastStatusCode ?? undefined,
    lastError: d.lastError ?? undefined,
    createdAt: ts(d.createdAt),
  });
}

export function attemptToPb(a: DeliveryAttempt): AttemptPb {
  return create(WebhookDeliveryAttemptSchema, {
    id: a.id,
    deliveryId: a.deliveryId,
    eventId: a.eventId,
    attemptedAt: ts(a.attemptedAt),
    succeeded: a.succeeded,
    statusCode: a.statusCode ?? undefined,
    latencyMs: a.latencyMs,
    responseExcerpt: a.responseExcerpt ?? undefined,
    error: a.error ?? undefined,
  });
}
