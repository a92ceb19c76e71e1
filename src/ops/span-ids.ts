/**
 * The ids of a span, for log lines and request logs: a leaf module (the OpenTelemetry API only), so
 * that the logger can read them without importing the tracing setup that itself logs.
 */
import { type Span, context, isSpanContextValid, trace } from "@opentelemetry/api";

/** The trace and span ids of the span in progress, for a log line; undefined when there is none. */
export function activeSpanIds(): { trace_id: string; span_id: string } | undefined {
  const span = trace.getSpan(context.active());
  if (span === undefined) return undefined;
  return spanIds(span);
}

export function spanIds(span: Span): { trace_id: string; span_id: string } | undefined {
  const sc = span.spanContext();
  return isSpanContextValid(sc) ? { trace_id: sc.traceId, span_id: sc.spanId } : undefined;
}
