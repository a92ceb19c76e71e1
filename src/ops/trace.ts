/**
 * One request's trace: its request id (DESIGN §10: `X-Request-Id` accepted or made, echoed on
 * every response, in every log line of the request and in the details of its errors), and what
 * its access-log line and its metrics say: protocol, procedure, code, duration, environment.
 *
 * One small object per request, made by the request pipeline (src/edge/handler.ts) and reached from the response
 * (`traceOf(res)`, a symbol property) or the call's context values (rpc/context.ts traceKey): no
 * closure per request, no AsyncLocalStorage (which on Node 20 costs every promise of the process).
 */
import { randomUUID } from "node:crypto";
import type { Span } from "@opentelemetry/api";

export const REQUEST_ID_HEADER = "x-request-id";

/** A request id a client may give: printable ASCII (spaces included), 1 to 128 characters. */
const VALID_REQUEST_ID = /^[\x20-\x7e]{1,128}$/;

/** The client's request id if it is a valid one, else a new one (a random UUID). */
export function requestIdFrom(given: unknown): string {
  return typeof given === "string" && VALID_REQUEST_ID.test(given) ? given : randomUUID();
}

/** The protocol label of metrics and access lines: the four of the API, and "http" for the plain routes (health, metrics, pages). */
export type Protocol = "rest" | "connect" | "grpc" | "grpc-web" | "http";

export class RequestTrace {
  /** The environment of the caller's key, once it is known. */
  environmentId: string | undefined = undefined;
  /**
   * The call's code ("ok", "not_found", …: Connect's names) when something on the way knew it
   * (the error interceptor, a refusal, the REST error writer, the lean gRPC reply); otherwise it is
   * read from the response when the request ends.
   */
  code: string | undefined = undefined;
  /** The grpc-status a gRPC response reported in its headers or trailers (served by connect-node). */
  grpcStatus: (() => string | null | undefined) | undefined = undefined;
  /** The call's own deadline (`grpc-timeout`, `connect-timeout-ms`), ms from its start; undefined: none. */
  deadlineMs: number | undefined = undefined;
  /** The request's server span (tracing on: ops/tracing.ts), ended with the request. */
  span: Span | undefined = undefined;
  constructor(
    readonly id: string,
    /** performance.now() when the request arrived. */
    readonly start: number,
    public protocol: Protocol,
    /** A bounded label: a method's full name, a REST route's template, a plain route, or "other". */
    public procedure: string,
  ) {}

  /**
   * The code of a call whose client went away before it was answered (an HTTP/2 stream it reset,
   * a connection it closed): deadline_exceeded once the call's own deadline had about passed (a
   * gRPC client gives up then), else canceled. "About": the client counts its deadline from
   * before it sent the call, this server from when the call arrived, so the reset of a deadline
   * comes a little before the deadline by this server's count (up to a tenth of it, at least
   * 250 ms, is taken as the deadline's).
   */
  goneCode(now = performance.now()): string {
    if (this.deadlineMs === undefined) return "canceled";
    const slack = Math.max(250, this.deadlineMs / 10);
    return now - this.start >= this.deadlineMs - slack ? "deadline_exceeded" : "canceled";
  }
}

const TRACE = Symbol("request trace");

/** The trace the server put on a response (undefined for a response it did not make). */
export function traceOf(res: object): RequestTrace | undefined {
  return (res as { [TRACE]?: RequestTrace })[TRACE];
}

export function setTrace(res: object, trace: RequestTrace): void {
  (res as { [TRACE]?: RequestTrace })[TRACE] = trace;
}

/** Connect's code name for an HTTP status with no code of its own (pages, plain routes, transport refusals). */
export function codeOfHttpStatus(status: number): string {
  if (status < 400) return "ok";
  switch (status) {
    case 400:
      return "invalid_argument";
    case 401:
      return "unauthenticated";
    case 402:
    case 409:
      return "failed_precondition";
    case 403:
      return "permission_denied";
    case 404:
    case 410:
      return "not_found";
    case 405:
    case 501:
      return "unimplemented";
    case 408:
    case 504:
      return "deadline_exceeded";
    case 413:
    case 429:
      return "resource_exhausted";
    case 499:
      return "canceled";
    case 503:
      return "unavailable";
    default:
      return status >= 500 ? "internal" : "unknown";
  }
}

/** grpc-status (a number) as Connect's code name. */
const GRPC_CODES = [
  "ok",
  "canceled",
  "unknown",
  "invalid_argument",
  "deadline_exceeded",
  "not_found",
  "already_exists",
  "permission_denied",
  "resource_exhausted",
  "failed_precondition",
  "aborted",
  "out_of_range",
  "unimplemented",
  "internal",
  "unavailable",
  "data_loss",
  "unauthenticated",
];

export function codeName(code: number): string {
  return GRPC_CODES[code] ?? "unknown";
}
