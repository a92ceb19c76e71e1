/** Tables of usage: the append-only events, their exact hourly and minute totals, and the distinct values of unique_count metrics. */
import { EntitySchema } from "typeorm";
import { type Dialect, type ExactText, decimalColumn, idColumn, jsonColumn, seqColumn, sumColumn, textColumn, timeColumn } from "../columns.js";

/** A usage event as received: append-only. */
export interface UsageEventRow {
  seq?: string;
  id: string;
  environment_id: string;
  idempotency_key: string;
  /** SHA-256 of the payload: a repeat of the key with the same one is a duplicate. */
  fingerprint: string;
  subject_id: string;
  event_name: string;
  occurred_at: Date;
  data: Record<string, string>;
  created_at: Date;
}

/** A rejected usage event: its fields as sent (cut to the columns' lengths) and why it was refused. */
export interface RejectedUsageEventRow {
  seq?: string;
  environment_id: string;
  received_at: Date;
  idempotency_key: string;
  subject_id: string;
  event_name: string;
  event_time: string | null;
  reason: string;
  message: string;
  field: string | null;
}

/** Exact hourly totals of one pricing metric for one subject and one combination of its dimensions. */
export interface UsageRollupRow {
  metric_id: string;
  subject_id: string;
  bucket_start: Date;
  dims_hash: string;
  dims: Record<string, string>;
  sum_value: string;
  event_count: string;
  max_value: string | null;
  last_value: string | null;
  last_at: Date | null;
  last_key: string | null;
}

/**
 * A distinct value of a unique_count metric in one bucket of 2^level UTC days, for one subject and
 * combination of dimensions, with the first and last instant of its events there (unique.ts).
 */
export interface UsageUniqueValueRow {
  metric_id: string;
  subject_id: string;
  level: number;
  bucket: number;
  dims_hash: string;
  /** The value, or `~` and its SHA-256 when longer than 64 characters. */
  value_key: string;
  dims: Record<string, string>;
  /** The value's text when value_key is its hash. */
  value_text: string | null;
  first_at: Date;
  last_at: Date;
}

export function usageEntities(dialect: Dialect, exact: ExactText) {
  const UsageEvent = new EntitySchema<UsageEventRow>({
    name: "UsageEvent",
    tableName: "usage_events",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      idempotency_key: textColumn(255, false),
      fingerprint: textColumn(64, false),
      subject_id: idColumn(),
      event_name: textColumn(255, false),
      occurred_at: timeColumn(),
      data: jsonColumn(dialect),
      created_at: timeColumn(),
    }),
    uniques: [{ name: "uq_usage_events_env_key", columns: ["environment_id", "idempotency_key"] }],
    indices: [
      { name: "ix_usage_events_subject_name_time", columns: ["subject_id", "event_name", "occurred_at"] },
      // A new metric's backfill reads its event name's events of one environment only.
      { name: "ix_usage_events_env_name", columns: ["environment_id", "event_name"] },
      // The operator dashboard's recent events, newest first.
      { name: "ix_usage_events_env_seq", columns: ["environment_id", "seq"] },
    ],
  });

  /** Exact totals of one grain: `usage_rollups` per hour, `usage_rollups_minute` per minute. */
  const rollups = (name: string, tableName: string) =>
    new EntitySchema<UsageRollupRow>({
      name,
      tableName,
      columns: exact({
        metric_id: { ...idColumn(), primary: true },
        subject_id: { ...idColumn(), primary: true },
        bucket_start: { ...timeColumn(), primary: true },
        dims_hash: { ...textColumn(64, false), primary: true },
        dims: jsonColumn(dialect),
        sum_value: sumColumn(dialect),
        event_count: { type: "bigint", nullable: false },
        max_value: decimalColumn(dialect, true),
        last_value: decimalColumn(dialect, true),
        last_at: timeColumn(true),
        last_key: textColumn(255),
      }),
    });

  const UsageRollup = rollups("UsageRollup", "usage_rollups");

  const UsageRollupMinute = rollups("UsageRollupMinute", "usage_rollups_minute");

  /** Events an environment's ingest calls accepted (stored) per hour of arrival (the dashboard's chart). */
  const IngestHour = new EntitySchema<{ environment_id: string; hour: Date; accepted: string }>({
    name: "IngestHour",
    tableName: "environment_ingest_hours",
    columns: exact({
      environment_id: { ...idColumn(), primary: true },
      hour: { ...timeColumn(), primary: true },
      accepted: { type: "bigint", nullable: false },
    }),
  });

  /** Usage events an ingest call rejected, with the reason (the dashboard's events page); an environment keeps its newest. */
  const RejectedUsageEvent = new EntitySchema<RejectedUsageEventRow>({
    name: "RejectedUsageEvent",
    tableName: "rejected_usage_events",
    columns: exact({
      seq: seqColumn(dialect),
      environment_id: idColumn(),
      received_at: timeColumn(),
      idempotency_key: textColumn(255, false),
      subject_id: textColumn(255, false),
      event_name: textColumn(255, false),
      event_time: textColumn(64),
      reason: textColumn(64, false),
      message: textColumn(1000, false),
      field: textColumn(255),
    }),
    indices: [{ name: "ix_rejected_usage_events_env_seq", columns: ["environment_id", "seq"] }],
  });

  const UsageUniqueValue = new EntitySchema<UsageUniqueValueRow>({
    name: "UsageUniqueValue",
    tableName: "usage_unique_values",
    columns: exact({
      metric_id: { ...idColumn(), primary: true },
      subject_id: { ...idColumn(), primary: true },
      level: { type: "int", nullable: false, primary: true },
      bucket: { type: "int", nullable: false, primary: true },
      dims_hash: { ...textColumn(64, false), primary: true },
      value_key: { ...textColumn(65, false), primary: true },
      dims: jsonColumn(dialect),
      value_text: textColumn(1000),
      first_at: timeColumn(),
      last_at: timeColumn(),
    }),
  });

  return { UsageEvent, UsageRollup, UsageRollupMinute, IngestHour, RejectedUsageEvent, UsageUniqueValue };
}
