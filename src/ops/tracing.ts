/**
 * Tracing (DESIGN §10): W3C trace context accepted on every request (`traceparent` and
 * `tracestate`, as HTTP headers on REST and Connect and as metadata on gRPC) and sent with every
 * outgoing webhook; with OTEL_EXPORTER_OTLP_ENDPOINT set, spans exported over OTLP/HTTP (JSON)
 * by the OpenTelemetry SDK: one per request (its server span, a child of the caller's span when
 * it sent one), per database transaction made while serving one, per webhook delivery attempt
 * and per payment provider call.
 *
 * Without the setting nothing of the SDK is started: no provider, no exporter, no context manager
 * (the API's no-op), and the server's hot paths run as they do without tracing (src/edge only
 * wraps its handler when a Tracing exists). No auto-instrumentation: the spans are the ones made
 * here, so none is doubled and the driver's hot paths stay untouched.
 *
 * The span in progress is found through the API's context, kept by an AsyncLocalStorage context
 * manager (registered once per process, only when tracing starts): it reaches the database
 * transactions and the log lines of the request without being passed along.
 */
import { type Attributes, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, context } from "@opentelemetry/api";
import type { PaymentProvider } from "../billing/subscriptions/types.js";
import type { TracingConfig } from "../config.js";
import type { Logger } from "../log.js";
import type { RequestTrace } from "./trace.js";

export { SpanKind, SpanStatusCode };

/** One app's tracer and exporter (ops/otel-sdk.ts); made by startTracing when OTEL_EXPORTER_OTLP_ENDPOINT is set. */
export interface Tracing {
  /**
   * Runs `serve` (a request's handler) in the context of a new server span: a child of the span
   * in the request's `traceparent` (and `tracestate`) when it has a valid one, else a new trace.
   * The span is ended by `endRequest`, when the request ends.
   */
  serveRequest(headers: Record<string, string | string[] | undefined>, serve: () => void): Span;
  /** Ends a request's span, named and described by what its trace says of it. */
  endRequest(span: Span, t: RequestTrace, code: string, status: number): void;
  /**
   * `fn` in a span of its own, a child of the span in progress (`root`: always a new trace). A
   * throw or rejection is recorded on the span (status ERROR) and passed on.
   */
  inSpan<T>(name: string, kind: SpanKind, attributes: Attributes, fn: (span: Span) => Promise<T>, root?: boolean): Promise<T>;
  /** `fn` in a span of its own only when a span is in progress (a request's): work outside any request makes no traces of its own. */
  inChildSpan<T>(name: string, kind: SpanKind, attributes: Attributes, fn: () => Promise<T>): Promise<T>;
  /** `headers` with the `traceparent` (and `tracestate`) of `span`, for an outgoing request. */
  inject(span: Span, headers: Record<string, string>): Record<string, string>;
  /** Exports what is left, then stops. */
  shutdown(): Promise<void>;
}

/**
 * The app's tracing: undefined without OTEL_EXPORTER_OTLP_ENDPOINT, and then the SDK is not even
 * loaded (it is imported here, only when configured).
 */
export async function startTracing(config: TracingConfig | undefined, log: Logger): Promise<Tracing | undefined> {
  if (config === undefined) return undefined;
  const { OtelTracing } = await import("./otel-sdk.js");
  return new OtelTracing(config, log);
}

/** `fn` outside any trace: background work started from a request (a delivery run it woke) is not part of that request's trace. */
export function detached<T>(fn: () => T): T {
  return context.with(ROOT_CONTEXT, fn);
}

/** A payment provider whose charges each run in a span (a client span: the call leaves the service for a real processor). */
export function tracedProvider(provider: PaymentProvider, tracing: Tracing, name: string): PaymentProvider {
  return {
    test: provider.test,
    ...(provider.kind === undefined ? {} : { kind: provider.kind }),
    ...(provider.cardHint === undefined ? {} : { cardHint: provider.cardHint }),
    // A provider with its own card page (Stripe Checkout) keeps it, untraced.
    ...(provider.startCardSetup === undefined ? {} : { startCardSetup: provider.startCardSetup.bind(provider) }),
    // The test provider's confirmation of a charge that needed the customer (the hosted page's form).
    ...(provider.confirmAction === undefined ? {} : { confirmAction: provider.confirmAction.bind(provider) }),
    // A provider's own page for a payment waiting for the customer (Stripe Checkout in payment mode).
    ...(provider.startPayment === undefined ? {} : { startPayment: provider.startPayment.bind(provider) }),
    // The cancel of a payment waiting for the customer on an invoice that ended.
    ...(provider.cancel === undefined ? {} : { cancel: provider.cancel.bind(provider) }),
    tokenize: (cardNumber) => provider.tokenize(cardNumber),
    charge: (method, amount, currency, idempotencyKey, context) =>
      tracing.inSpan("payment.charge", SpanKind.CLIENT, { "billing.payment_provider": name, "billing.currency": currency }, async (span) => {
        const out = await provider.charge(method, amount, currency, idempotencyKey, context);
        span.setAttribute("billing.charge_ok", out.ok);
        return out;
      }),
    refund: (chargeKey, amount, currency, idempotencyKey, context) =>
      tracing.inSpan("payment.refund", SpanKind.CLIENT, { "billing.payment_provider": name, "billing.currency": currency }, async (span) => {
        const out = await provider.refund(chargeKey, amount, currency, idempotencyKey, context);
        span.setAttribute("billing.refund_ok", out.ok);
        return out;
      }),
  };
}
