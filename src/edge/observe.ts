/**
 * What every request leaves behind when it ends: its metrics, its server span (tracing on), and
 * its access line at info (with, at debug, a line when it arrives: one that never ends shows up).
 */
import { performance } from "node:perf_hooks";
import type { Logger } from "../log.js";
import type { Metrics } from "../ops/metrics.js";
import { type RequestTrace, codeName, codeOfHttpStatus, traceOf } from "../ops/trace.js";
import { spanIds } from "../ops/span-ids.js";
import type { Tracing } from "../ops/tracing.js";
import type { Req, Res } from "./listener.js";

export function createObserver(metrics: Metrics, log: Logger, tracing: Tracing | undefined) {
  const accessLog = log.enabled("info");
  const arrivals = log.enabled("debug");

  /**
   * Records a request when it ends (`this` is the response, on 'close'): metrics, span, access
   * line. Its code is the one something on the way knew, or the gRPC status it answered, or the
   * client's going first (an HTTP/2 stream it reset before the answer ended, as gRPC clients cancel
   * and on a deadline; a connection closed before any answer), or the HTTP status.
   */
  function finished(this: Res): void {
    const trace = traceOf(this);
    if (!trace) return;
    let code = trace.code;
    if (code === undefined) {
      const grpcStatus = trace.grpcStatus?.();
      if (grpcStatus != null) code = codeName(Number(grpcStatus));
      else if (("stream" in this && this.stream.aborted) || (!this.writableFinished && !this.headersSent)) code = trace.goneCode();
      else code = codeOfHttpStatus(this.statusCode);
    }
    const ms = performance.now() - trace.start;
    metrics.observeRequest(trace.protocol, trace.procedure, code, ms / 1000);
    const span = trace.span;
    if (span) tracing?.endRequest(span, trace, code, this.statusCode);
    if (!accessLog) return;
    log.info("request", {
      request_id: trace.id,
      protocol: trace.protocol,
      procedure: trace.procedure,
      status: this.statusCode,
      code,
      duration_ms: Math.round(ms * 1000) / 1000,
      environment: trace.environmentId ?? null,
      // The request's own trace (tracing on): the line is written when it ends, outside its span.
      ...(span && spanIds(span)),
    });
  }

  /** Watches a request from its arrival to its end. */
  return (req: Req, res: Res, trace: RequestTrace, path: string): void => {
    res.once("close", finished);
    if (arrivals) log.debug("request received", { request_id: trace.id, method: req.method, path, http: req.httpVersion });
  };
}
