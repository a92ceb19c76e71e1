/** Metering wire ⇄ domain. */
import { type Message, create } from "@bufbuild/protobuf";
import { NullValue, ValueSchema, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { type BillingError, InvalidArgumentError } from "../../billing/errors.js";
import type { UsageEventInput } from "../../billing/metering/events.js";
import type { Summary, SummaryInput } from "../../billing/metering/usage.js";
import { type PricingMetricSummary, PricingMetricSummarySchema } from "../../gen/billing/v1/pricing_metric_pb.js";
import type { CreatePricingMetricSummaryRequest } from "../../gen/billing/v1/pricing_metric_service_pb.js";
import { type UsageEventError, UsageEventErrorSchema, type UsageEventInput as UsageEventInputPb, UsageEventInputSchema } from "../../gen/billing/v1/usage_event_pb.js";
import { type CreateUsageEventRequest, CreateUsageEventBatchRequestSchema, CreateUsageEventRequestSchema } from "../../gen/billing/v1/usage_event_service_pb.js";
import { parseInstant } from "../../billing/time.js";
import { codeName } from "../../ops/trace.js";
import { codeOf } from "../errors.js";
import { wellFormed } from "../json-parse.js";
import { carriesRetired, instantOf, retired, ts } from "./common.js";

const RETIRED_TIMESTAMP = retired(5, "an RFC 3339 string", 6, "a google.protobuf.Timestamp");

/**
 * An event as sent; `timestampProblem`: why its JSON timestamp did not read (see rpc/context.ts
 * DeferredProblems). An event still carrying the string timestamp of an older contract (field 5)
 * is rejected for it, rather than happening "now".
 */
export function usageEventInput(e: UsageEventInputPb | CreateUsageEventRequest, timestampProblem?: string): UsageEventInput {
  const problem = timestampProblem ?? (carriesRetired(e, 5) ? RETIRED_TIMESTAMP : undefined);
  return { idempotencyKey: e.idempotencyKey, subjectId: e.subjectId, eventName: e.eventName, data: e.data, timestamp: instantOf(e.timestamp), timestampProblem: problem };
}

export function usageEventError(err: BillingError): UsageEventError {
  return create(UsageEventErrorSchema, {
    code: codeName(codeOf(err)),
    message: err.message,
    fieldViolations: err instanceof InvalidArgumentError ? err.violations.map((v) => ({ field: v.field, description: v.description })) : [],
  });
}

export function summaryInput(req: CreatePricingMetricSummaryRequest): SummaryInput {
  const p = req.period;
  return {
    period: p
      ? {
          start: instantOf(p.start),
          end: instantOf(p.end),
          inclusiveStart: p.inclusiveStart,
          inclusiveEnd: p.inclusiveEnd,
        }
      : undefined,
    subjectId: req.subjectId,
    dimensions: req.dimensions,
    granularity: req.periodGranularity,
  };
}

export function summaryToPb(s: Summary): PricingMetricSummary {
  return create(PricingMetricSummarySchema, {
    id: s.id,
    pricingMetricId: s.pricingMetricId,
    subjectId: s.subjectId,
    period: {
      start: ts(new Date(s.period.start)),
      end: ts(new Date(s.period.end)),
      inclusiveStart: s.period.inclusiveStart,
      inclusiveEnd: s.period.inclusiveEnd,
    },
    dimensionCoordinates: s.coordinates,
    value: create(ValueSchema, s.value === null ? { kind: { case: "nullValue", value: NullValue.NULL_VALUE } } : { kind: { case: "stringValue", value: s.value } }),
  });
}

// ---------------------------------------------------------------------------------------------
// The common case of an ingest body, read straight into its message

const isText = (v: unknown): v is string => typeof v === "string" && wellFormed(v);

type PlainEvent = Pick<UsageEventInputPb, "idempotencyKey" | "subjectId" | "eventName" | "data" | "timestamp">;

/** The text fields, by each of their JSON names. */
const TEXT_FIELDS = new Map<string, "idempotencyKey" | "subjectId" | "eventName">([
  ["idempotency_key", "idempotencyKey"],
  ["idempotencyKey", "idempotencyKey"],
  ["subject_id", "subjectId"],
  ["subjectId", "subjectId"],
  ["event_name", "eventName"],
  ["eventName", "eventName"],
]);

/**
 * One event of a parsed JSON body when it is plainly valid: an object of only the message's own
 * fields (snake_case or lowerCamelCase), text that is valid Unicode, `data` an object of texts and
 * `timestamp` an instant that reads. Anything else (a number, a null, an unknown field, a bad
 * timestamp...) is undefined: the body then goes the general way (rpc/json.ts checkJson, then
 * fromJson), which says what is wrong exactly as before. Duplicate keys: the last wins, as there.
 */
function plainEvent(v: unknown): PlainEvent | undefined {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return undefined;
  const e: PlainEvent = { idempotencyKey: "", subjectId: "", eventName: "", data: {} };
  for (const key in v) {
    const x = (v as Record<string, unknown>)[key];
    const text = TEXT_FIELDS.get(key);
    if (text !== undefined) {
      if (!isText(x)) return undefined;
      e[text] = x;
    } else if (key === "data") {
      if (x === null || typeof x !== "object" || Array.isArray(x)) return undefined;
      const data: Record<string, string> = {};
      for (const k in x) {
        const value = (x as Record<string, unknown>)[k];
        if (k === "__proto__" || !isText(k) || !isText(value)) return undefined;
        data[k] = value;
      }
      e.data = data;
    } else if (key === "timestamp" && typeof x === "string") {
      const p = parseInstant(x);
      if (!p.ok) return undefined;
      e.timestamp = timestampFromMs(p.ms);
    } else {
      return undefined;
    }
  }
  return e;
}

/**
 * Readers of the ingest requests' JSON bodies (parsed) straight into their messages, for the REST
 * bridge: a 500-event batch otherwise went through the general check (a JSON copy of it) and
 * protobuf's fromJson (another), about a fifth of the server's CPU per event. Undefined: not plainly
 * valid, read the general way.
 */
export const fastRequestReaders: ReadonlyMap<string, (parsed: unknown) => Message | undefined> = new Map<string, (parsed: unknown) => Message | undefined>([
  [
    CreateUsageEventRequestSchema.typeName,
    (parsed) => {
      const e = plainEvent(parsed);
      return e && create(CreateUsageEventRequestSchema, e);
    },
  ],
  [
    CreateUsageEventBatchRequestSchema.typeName,
    (parsed) => {
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return undefined;
      let list: unknown;
      for (const key in parsed) {
        if (key !== "events") return undefined;
        list = (parsed as Record<string, unknown>)[key];
      }
      if (!Array.isArray(list)) return undefined;
      const events: UsageEventInputPb[] = new Array(list.length);
      for (let i = 0; i < list.length; i++) {
        const e = plainEvent(list[i]);
        if (!e) return undefined;
        events[i] = create(UsageEventInputSchema, e);
      }
      return create(CreateUsageEventBatchRequestSchema, { events });
    },
  ],
]);
