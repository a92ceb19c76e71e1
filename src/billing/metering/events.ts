/**
 * Usage event rules (DESIGN §7): what a valid event is, how it is identified for idempotency,
 * and what it adds to the hourly totals of each pricing metric that reads it.
 */
import { hash } from "node:crypto";
import type { AggregationType, PricingMetric } from "../catalog/types.js";
import { AlreadyExistsError, type BillingError, type InvalidArgumentError, NotFoundError, Violations } from "../errors.js";
import { newId } from "../ids.js";
import { type Agg, aggOfEvent, combine, coordinatesOf, needsValue, valueProblem } from "./aggregate.js";
import { checkInstant, isSupported } from "../time.js";
import { HOUR, MINUTE } from "./periods.js";
import { type ValueMark, valueMarksOf } from "./unique.js";
import { hashCoordinates } from "./coordinates.js";

export { hashCoordinates };

export type Grain = "hour" | "minute";

export const MAX_BATCH = 1000;
export const MAX_KEY = 255;
export const MAX_DATA_KEYS = 100;
export const MAX_DATA_VALUE = 1000;

export interface UsageEventInput {
  idempotencyKey: string;
  subjectId: string;
  eventName: string;
  data: Record<string, string>;
  /** When it happened, as sent (a google.protobuf.Timestamp's time, to the millisecond); undefined when left out. */
  timestamp: Date | undefined;
  /**
   * Why the timestamp as sent is no instant (JSON text the wire layer could not read as one, in
   * the parser's words): the event is rejected with it, naming its `timestamp`.
   */
  timestampProblem?: string;
}

/** An event that passed the checks that need no database. */
export interface PreparedEvent {
  /** Position in the request, and the path prefix of its fields ("" or "events[3]."). */
  index: number;
  path: string;
  idempotencyKey: string;
  subjectKey: string;
  eventName: string;
  data: Record<string, string>;
  occurredAt: number;
  /** The timestamp as the caller gave it (normalised), or "" when defaulted: part of the fingerprint. */
  givenTimestamp: string;
}

export type Outcome = { status: "accepted" | "duplicate"; id: string } | { status: "rejected"; error: BillingError };

/** An event ready to be written, and what it adds to the totals if it is new. */
export interface Candidate {
  event: PreparedEvent;
  /** When it happened: the event's timestamp, or its subject's test clock time. */
  occurredAt: number;
  id: string;
  subjectId: string;
  fingerprint: string;
  contributions: Contribution[];
  /** What it marks in the distinct values of unique_count metrics (unique.ts). */
  marks: ValueMark[];
}

/** One event's (or many events') addition to one hourly or minute total. */
export interface Contribution {
  grain: Grain;
  metricId: string;
  subjectId: string;
  bucketStart: number;
  dimsHash: string;
  dims: Record<string, string>;
  agg: Agg;
}

/** Checks one event without the database; returns it prepared, or the error it is rejected with. */
export function prepare(input: UsageEventInput, index: number, path: string, now: number): PreparedEvent | BillingError {
  // Made only for an event with something wrong (most have nothing).
  let found: Violations | undefined;
  const v = () => (found ??= new Violations(path.endsWith(".") ? path.slice(0, -1) : path));
  if (input.idempotencyKey.trim() === "") v().add("idempotency_key", "is required");
  else if (input.idempotencyKey.length > MAX_KEY) v().add("idempotency_key", `must have at most ${MAX_KEY} characters`);
  if (input.subjectId.trim() === "") v().add("subject_id", "is required");
  if (input.eventName.trim() === "") v().add("event_name", "is required");
  else if (input.eventName.length > MAX_KEY) v().add("event_name", `must have at most ${MAX_KEY} characters`);
  let keys = 0;
  for (const _ in input.data) keys++;
  if (keys > MAX_DATA_KEYS) v().add("data", `must have at most ${MAX_DATA_KEYS} keys`);
  for (const k in input.data) {
    if (k.length > MAX_KEY) v().at("data").add(k, `keys must have at most ${MAX_KEY} characters`);
    else if ((input.data[k] ?? "").length > MAX_DATA_VALUE) v().at("data").add(k, `must have at most ${MAX_DATA_VALUE} characters`);
  }
  let occurredAt = now;
  let givenTimestamp = "";
  if (input.timestampProblem !== undefined) v().add("timestamp", input.timestampProblem);
  else if (input.timestamp !== undefined) {
    const t = isSupported(input.timestamp) ? input.timestamp : checkInstant(input.timestamp, v(), "timestamp");
    if (t !== undefined) {
      occurredAt = t.getTime();
      givenTimestamp = t.toISOString();
    }
  }
  if (found && !found.empty) {
    try {
      found.throwIfAny();
    } catch (err) {
      return err as BillingError;
    }
  }
  return {
    index,
    path,
    idempotencyKey: input.idempotencyKey,
    subjectKey: input.subjectId,
    eventName: input.eventName,
    data: input.data,
    occurredAt,
    givenTimestamp,
  };
}

/** What identifies an event's payload: a repeat with the same fingerprint is a duplicate. */
export function fingerprint(subjectId: string, e: PreparedEvent): string {
  const keys = Object.keys(e.data);
  if (keys.length > 1) keys.sort();
  // The JSON text of [subjectId, eventName, [[key, value], …] (keys sorted), givenTimestamp],
  // written directly (its SHA-256 is what events stored so far hold).
  let data = "";
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i] as string;
    data += `${i === 0 ? "" : ","}[${JSON.stringify(k)},${JSON.stringify(e.data[k])}]`;
  }
  return hash("sha256", `[${JSON.stringify(subjectId)},${JSON.stringify(e.eventName)},[${data}],${JSON.stringify(e.givenTimestamp)}]`, "hex");
}

/** What one event adds to the hourly totals of each metric reading its event name. */
export function contributionsOf(
  metrics: readonly PricingMetric[],
  subjectId: string,
  e: { eventName: string; data: Record<string, string>; occurredAt: number; idempotencyKey: string },
): Contribution[] {
  const out: Contribution[] = [];
  for (const m of metrics) {
    if (m.eventName !== e.eventName) continue;
    const agg = aggOfEvent(m, e.data, e.occurredAt, e.idempotencyKey);
    if (!agg) continue;
    const dims = coordinatesOf(m.dimensions, e.data);
    const dimsHash = hashCoordinates(dims);
    // Hourly totals answer whole hours; minute totals the whole minutes of a period's edge hours.
    out.push({ grain: "hour", metricId: m.id, subjectId, bucketStart: Math.floor(e.occurredAt / HOUR) * HOUR, dimsHash, dims, agg });
    out.push({ grain: "minute", metricId: m.id, subjectId, bucketStart: Math.floor(e.occurredAt / MINUTE) * MINUTE, dimsHash, dims, agg });
  }
  return out;
}

/**
 * Decides, inside the ingest transaction, which prepared events can be written: the subject must
 * exist in the environment, and every metric of the event's name that reads a value must find it
 * in `data`: a decimal number, or any text for a unique_count metric. `subjects` maps each subject key to its ID and, for a subject on a
 * test clock, the clock's time.
 */
export function decide(
  events: readonly PreparedEvent[],
  metricsByName: ReadonlyMap<string, PricingMetric[]>,
  subjects: ReadonlyMap<string, { id: string; clockTime: number | null }>,
): (Candidate | { event: PreparedEvent; error: BillingError })[] {
  // Per event name: each field a value is read from, the metrics reading it (one violation per
  // field, naming every metric that reads it), and whether one needs a decimal there (a field
  // read only by unique_count metrics takes any text).
  const readersByName = new Map<string, [field: string, names: string, type: AggregationType][]>();
  const readersOf = (eventName: string, metrics: readonly PricingMetric[]) => {
    let list = readersByName.get(eventName);
    if (list === undefined) {
      const readers = new Map<string, { names: string[]; type: AggregationType }>();
      for (const m of metrics) {
        if (!needsValue(m.aggregation.type)) continue;
        const field = m.aggregation.valueField ?? "";
        const prev = readers.get(field);
        const type = prev && prev.type !== "unique_count" ? prev.type : m.aggregation.type;
        readers.set(field, { names: [...(prev?.names ?? []), `${m.id} (${m.aggregation.type})`], type });
      }
      list = [...readers].map(([field, { names, type }]) => [field, `pricing metric${names.length > 1 ? "s" : ""} ${names.join(", ")}`, type]);
      readersByName.set(eventName, list);
    }
    return list;
  };
  return events.map((given) => {
    const subject = subjects.get(given.subjectKey);
    const subjectId = subject?.id;
    // A subject on a test clock: an event without a timestamp happened at the clock's time.
    const e = subject?.clockTime != null && given.givenTimestamp === "" ? { ...given, occurredAt: subject.clockTime } : given;
    if (!subjectId) {
      return { event: given, error: new NotFoundError("SUBJECT_NOT_FOUND", `${e.path}subject_id: subject ${JSON.stringify(e.subjectKey)} not found`, { subject_id: e.subjectKey }) };
    }
    const metrics = metricsByName.get(e.eventName) ?? [];
    let found: Violations | undefined;
    for (const [field, readers, type] of readersOf(e.eventName, metrics)) {
      const problem = valueProblem(e.data[field], type);
      if (problem) (found ??= new Violations(e.path.replace(/\.$/, ""))).at("data").add(field, `${problem}: read by ${readers}`);
    }
    if (found) {
      try {
        found.throwIfAny();
      } catch (err) {
        return { event: given, error: err as InvalidArgumentError };
      }
    }
    return {
      event: given,
      occurredAt: e.occurredAt,
      id: newId("ue"),
      subjectId,
      fingerprint: fingerprint(subjectId, e),
      contributions: contributionsOf(metrics, subjectId, e),
      marks: valueMarksOf(metrics, subjectId, e),
    };
  });
}

/** Merges contributions to the same hourly total, sorted by key (a fixed lock order). */
export function mergeContributions(list: Iterable<Contribution>): Contribution[] {
  const byKey = new Map<string, Contribution>();
  for (const c of list) {
    const key = `${c.grain}|${c.metricId}|${c.subjectId}|${c.bucketStart}|${c.dimsHash}`;
    const prev = byKey.get(key);
    byKey.set(key, prev ? { ...prev, agg: combine(prev.agg, c.agg) } : c);
  }
  return [...byKey.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, c]) => c);
}

/** An event already stored under the same idempotency key decides what a candidate becomes. */
export function classify(c: Candidate, stored: { id: string; fingerprint: string } | undefined): Outcome {
  if (!stored) throw new Error(`event ${c.id} was neither inserted nor found`);
  if (stored.id === c.id) return { status: "accepted", id: c.id };
  if (stored.fingerprint === c.fingerprint) return { status: "duplicate", id: stored.id };
  return {
    status: "rejected",
    error: new AlreadyExistsError("IDEMPOTENCY_KEY_REUSED", `${c.event.path}idempotency_key: ${JSON.stringify(c.event.idempotencyKey)} was already used for an event with another payload`, {
      idempotency_key: c.event.idempotencyKey,
      event_id: stored.id,
    }),
  };
}

/**
 * The judgement an ingest needs inside its transaction, passed to the store (UsageStore.ingest)
 * rather than imported by it: which events can be written (decide), and what each written
 * candidate became once the unique idempotency key answered (classify).
 */
export interface IngestDecision {
  decide: typeof decide;
  classify: typeof classify;
}

export const ingestDecision: IngestDecision = { decide, classify };
