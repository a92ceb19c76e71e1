/** Metering wire ⇄ domain. */
import { create } from "@bufbuild/protobuf";
import { NullValue, ValueSchema } from "@bufbuild/protobuf/wkt";
import { type BillingError, InvalidArgumentError } from "../../billing/errors.js";
import type { UsageEventInput } from "../../billing/metering/events.js";
import type { Summary, SummaryInput } from "../../billing/metering/usage.js";
import { type PricingMetricSummary, PricingMetricSummarySchema } from "../../gen/billing/v1/pricing_metric_pb.js";
import type { CreatePricingMetricSummaryRequest } from "../../gen/billing/v1/pricing_metric_service_pb.js";
import { type UsageEventError, UsageEventErrorSchema, type UsageEventInput as UsageEventInputPb } from "../../gen/billing/v1/usage_event_pb.js";
import type { CreateUsageEventRequest } from "../../gen/billing/v1/usage_event_service_pb.js";
import { codeName } from "../errors.js";
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
    code: codeName(err),
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
