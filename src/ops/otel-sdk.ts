/**
 * The OpenTelemetry SDK behind ops/tracing.ts's Tracing, loaded only when
 * OTEL_EXPORTER_OTLP_ENDPOINT is set: a tracer provider (always on, or as the caller's
 * `traceparent` decided), a batch span processor and the OTLP/HTTP exporter (JSON), W3C trace
 * context propagation, and an AsyncLocalStorage context manager registered once per process.
 */
import { type Attributes, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, context, defaultTextMapGetter, defaultTextMapSetter, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator, setGlobalErrorHandler } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, TracerProvider } from "@opentelemetry/sdk-trace";
import type { TracingConfig } from "../config.js";
import type { Logger } from "../log.js";
import type { RequestTrace } from "./trace.js";

/** Codes of a request that are the server's failure (its span's status is ERROR); the others are the caller's. */
const SERVER_FAULTS = new Set(["unknown", "internal", "unavailable", "data_loss", "deadline_exceeded", "unimplemented"]);

/** An export failure is logged at most this often (a collector that is down would fail every batch). */
const EXPORT_WARNING_EVERY_MS = 60_000;

const propagator = new W3CTraceContextPropagator();
let contextManager: AsyncLocalStorageContextManager | undefined;

/** One app's tracer and exporter (see Tracing for what each method does). */
export class OtelTracing {
  private readonly provider: TracerProvider;
  private readonly tracer;

  constructor(config: TracingConfig, log: Logger) {
    if (!contextManager) {
      contextManager = new AsyncLocalStorageContextManager();
      contextManager.enable();
      context.setGlobalContextManager(contextManager);
    }
    let warned = 0;
    setGlobalErrorHandler((err) => {
      const now = Date.now();
      if (now - warned < EXPORT_WARNING_EVERY_MS) return;
      warned = now;
      log.warn("tracing: spans could not be exported (the next failures within a minute are not logged)", { endpoint: config.endpoint, error: err instanceof Error ? err.message : String(err) });
    });
    this.provider = new TracerProvider({
      resource: resourceFromAttributes({ "service.name": config.serviceName }),
      // Always on, or as the caller decided: a request whose traceparent says "not sampled" is not recorded.
      sampler: new ParentBasedSampler({ root: new AlwaysOnSampler() }),
      spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: config.endpoint, headers: config.headers }), scheduledDelayMillis: config.scheduleDelayMs })],
    });
    this.tracer = this.provider.getTracer("usage-billing");
  }

  /**
   * Runs `serve` (a request's handler) in the context of a new server span: a child of the span
   * in the request's `traceparent` (and `tracestate`) when it has a valid one, else a new trace.
   * The span is ended by `endRequest`, when the request ends.
   */
  serveRequest(headers: Record<string, string | string[] | undefined>, serve: () => void): Span {
    const parent = propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
    const span = this.tracer.startSpan("request", { kind: SpanKind.SERVER }, parent);
    context.with(trace.setSpan(parent, span), serve);
    return span;
  }

  /** Ends a request's span, named and described by what its trace says of it. */
  endRequest(span: Span, t: RequestTrace, code: string, status: number): void {
    span.updateName(t.procedure);
    span.setAttributes({
      "billing.request_id": t.id,
      "billing.protocol": t.protocol,
      "billing.procedure": t.procedure,
      "billing.code": code,
      "http.response.status_code": status,
    });
    if (t.environmentId !== undefined) span.setAttribute("billing.environment", t.environmentId);
    if (t.protocol === "grpc" || t.protocol === "grpc-web" || t.protocol === "connect") span.setAttribute("rpc.system", t.protocol === "connect" ? "connect_rpc" : "grpc");
    if (SERVER_FAULTS.has(code)) span.setStatus({ code: SpanStatusCode.ERROR, message: code });
    span.end();
  }

  /**
   * `fn` in a span of its own, a child of the span in progress (`root`: always a new trace). A
   * throw or rejection is recorded on the span (status ERROR) and passed on.
   */
  inSpan<T>(name: string, kind: SpanKind, attributes: Attributes, fn: (span: Span) => Promise<T>, root = false): Promise<T> {
    return this.tracer.startActiveSpan(name, { kind, attributes, root }, (span) => {
      let out: Promise<T>;
      try {
        out = fn(span);
      } catch (err) {
        failed(span, err);
        span.end();
        throw err;
      }
      return out.then(
        (v) => {
          span.end();
          return v;
        },
        (err: unknown) => {
          failed(span, err);
          span.end();
          throw err;
        },
      );
    });
  }

  /** `fn` in a span of its own only when a span is in progress (a request's): work outside any request makes no traces of its own. */
  inChildSpan<T>(name: string, kind: SpanKind, attributes: Attributes, fn: () => Promise<T>): Promise<T> {
    if (trace.getSpan(context.active()) === undefined) return fn();
    return this.inSpan(name, kind, attributes, fn);
  }

  /** `headers` with the `traceparent` (and `tracestate`) of `span`, for an outgoing request. */
  inject(span: Span, headers: Record<string, string>): Record<string, string> {
    propagator.inject(trace.setSpan(ROOT_CONTEXT, span), headers, defaultTextMapSetter);
    return headers;
  }

  /** Exports what is left, then stops. */
  shutdown(): Promise<void> {
    return this.provider.shutdown();
  }
}

function failed(span: Span, err: unknown): void {
  if (err instanceof Error) span.recordException(err);
  span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
}
