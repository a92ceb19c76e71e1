/**
 * Tables of outgoing events (DESIGN §10): the outbox of events, webhook endpoints, one delivery
 * row per (endpoint, event) that the delivery worker claims and retries, and every attempt of it
 * (the delivery log).
 */
import { EntitySchema } from "typeorm";
import { type Dialect, type ExactText, idColumn, intColumn, jsonColumn, seqColumn, textColumn, timeColumn } from "../columns.js";

export interface EventRow {
  seq?: string;
  id: string;
  environment_id: string;
  type: string;
  data: string;
  created_at: Date;
  /** 1 until the delivery worker has written the event's deliveries (fanned it out), then 0. */
  fanout?: number;
}

export interface WebhookEndpointRow {
  seq?: string;
  id: string;
  environment_id: string;
  url: string;
  description: string | null;
  event_types: string[];
  secret: string;
  status: string;
  failing_since: Date | null;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

export interface WebhookDeliveryRow {
  seq?: string;
  id: string;
  environment_id: string;
  endpoint_id: string;
  event_id: string;
  event_created_at: Date;
  status: string;
  attempts: number;
  next_attempt_at: Date;
  lease_token: string | null;
  last_attempt_at: Date | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: Date;
  updated_at: Date;
  replay_of: string;
}

export interface WebhookAttemptRow {
  seq?: string;
  id: string;
  delivery_id: string;
  endpoint_id: string;
  event_id: string;
  attempted_at: Date;
  succeeded: boolean;
  status_code: number | null;
  latency_ms: number;
  response_excerpt: string | null;
  error: string | null;
}

export interface UsageThresholdMarkRow {
  seq?: string;
  subscription_id: string;
  period_key: string;
  rate_code: string;
  percent: number;
  event_id: string;
  created_at: Date;
}

export function webhooksEntities(dialect: Dialect, exact: ExactText) {
  const Event = new EntitySchema<EventRow>({
    name: "Event",
    tableName: "events",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      type: textColumn(64, false),
      // The resource's JSON text, frozen at the change (not parsed by the store).
      data: { type: dialect === "mysql" ? "mediumtext" : "text", nullable: false },
      created_at: timeColumn(),
      fanout: { type: "int", nullable: false, default: 0 },
    }),
    uniques: [{ name: "uq_events_id", columns: ["id"] }],
    indices: [
      { name: "ix_events_env_seq", columns: ["environment_id", "seq"] },
      { name: "ix_events_fanout", columns: ["fanout", "seq"] },
    ],
  });

  const WebhookEndpoint = new EntitySchema<WebhookEndpointRow>({
    name: "WebhookEndpoint",
    tableName: "webhook_endpoints",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      url: textColumn(2000, false),
      description: textColumn(255),
      event_types: jsonColumn(dialect),
      secret: textColumn(100, false),
      status: textColumn(12, false),
      failing_since: timeColumn(true),
      created_at: timeColumn(),
      updated_at: timeColumn(),
      deleted_at: timeColumn(true),
    }),
    uniques: [{ name: "uq_webhook_endpoints_id", columns: ["id"] }],
    indices: [{ name: "ix_webhook_endpoints_env_seq", columns: ["environment_id", "seq"] }],
  });

  const WebhookDelivery = new EntitySchema<WebhookDeliveryRow>({
    name: "WebhookDelivery",
    tableName: "webhook_deliveries",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      endpoint_id: idColumn(),
      event_id: idColumn(),
      event_created_at: timeColumn(),
      status: textColumn(12, false),
      attempts: intColumn(),
      next_attempt_at: timeColumn(),
      // Set by the server that claimed the delivery; its claim lasts until next_attempt_at.
      lease_token: textColumn(32),
      last_attempt_at: timeColumn(true),
      last_status_code: { type: "int", nullable: true, default: null },
      last_error: textColumn(500),
      created_at: timeColumn(),
      updated_at: timeColumn(),
      // The delivery this one replays ('' for the event's first delivery to the endpoint).
      replay_of: { type: "varchar", length: 32, nullable: false, default: "" },
    }),
    uniques: [
      { name: "uq_webhook_deliveries_id", columns: ["id"] },
      // One first delivery per (endpoint, event), and one replay of each delivery.
      { name: "uq_webhook_deliveries_endpoint_event_replay", columns: ["endpoint_id", "event_id", "replay_of"] },
    ],
    indices: [
      { name: "ix_webhook_deliveries_due", columns: ["status", "next_attempt_at"] },
      { name: "ix_webhook_deliveries_endpoint_seq", columns: ["endpoint_id", "seq"] },
      // The dashboard's endpoints needing attention: their deliveries being retried, or failed lately.
      { name: "ix_webhook_deliveries_endpoint_status", columns: ["endpoint_id", "status", "updated_at"] },
    ],
  });

  const WebhookAttempt = new EntitySchema<WebhookAttemptRow>({
    name: "WebhookAttempt",
    tableName: "webhook_attempts",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      delivery_id: idColumn(),
      endpoint_id: idColumn(),
      event_id: idColumn(),
      attempted_at: timeColumn(),
      succeeded: { type: "boolean", nullable: false },
      status_code: { type: "int", nullable: true, default: null },
      latency_ms: intColumn(),
      response_excerpt: textColumn(1000),
      error: textColumn(500),
    }),
    uniques: [{ name: "uq_webhook_attempts_id", columns: ["id"] }],
    indices: [{ name: "ix_webhook_attempts_endpoint_seq", columns: ["endpoint_id", "seq"] }],
  });

  // usage.threshold_crossed, once per (subscription, period, usage rate, percentage): the unique key
  // makes a repeated or concurrent check unable to fire twice.
  const UsageThresholdMark = new EntitySchema<UsageThresholdMarkRow>({
    name: "UsageThresholdMark",
    tableName: "usage_threshold_marks",
    columns: exact({
      seq: seqColumn(dialect),
      subscription_id: idColumn(),
      period_key: textColumn(64, false),
      rate_code: textColumn(100, false),
      percent: intColumn(),
      event_id: idColumn(),
      created_at: timeColumn(),
    }),
    uniques: [{ name: "uq_usage_threshold_marks", columns: ["subscription_id", "period_key", "rate_code", "percent"] }],
  });

  return { Event, WebhookEndpoint, WebhookDelivery, WebhookAttempt, UsageThresholdMark };
}
