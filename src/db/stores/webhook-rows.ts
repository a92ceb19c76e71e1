/** Rows of the webhook tables as the stores read them, and their domain objects. */
import type { EventType, StoredEvent } from "../../billing/events/types.js";
import type { Delivery, DeliveryAttempt, DeliveryStatus, EndpointStatus, WebhookEndpoint } from "../../billing/events/webhooks.js";
import { fromDbTime, fromDbTimeOrNull, fromJsonText } from "../raw.js";

export interface EndpointRaw {
  id: string;
  environment_id: string;
  url: string;
  description: string | null;
  event_types: unknown;
  secret: string;
  status: string;
  failing_since: unknown;
  created_at: unknown;
  updated_at: unknown;
}

export function endpointFromRow(r: EndpointRaw): WebhookEndpoint {
  return {
    id: r.id,
    environmentId: r.environment_id,
    url: r.url,
    description: r.description,
    eventTypes: fromJsonText<EventType[]>(r.event_types) ?? [],
    secret: r.secret,
    status: r.status as EndpointStatus,
    failingSince: fromDbTimeOrNull(r.failing_since),
    createdAt: fromDbTime(r.created_at),
    updatedAt: fromDbTime(r.updated_at),
  };
}

export interface EventRaw {
  seq: unknown;
  id: string;
  environment_id: string;
  type: string;
  data: string;
  created_at: unknown;
}

export function eventFromRow(r: EventRaw): StoredEvent {
  return { seq: Number(r.seq), id: r.id, environmentId: r.environment_id, type: r.type as EventType, createdAt: fromDbTime(r.created_at), data: r.data };
}

export const ENDPOINT_COLUMNS = "id, environment_id, url, description, event_types, secret, status, failing_since, created_at, updated_at";
export const EVENT_COLUMNS = "seq, id, environment_id, type, data, created_at";

export interface DeliveryRaw {
  id: string;
  environment_id: string;
  endpoint_id: string;
  event_id: string;
  type: string;
  event_created_at: unknown;
  status: string;
  attempts: unknown;
  next_attempt_at: unknown;
  last_attempt_at: unknown;
  last_status_code: unknown;
  last_error: string | null;
  created_at: unknown;
}

export function deliveryFromRow(r: DeliveryRaw): Delivery {
  const status = r.status === "held" ? "pending" : (r.status as DeliveryStatus);
  return {
    id: r.id,
    environmentId: r.environment_id,
    endpointId: r.endpoint_id,
    eventId: r.event_id,
    eventType: r.type as EventType,
    eventCreatedAt: fromDbTime(r.event_created_at),
    status,
    attempts: Number(r.attempts),
    nextAttemptAt: status === "pending" ? fromDbTime(r.next_attempt_at) : null,
    lastAttemptAt: fromDbTimeOrNull(r.last_attempt_at),
    lastStatusCode: r.last_status_code === null ? null : Number(r.last_status_code),
    lastError: r.last_error,
    createdAt: fromDbTime(r.created_at),
  };
}

export interface AttemptRaw {
  id: string;
  delivery_id: string;
  endpoint_id: string;
  event_id: string;
  attempted_at: unknown;
  succeeded: unknown;
  status_code: unknown;
  latency_ms: unknown;
  response_excerpt: string | null;
  error: string | null;
}

export function attemptFromRow(r: AttemptRaw): DeliveryAttempt {
  return {
    id: r.id,
    deliveryId: r.delivery_id,
    endpointId: r.endpoint_id,
    eventId: r.event_id,
    attemptedAt: fromDbTime(r.attempted_at),
    succeeded: Boolean(Number(r.succeeded)),
    statusCode: r.status_code === null ? null : Number(r.status_code),
    latencyMs: Number(r.latency_ms),
    responseExcerpt: r.response_excerpt,
    error: r.error,
  };
}
