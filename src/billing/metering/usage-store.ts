/**
 * The storage port of metering (src/db implements it): events, hourly totals, unique_count
 * metrics' distinct values and rejected events as stored, and what is kept of a rejected event.
 */
import { type BillingError, InvalidArgumentError } from "../errors.js";
import type { Page, PageResult } from "../pagination.js";
import type { Grain, IngestDecision, Outcome, PreparedEvent, UsageEventInput } from "./events.js";
import type { LevelRead } from "./unique.js";

/** An hourly total as stored. */
export interface StoredRollup {
  bucketStart: number;
  dims: Record<string, string>;
  sum: string;
  count: string;
  max: string | null;
  last: { at: number; key: string; value: string } | null;
}

/** Totals added up over many buckets, for one combination of dimensions. */
export interface StoredTotal {
  dims: Record<string, string>;
  sum: string;
  count: string;
  max: string | null;
}

/** The distinct values of a unique_count metric one level read counted (see unique.ts). */
export interface StoredUniqueCount {
  /** The read's position in the list asked for. */
  read: number;
  /** The combination of dimensions, or null when counted over all. */
  dims: Record<string, string> | null;
  count: number;
}

export interface RawEvent {
  occurredAt: number;
  idempotencyKey: string;
  data: Record<string, string>;
}

/** A subject's events of one name stored after a sequence number (unique-meter.ts). */
export interface EventsSince {
  /** The environment's last stored sequence number when read (at least every returned event's). */
  last: string;
  events: { seq: string; occurredAt: number; data: Record<string, string> }[];
}

/** A stored (accepted) event as an operator reads it. */
export interface StoredEvent {
  id: string;
  idempotencyKey: string;
  subjectId: string;
  eventName: string;
  occurredAt: Date;
  createdAt: Date;
  data: Record<string, unknown>;
}

/** A usage event an ingest call rejected, as the operator reads it: what was sent (cut short) and why. */
export interface RejectedEvent {
  receivedAt: Date;
  idempotencyKey: string;
  subjectId: string;
  eventName: string;
  /** The timestamp as sent (ISO 8601), null when left out or unreadable. */
  timestamp: string | null;
  /** The error's reason code (INVALID_FIELD, SUBJECT_NOT_FOUND, IDEMPOTENCY_KEY_REUSED, …). */
  reason: string;
  message: string;
  /** The field path(s) named by the error ("events[3].data.tokens"), null when it names none. */
  field: string | null;
}

/** Cuts a text to `n` characters (code points, so no surrogate pair is split). */
function cut(s: string, n: number): string {
  if (s.length <= n) return s;
  const chars = Array.from(s);
  return chars.length <= n ? s : `${chars.slice(0, n - 1).join("")}…`;
}

/** What the dashboard keeps of a rejected event: the fields as sent, cut to the store's lengths. */
export function rejectedEvent(input: UsageEventInput, error: BillingError, receivedAt: Date): RejectedEvent {
  const violations = error instanceof InvalidArgumentError ? error.violations : [];
  const named = violations.length > 0 ? [...new Set(violations.map((v) => v.field))].join(", ") : (/^([A-Za-z0-9_.[\]]+): /.exec(error.message)?.[1] ?? "");
  const t = input.timestamp;
  return {
    receivedAt,
    idempotencyKey: cut(input.idempotencyKey, 255),
    subjectId: cut(input.subjectId, 255),
    eventName: cut(input.eventName, 255),
    timestamp: t && !Number.isNaN(t.getTime()) ? cut(t.toISOString(), 64) : null,
    reason: cut(error.reason, 64),
    message: cut(error.message, 1000),
    field: named === "" ? null : cut(named, 255),
  };
}

export interface UsageStore {
  /**
   * Stores rejected events of one ingest call (one multi-row insert), and now and then prunes the
   * environment's beyond its newest `keep`.
   */
  recordRejected(environmentId: string, events: RejectedEvent[], keep: number): Promise<void>;
  /** The environment's rejected events, newest first. */
  rejectedEvents(environmentId: string, page: Page): Promise<PageResult<RejectedEvent>>;
  /** Events accepted per hour of arrival in [from, to) (hours without any left out). */
  ingestedPerHour(environmentId: string, from: Date, to: Date): Promise<{ hour: Date; accepted: number }[]>;
  /** The environment's stored events, newest first (the operator dashboard). */
  recentEvents(environmentId: string, page: Page): Promise<PageResult<StoredEvent>>;
  /**
   * In one transaction: takes a shared lock on the environment (metric creation takes it
   * exclusively, so an event is either in a new metric's backfill or sees the metric), loads the
   * metrics of the events' names and the subjects they name, lets `decision.decide` (events.ts)
   * judge each event, writes the candidates with the unique (environment, idempotency key)
   * deciding which are new (`decision.classify`), and adds the new ones' contributions to the
   * hourly totals. Outcomes in order.
   */
  ingest(environmentId: string, events: PreparedEvent[], decision: IngestDecision): Promise<Outcome[]>;
  /**
   * Whether an error of `ingest` is the database refusing what it was given (so the same events
   * without some of them may commit), rather than the database being unreachable or busy.
   */
  failedOnData(err: unknown): boolean;
  /** Whether an error is the database being unreachable or not answering in time (`unavailable`). */
  failedUnreachable(err: unknown): boolean;
  /** Hourly (or minute) totals of a metric for a subject with bucketStart in [from, to). */
  rollups(metricId: string, subjectId: string, from: number, to: number, grain?: Grain): Promise<StoredRollup[]>;
  /**
   * The totals of one grain with bucketStart in [from, to) added up in the database, one row per
   * combination of dimensions: sum, count and max (not last), whatever the number of buckets.
   */
  totalsByDims(metricId: string, subjectId: string, from: number, to: number, grain: Grain): Promise<StoredTotal[]>;
  /**
   * For each level read of a unique_count metric, its distinct values in the database: per
   * combination of dimensions (`byDims`), or over all of them (one row per read, maybe 0).
   */
  uniqueCounts(metricId: string, subjectId: string, reads: readonly LevelRead[], byDims: boolean): Promise<StoredUniqueCount[]>;
  /** A level read's distinct (combination of dimensions, value key) pairs. */
  uniquePairs(metricId: string, subjectId: string, read: LevelRead): Promise<{ dims: Record<string, string>; valueKey: string }[]>;
  /** Raw events of a subject and event name with occurredAt in [from, to] (both inclusive). */
  rawEvents(subjectId: string, eventName: string, from: number, to: number): Promise<RawEvent[]>;
  /** The environment's last stored event sequence number ("0" when it has none). */
  lastSeq(environmentId: string): Promise<string>;
  /**
   * A subject's events of one name with occurredAt in [from, to] (both inclusive) stored after
   * sequence number `after`, read with the environment's last sequence number; undefined when the
   * environment stored more than `most` events since `after` (reading them would cost too much).
   */
  eventsSince(environmentId: string, subjectId: string, eventName: string, after: string, from: number, to: number, most: number): Promise<EventsSince | undefined>;
}
