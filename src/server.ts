/**
 * One port for everything: a TCP listener looks at the first bytes of each connection and hands
 * HTTP/2 (the cleartext preface, as gRPC clients send) to an h2c server and everything else to an
 * HTTP/1.1 server. Both run the same request handler: Connect RPC (gRPC, gRPC-Web, Connect), then
 * the REST bridge, then the few plain routes (health). Unary binary gRPC is served on its HTTP/2
 * stream by the handler's lean path (grpcStream, rpc/grpc-unary.ts), with the same checks.
 */
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import http2, { type Http2ServerRequest, type Http2ServerResponse, type Http2Session, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import { timingSafeEqual } from "node:crypto";
import net, { type Socket } from "node:net";
import tls, { type TLSSocket } from "node:tls";
import { performance } from "node:perf_hooks";
import type { DescMethod, Message } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter, createContextValues } from "@connectrpc/connect";
import type { Compression, UniversalHandler } from "@connectrpc/connect/protocol";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { ConnectionLimits, RateLimits } from "./config.js";
import { type Admission, type KeylessStreams, RETRY_AFTER_SECONDS, type Ticket, bodyLimit, bodyTooLarge, isBulk, overloaded } from "./limits.js";
import type { Logger } from "./log.js";
import type { Readiness } from "./ops/health.js";
import type { Metrics } from "./ops/metrics.js";
import { spanIds } from "./ops/span-ids.js";
import type { Tracing } from "./ops/tracing.js";
import { REQUEST_ID_HEADER, RequestTrace, codeName, codeOfHttpStatus, requestIdFrom, setTrace, traceOf } from "./ops/trace.js";
import { sendError } from "./rest/errors.js";
import type { FormBodies, FormRefusal } from "./rest/form-body.js";
import { page as formPage } from "./rest/pages.js";
import { type RestGateway, type RestRoute, type RestTarget, sendRefusal } from "./rest/gateway.js";
import { API_KEY_HEADER, type Authenticated, type PreAuth, preAuthKey } from "./rpc/auth.js";
import { type RateLimiter, effectiveLimits, rateClass, rateLimitHeaders, rateLimited } from "./ratelimit.js";
import { CallValues, traceKey } from "./rpc/context.js";
import { publicError, withRequestInfo } from "./rpc/errors.js";
import { type GrpcFlavour, base64Length, grpcFlavour, grpcRequest, grpcResponse, unimplemented } from "./rpc/grpc-wire.js";
import { headersOf, isStreamingRequest } from "./rpc/requests.js";
import { GrpcReply, decodeRequest, grpcDeadline, requestCompression, responseCompression, servesLean } from "./rpc/grpc-unary.js";
import { envelopedMessages, servesLeanStream } from "./rpc/grpc-stream.js";
import type { Invoker } from "./rpc/invoke.js";

type Req = IncomingMessage | Http2ServerRequest;
type Res = ServerResponse | Http2ServerResponse;

export interface HandlerParts {
  router: ConnectRouter;
  rest: RestGateway;
  pages: (req: Req, res: Res) => boolean;
  /** GET /readyz and the gRPC health service: database, migrations, scheduler (ops/health.ts). */
  readiness: Readiness;
  /** The app's metrics (GET /metrics), and the bearer token a scrape must send (undefined: none). */
  metrics: Metrics;
  metricsToken?: string | undefined;
  log: Logger;
  /**
   * The caller of `method` with this `x-api-key` header value and its key (cached verification;
   * undefined for the services that need no key); throws for a missing, unknown, revoked or
   * misplaced key. Called before any of the body is read. Synchronous when no lookup is needed
   * (a cached key, a service that needs none).
   */
  authenticate: (method: DescMethod, key: string | undefined) => Authenticated | undefined | Promise<Authenticated | undefined>;
  /** The server's bounds on requests and body bytes in flight. */
  admission: Admission;
  /** Forms POSTed to pages (no key): read whole, within their own bounds, before admission (rest/form-body.ts). */
  forms?: FormBodies;
  /** Key-less gRPC reflection streams: their own count and lifetime (limits.ts KeylessStreams). */
  keylessStreams?: KeylessStreams;
  /** Per-key token buckets, and the server's default limits (an environment may override them). */
  rateLimiter?: RateLimiter;
  rateLimits?: RateLimits;
  /**
   * The unary and client-streaming methods through the router's interceptors (rpc/invoke.ts):
   * with it, binary gRPC to them is served by the lean paths (rpc/grpc-unary.ts,
   * rpc/grpc-stream.ts) rather than by connect-node.
   */
  invoke?: Invoker;
  /**
   * Tracing (ops/tracing.ts), when OTEL_EXPORTER_OTLP_ENDPOINT is set: each request runs in its
   * server span, a child of the caller's `traceparent`. Without it the handler is not wrapped.
   */
  tracing?: Tracing | undefined;
}

/** Liveness, readiness, metrics, the transport's no-op and their RPC: never refused by admission control. */
const EXEMPT = new Set(["/healthz", "/readyz", "/metrics", "/ping", "/billing.v1.HealthService/Ping", "/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch"]);

/** Key-less streams counted apart from admission (HandlerParts.keylessStreams): gRPC server reflection. */
const KEYLESS_STREAMS = new Set(["/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"]);

/** Ends a request's stream at once: an HTTP/2 stream is reset (the client sees CANCELLED), an HTTP/1.1 connection closed. */
function cutStream(req: Req): void {
  const stream = (req as Http2ServerRequest).stream as ServerHttp2Stream | undefined;
  if (stream) stream.close(http2.constants.NGHTTP2_CANCEL);
  else req.socket.destroy();
}

/** The plain routes, answered before anything else (no key, no admission); their paths are their metrics' procedure label. */
const PLAIN = new Set(["/healthz", "/readyz", "/metrics"]);

/** Whether `header` (an Authorization value) is `Bearer <token>`, compared in constant time. */
function bearerMatches(header: string | undefined, token: string): boolean {
  if (typeof header !== "string" || !header.startsWith("Bearer ")) return false;
  const given = Buffer.from(header.slice(7).trim());
  const want = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}

/**
 * An unread HTTP/1.1 remainder up to this is read and discarded by Node so that the connection
 * stays open for the next request; a larger (or unknown) one closes the connection instead.
 */
const DISCARD_BYTES = 64 * 1024;

function declaredLength(req: Req | IncomingHttpHeaders): number | undefined {
  const raw = ("headers" in req ? (req.headers as IncomingHttpHeaders) : req)["content-length"];
  if (typeof raw !== "string" || !/^\d+$/.test(raw)) return undefined;
  return Number(raw);
}

/**
 * A request body as it is read, stopping at the bounds: more than `limit` bytes (unary calls;
 * Connect bounds each message of a stream itself) is resource_exhausted; bytes the server has no
 * room for (counted on `ticket` unless the declared length was already) are unavailable. The
 * node stream is never destroyed here: what is left unread is dealt with by `leaveUnread`.
 */
async function* boundedBody(req: Req, o: { limit: number | undefined; ticket: Ticket | undefined; countBytes: boolean; streaming: boolean; refused: () => void }): AsyncGenerator<Uint8Array> {
  let size = 0;
  let held = 0;
  try {
    for await (const chunk of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (o.limit !== undefined && size > o.limit) {
        o.refused();
        throw bodyTooLarge(o.limit);
      }
      if (o.countBytes && o.ticket) {
        if (!o.ticket.charge(chunk.length)) {
          o.refused();
          throw overloaded("request bytes");
        }
        held += chunk.length;
      }
      yield chunk;
      // A stream's bytes are in flight until the next are asked for; a unary body's until the end.
      if (o.streaming && o.ticket && held > 0) {
        o.ticket.release(held);
        held = 0;
      }
    }
  } catch (err) {
    // A body whose client reset its stream or closed its connection midway fails on Node's side
    // (premature close): the client's choice, canceled, never an internal error of the server.
    if (!(err instanceof ConnectError) && (("stream" in req && req.stream.aborted) || req.aborted || req.socket?.destroyed)) {
      throw new ConnectError("the client cancelled the call", Code.Canceled);
    }
    throw err;
  }
  // An HTTP/2 body ends (rather than fails) when the client resets its stream: not a whole stream.
  if ("stream" in req && req.stream.aborted) throw new ConnectError("the client cancelled the call", Code.Canceled);
}

/** A call's own deadline from its headers (`grpc-timeout`, `connect-timeout-ms`), ms; undefined: none or unreadable. */
function ownDeadline(headers: IncomingHttpHeaders): number | undefined {
  const connect = headers["connect-timeout-ms"];
  if (typeof connect === "string" && /^\d{1,10}$/.test(connect)) return Number(connect);
  try {
    return grpcDeadline(headers);
  } catch {
    return undefined;
  }
}

/**
 * A unary request body, whole, read from the HTTP/2 stream within the same bounds as boundedBody
 * (more than `limit` bytes: resource_exhausted; bytes the server has no room for: unavailable),
 * without an async iterator: the lean gRPC path's reader. A client that cancels first: canceled.
 */
function readWhole(stream: ServerHttp2Stream, o: { limit: number; ticket: Ticket | undefined; countBytes: boolean }): Promise<Buffer> {
  // Callbacks inline rather than named: tsx (esbuild keepNames) wraps every named closure in a
  // call that defines its name, per call. After the first outcome the rest is ignored (a stream
  // answered early is closed by its reply).
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    stream.on("data", (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > o.limit || (o.countBytes && o.ticket && !o.ticket.charge(chunk.length))) {
        done = true;
        reject(size > o.limit ? bodyTooLarge(o.limit) : overloaded("request bytes"));
        return;
      }
      chunks.push(chunk);
    });
    // on, not once: each fires at most once, and once() wraps its listener per call.
    stream.on("end", () => {
      if (done) return;
      done = true;
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
    });
    stream.on("aborted", () => {
      if (done) return;
      done = true;
      reject(new ConnectError("the client cancelled the call", Code.Canceled));
    });
  });
}

/**
 * A request answered before its body was read (whole): on HTTP/1.1 the connection is closed after
 * the answer unless the rest is small and nothing was read (then Node discards it and keeps the
 * connection); on HTTP/2 the stream is reset with NO_ERROR once the answer is sent, which tells
 * the client to stop sending without failing the call.
 */
function leaveUnread(req: Req, res: Res, readAny: boolean): void {
  if (req.complete) return;
  if ("stream" in req) {
    const stream = req.stream;
    res.once("finish", () => {
      if (!req.complete && !stream.destroyed) stream.close(http2.constants.NGHTTP2_NO_ERROR);
    });
    return;
  }
  const declared = declaredLength(req);
  if (!readAny && declared !== undefined && declared <= DISCARD_BYTES) return;
  if (!res.headersSent) res.setHeader("connection", "close");
  lingeringClose(req.socket);
}

/** How long a connection closed with its request body unread goes on being read (and discarded). */
const LINGER_MS = 2_000;

/**
 * A lingering close, as HTTP servers do it: once the answer is written the connection is closed
 * for writing, and what the client still sends is read and discarded for up to LINGER_MS before
 * the connection is destroyed. Destroyed at once, the socket would answer the client's next bytes
 * with a reset, which can discard the answer before the client has read it.
 */
function lingeringClose(socket: Socket): void {
  const s = socket as Socket & { lingering?: boolean };
  if (s.lingering) return;
  s.lingering = true;
  s.destroySoon = function (this: Socket) {
    this.end();
    this.resume();
    const timer = setTimeout(() => this.destroy(), LINGER_MS);
    timer.unref();
    this.once("close", () => clearTimeout(timer));
  };
}

/** A body that, read, throws `err`: how a refusal reaches Connect's protocol-specific error writer. */
// biome-ignore lint/correctness/useYield: a body that only throws; the generator form is what Connect reads
async function* refusing(err: ConnectError): AsyncGenerator<Uint8Array> {
  throw err;
}

/**
 * Every request, in this order: CORS preflight; admission (requests in flight; 503 at once);
 * the route and its method from the method and path; the key from the headers (401/403, no body
 * read); its rate limit (429); the declared length against the method's bound (413 /
 * resource_exhausted); a bulk slot for a bulk method and the server's byte bound (503); then the
 * handler, reading the body through `boundedBody`.
 */
export function createRequestHandler({
  router,
  rest,
  pages,
  readiness,
  metrics,
  metricsToken,
  log,
  authenticate,
  admission,
  forms,
  keylessStreams,
  rateLimiter,
  rateLimits,
  invoke,
  tracing,
}: HandlerParts) {
  const rpc = new Map(router.handlers.map((h) => [h.requestPath, h]));
  // Metrics' procedure labels: a method's full name; a REST route's method and template (bounded).
  const procedures = new Map(router.handlers.map((h) => [h.requestPath, h.requestPath.slice(1)]));
  const routeLabels = new Map<RestRoute, string>();
  const routeLabel = (route: RestRoute): string => {
    let label = routeLabels.get(route);
    if (label === undefined) {
      label = `${route.httpMethod} ${route.template}`;
      routeLabels.set(route, label);
    }
    return label;
  };
  const accessLog = log.enabled("info");
  // At debug, a line when a request arrives too: one that never ends shows up.
  const arrivals = log.enabled("debug");

  /** The end of a request: its metrics and its access line. One function for every request (`this` is the response). */
  function finished(this: Res): void {
    const trace = traceOf(this);
    if (!trace) return;
    let code = trace.code;
    if (code === undefined) {
      const grpcStatus = trace.grpcStatus?.();
      if (grpcStatus != null) code = codeName(Number(grpcStatus));
      // The client went first: an HTTP/2 stream it reset before the answer ended (gRPC clients
      // cancel so, and on a deadline), a connection closed before any answer.
      else if (("stream" in this && this.stream.aborted) || (!this.writableFinished && !this.headersSent)) code = trace.goneCode();
      else code = codeOfHttpStatus(this.statusCode);
    }
    end(trace, code, this.statusCode);
  }

  /** Records a request that ended with `code` (HTTP `status`): metrics, then the access line at info. */
  const end = (trace: RequestTrace, code: string, status: number): void => {
    const ms = performance.now() - trace.start;
    metrics.observeRequest(trace.protocol, trace.procedure, code, ms / 1000);
    const span = trace.span;
    if (span) tracing?.endRequest(span, trace, code, status);
    if (!accessLog) return;
    log.info("request", {
      request_id: trace.id,
      protocol: trace.protocol,
      procedure: trace.procedure,
      status,
      code,
      duration_ms: Math.round(ms * 1000) / 1000,
      environment: trace.environmentId ?? null,
      // The request's own trace (tracing on): the line is written when it ends, outside its span.
      ...(span && spanIds(span)),
    });
  };

  /** GET /healthz, /readyz and /metrics. */
  const plain = (path: string, req: Req, res: Res): void => {
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { allow: "GET", "content-type": "application/json" });
      res.end(JSON.stringify({ status: "method not allowed" }));
      return;
    }
    if (path === "/healthz") {
      // Liveness: the process answers. Nothing else is looked at (a database outage must not restart it).
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ status: "ok" }));
      return;
    }
    if (path === "/readyz") {
      readiness.check().then(
        (r) => {
          res.writeHead(r.ready ? 200 : 503, { "content-type": "application/json", "cache-control": "no-store" });
          res.end(JSON.stringify({ status: r.ready ? "ready" : "not ready", checks: r.checks }));
        },
        () => {
          res.writeHead(503, { "content-type": "application/json" });
          res.end(JSON.stringify({ status: "not ready" }));
        },
      );
      return;
    }
    if (metricsToken !== undefined && !bearerMatches(req.headers.authorization, metricsToken)) {
      res.writeHead(401, { "content-type": "application/json", "www-authenticate": 'Bearer realm="metrics"' });
      res.end(JSON.stringify({ status: "unauthenticated: send Authorization: Bearer <METRICS_TOKEN>" }));
      return;
    }
    metrics.expose().then(
      ({ contentType, text }) => {
        res.writeHead(200, { "content-type": contentType, "cache-control": "no-store" });
        res.end(text);
      },
      (err) => {
        log.error("metrics failed", { request_id: traceOf(res)?.id, err });
        if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
        res.end("metrics failed\n");
      },
    );
  };

  /** Runs a Connect handler and writes its response. */
  const runRpc = (path: string, handler: UniversalHandler, req: Req, res: Res, pre: PreAuth, body: AsyncIterable<Uint8Array>, noLength = false) => {
    const trace = traceOf(res);
    if (trace) trace.deadlineMs ??= ownDeadline(req.headers);
    const contextValues = createContextValues().set(preAuthKey, pre).set(traceKey, trace);
    // gRPC clients' expectations connect-node does not meet (grpc-web-text, grpc-message): rpc/grpc-wire.ts.
    const flavour = grpcFlavour(req.headers["content-type"]);
    const uReq = grpcRequest({ ...universalRequestFromNodeRequest(req as IncomingMessage, res as ServerResponse, undefined, contextValues), body }, flavour);
    if (noLength) {
      uReq.header = new Headers(uReq.header);
      uReq.header.delete("content-length");
    }
    handler(uReq)
      .then((uRes) => {
        // gRPC's status is in the trailers (or the headers of a trailers-only answer): read when the request ends.
        if (trace && flavour) trace.grpcStatus = () => uRes.trailer?.get("grpc-status") ?? uRes.header?.get("grpc-status");
        return universalResponseToNodeResponse(grpcResponse(uRes, flavour), res as ServerResponse);
      })
      .catch((err) => {
        // A client that went away (a reset stream, a closed connection) is not the server's failure.
        if (("stream" in res && res.stream.aborted) || req.socket?.destroyed) log.debug("rpc: the client went away", { rpc: path, request_id: trace?.id });
        else log.warn("rpc stream ended early", { rpc: path, request_id: trace?.id, err });
        if (!res.headersSent) res.destroy();
      });
  };

  /** Answers `err` on the request's protocol without reading (more of) its body. */
  const refuse = (path: string, handler: UniversalHandler | undefined, req: Req, res: Res, refusal: ConnectError, readAny = false) => {
    leaveUnread(req, res, readAny);
    const trace = traceOf(res);
    const err = withRequestInfo(refusal, trace?.id);
    if (trace) trace.code = codeName(err.code);
    // The error's metadata (Retry-After) become headers on REST and Connect unary, trailers on gRPC.
    // Without the declared length: Connect would check it against the method's bound first.
    if (handler) runRpc(path, handler, req, res, { error: err }, refusing(err), true);
    else sendRefusal(res, err);
  };

  /**
   * The caller of `method` from its key (looked up before any of the body is read; throws the
   * refusal), and the key's rate limit (ratelimit.ts): its headers for every answer, and the
   * refusal when over it. Synchronous when the key needs no lookup (the lean gRPC path awaits
   * only a promise); admitCaller always answers with a promise.
   */
  const admitNow = (method: DescMethod, key: string | undefined, path: string, trace: RequestTrace): Admitted | Promise<Admitted> => {
    let authed: Authenticated | undefined | Promise<Authenticated | undefined>;
    try {
      authed = authenticate(method, key);
    } catch (err) {
      throw err instanceof ConnectError ? err : publicError(err, log, path, trace.id);
    }
    if (authed instanceof Promise) {
      return authed.then(
        (a) => limitOf(method, a, trace),
        // A database that cannot be reached while the key is looked up: unavailable, as in a call.
        (err) => {
          throw err instanceof ConnectError ? err : publicError(err, log, path, trace.id);
        },
      );
    }
    return limitOf(method, authed, trace);
  };
  const admitCaller = async (method: DescMethod, key: string | undefined, path: string, trace: RequestTrace): Promise<Admitted> => admitNow(method, key, path, trace);

  const limitOf = (method: DescMethod, authed: Authenticated | undefined, trace: RequestTrace): Admitted => {
    if (authed) trace.environmentId = authed.caller.environmentId;
    if (!authed) return NO_CALLER;
    if (!rateLimiter || !rateLimits) return { caller: authed.caller };
    const cls = rateClass(method);
    const env = authed.found.environment;
    const verdict = rateLimiter.take(authed.found.key.id, cls, effectiveLimits(rateLimits, { ingestRps: env.ingestRps ?? null, apiRps: env.apiRps ?? null })[cls]);
    if (!verdict) return { caller: authed.caller };
    return { caller: authed.caller, limitHeaders: rateLimitHeaders(verdict), limited: verdict.allowed ? undefined : rateLimited(cls, verdict) };
  };

  /**
   * A unary binary gRPC call (rpc/grpc-unary.ts servesLean), served on its HTTP/2 stream with the
   * same checks in the same order as every other request: admission, the key and its rate limit
   * from the headers, the declared length against the method's bound and the server's bytes;
   * then the body read whole within those bounds, decoded once, the method called through the
   * interceptors (rpc/invoke.ts), the answer or the error written with its trailers. A
   * `grpc-timeout` that passes first answers deadline_exceeded and aborts the call's signal.
   */
  const serveGrpc = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, path: string, method: DescMethod, call: Invoker): void => {
    const trace = new RequestTrace(requestIdFrom(headers[REQUEST_ID_HEADER]), performance.now(), "grpc", procedures.get(path) ?? "other");
    const reply = new GrpcReply(stream, trace.id);
    setTrace(stream, trace);
    (stream as LeanStream).reply = reply;
    // One listener for the end of the call: its metrics, and its admission ticket given back.
    stream.on("close", leanFinished);
    if (arrivals) log.debug("request received", { request_id: trace.id, method: "POST", path, http: "2.0" });
    let ticket: Ticket | undefined;
    if (!EXEMPT.has(path)) {
      ticket = admission.enter();
      if (!ticket) {
        reply.fail(overloaded("requests"));
        return;
      }
      reply.ticket = ticket;
    }
    const wire = leanWire(reply, headers, path, trace);
    if (!wire) return;
    const { timeoutMs, compression } = wire;
    const key = headers[API_KEY_HEADER];
    (async () => {
      try {
        // No promise to wait for when the key needs no lookup (cached, or a service without keys).
        const admitted = admitNow(method, typeof key === "string" ? key : undefined, path, trace);
        const { caller, limitHeaders, limited } = admitted instanceof Promise ? await admitted : admitted;
        reply.headers = limitHeaders;
        if (limited) throw limited;
        const limit = bodyLimit(method);
        const declared = declaredLength(headers);
        if (declared !== undefined && declared > limit) throw bodyTooLarge(limit);
        // A bulk method waits for a slot (limits.ts) with its body unread, unless its body is small.
        if (ticket && isBulk(method) && !(await ticket.enterBulk(declared))) throw overloaded("bulk requests");
        // A body of known length counts in full at once; any other as it is read.
        if (declared !== undefined && ticket && !ticket.charge(declared)) throw overloaded("request bytes");
        const body = await readWhole(stream, { limit, ticket, countBytes: declared === undefined });
        reply.complete = true;
        // A compressed message is bounded again after decompression, as Connect bounds it.
        const decoded = decodeRequest(method, body, compression, limit);
        await leanCall(call, method, decoded instanceof Promise ? await decoded : decoded, caller, trace, path, headers, reply, timeoutMs);
      } catch (err) {
        reply.fail(publicError(err, log, path, trace.id));
      }
    })().catch((err) => leanBroken(stream, path, trace, err));
  };

  /**
   * What a lean gRPC call's headers say of its wire: the deadline (`grpc-timeout`, started on the
   * reply) and the request's compression (the answer's chosen on the reply); undefined, with the
   * error answered, for a malformed `grpc-timeout`.
   */
  const leanWire = (reply: GrpcReply, headers: IncomingHttpHeaders, path: string, trace: RequestTrace): { timeoutMs: number | undefined; compression: Compression | undefined } | undefined => {
    let timeoutMs: number | undefined;
    try {
      timeoutMs = grpcDeadline(headers);
    } catch (err) {
      reply.fail(publicError(err, log, path, trace.id));
      return undefined;
    }
    if (timeoutMs !== undefined) {
      reply.deadline(timeoutMs);
      trace.deadlineMs = timeoutMs;
    }
    const compression = requestCompression(headers);
    reply.compression = responseCompression(headers, compression);
    return { timeoutMs, compression };
  };

  /** A lean gRPC call's method through the interceptors (rpc/invoke.ts), and its answer written. */
  const leanCall = async (
    call: Invoker,
    method: DescMethod,
    message: Message | AsyncIterable<Message>,
    caller: Admitted["caller"],
    trace: RequestTrace,
    path: string,
    headers: IncomingHttpHeaders,
    reply: GrpcReply,
    timeoutMs: number | undefined,
  ): Promise<void> => {
    const out = await call({
      method,
      message,
      contextValues: new CallValues().set(preAuthKey, { caller }).set(traceKey, trace),
      protocolName: "grpc",
      requestMethod: "POST",
      url: path,
      // Bound, not an arrow: tsx names every arrow held by a property, per call.
      header: headersOf.bind(undefined, headers),
      signal: reply.signal,
      timeoutMs,
    });
    reply.message(method, out.message, out.header, out.trailer);
  };

  /** A lean call whose answer could not even be written: logged, and its stream destroyed. */
  const leanBroken = (stream: ServerHttp2Stream, path: string, trace: RequestTrace, err: unknown): void => {
    if (stream.aborted) log.debug("rpc: the client went away", { rpc: path, request_id: trace.id });
    else log.warn("rpc stream ended early", { rpc: path, request_id: trace.id, err });
    if (!stream.destroyed) stream.destroy();
  };

  /**
   * A client-streaming binary gRPC call (rpc/grpc-stream.ts servesLeanStream), after the checks
   * every request gets (admission, the key and its rate limit, a bulk slot): its messages are
   * read from the counted body as they arrive and handed to the method through the interceptors
   * (rpc/invoke.ts); the answer or the error is written with its trailers (GrpcReply). A
   * `grpc-timeout` that passes first answers deadline_exceeded, and the client is told to stop.
   */
  const serveGrpcStream = (
    req: Http2ServerRequest,
    res: Http2ServerResponse,
    path: string,
    method: DescMethod,
    caller: Admitted["caller"],
    limitHeaders: Record<string, string> | undefined,
    body: AsyncIterable<Uint8Array>,
    call: Invoker,
  ): void => {
    const trace = traceOf(res) as RequestTrace;
    // The answer goes on the stream itself: the compatibility response built for this stream
    // would send trailers of its own when the stream asks for them.
    res.stream.removeAllListeners("wantTrailers");
    const reply = new GrpcReply(res.stream, trace.id);
    reply.headers = limitHeaders;
    // The code of the metrics and the access line (finished): what the reply sent.
    trace.grpcStatus = () => (reply.status === undefined ? undefined : String(reply.status));
    const headers = req.headers;
    const wire = leanWire(reply, headers, path, trace);
    if (!wire) return;
    const messages = envelopedMessages(body, method, wire.compression, bodyLimit(method), () => {
      reply.complete = true;
    });
    leanCall(call, method, messages, caller, trace, path, headers, reply, wire.timeoutMs)
      .catch((err) => reply.fail(publicError(err, log, path, trace.id)))
      .catch((err) => leanBroken(res.stream, path, trace, err));
  };

  /** The end of a lean gRPC call (`this` is its stream): its admission ticket back, and the code its reply sent, or canceled. */
  function leanFinished(this: LeanStream): void {
    const reply = this.reply;
    reply?.ticket?.leave();
    const trace = traceOf(this);
    // A stream the client reset before the answer was done is canceled (or past its deadline),
    // whatever the call's failure then said (reading a reset stream fails in its own ways).
    // (Unless this server's own deadline had already answered it.)
    const code = reply?.code === "deadline_exceeded" ? reply.code : this.aborted ? trace?.goneCode() : (reply?.code ?? trace?.goneCode());
    if (trace && code) end(trace, code, 200);
  }

  /** Serves the HTTP/2 stream if it is a lean gRPC call (true), before any compatibility object is built for it. */
  const grpcStream = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders): boolean => {
    if (!invoke) return false;
    const path = headers[":path"];
    if (typeof path !== "string") return false;
    const handler = rpc.get(path);
    if (!handler || !servesLean(handler.method, headers)) return false;
    if (tracing) {
      const span = tracing.serveRequest(headers, () => serveGrpc(stream, headers, path, handler.method, invoke));
      const trace = traceOf(stream);
      if (trace) trace.span = span;
    } else serveGrpc(stream, headers, path, handler.method, invoke);
    return true;
  };

  /**
   * An admission ticket for the request, given back once the answer is written (a client may send
   * its next request at once) or the connection is gone, whichever comes first; undefined, with
   * the 503 answered, when the server is full.
   */
  const enter = (path: string, handler: UniversalHandler | undefined, req: Req, res: Res): Ticket | undefined => {
    const ticket = admission.enter();
    if (!ticket) {
      refuse(path, handler, req, res, overloaded("requests"));
      return undefined;
    }
    res.once("finish", () => ticket.leave());
    res.once("close", () => ticket.leave());
    return ticket;
  };

  /** A page (or no route at all); `admit`: take its admission ticket first (a form read beforehand). */
  const servePage = (path: string, req: Req, res: Res, admit: boolean): void => {
    if (admit && !enter(path, undefined, req, res)) return;
    if (pages(req, res)) return;
    sendError(res, Code.NotFound, `no route for ${req.method} ${path}`, "ROUTE_NOT_FOUND");
  };

  /**
   * A page's form that was not read whole: 408 past the deadline, 413 over the bound, 503 when
   * the server reads as many forms as it may; the connection (HTTP/1.1) is closed or the stream
   * reset, so the sender stops. A client that went away gets nothing, and a debug line.
   */
  const refuseForm = (req: Req, res: Res, refusal: FormRefusal | "full"): void => {
    const trace = traceOf(res);
    if (refusal === "gone") {
      log.debug("form body: the client went away before sending it", { request_id: trace?.id });
      return;
    }
    leaveUnread(req, res, true);
    if (res.headersSent || res.destroyed) return;
    if (refusal === "full") res.setHeader("retry-after", String(RETRY_AFTER_SECONDS));
    const [status, title, text] =
      refusal === "timeout"
        ? [408, "Request timeout", "The form took too long to arrive. Try again."]
        : refusal === "too_large"
          ? [413, "Form too large", `A form may have at most ${forms?.maxBytes ?? 0} bytes.`]
          : [503, "Busy", `The server is busy. Try again in ${RETRY_AFTER_SECONDS} s.`];
    formPage(res, status, title, `<main><h1>${title}</h1><p>${text}</p></main>`);
  };

  const handle = (req: Req, res: Res): void => {
    const path = (req.url ?? "/").split("?", 1)[0] ?? "/";
    // The request id, on every answer (set before anything is written) and in the request's trace.
    const trace = new RequestTrace(requestIdFrom(req.headers[REQUEST_ID_HEADER]), performance.now(), "http", "other");
    setTrace(res, trace);
    res.setHeader(REQUEST_ID_HEADER, trace.id);
    res.once("close", finished);
    if (arrivals) log.debug("request received", { request_id: trace.id, method: req.method, path, http: req.httpVersion });
    // CORS for the API (browser apps read billing state with a publishable key). API keys travel
    // in a header, never in cookies, so any origin may call; pages under /hosted/ are not shared.
    if (req.headers.origin && !path.startsWith("/hosted/")) {
      res.setHeader("access-control-allow-origin", "*");
      res.setHeader("access-control-expose-headers", "grpc-status, grpc-message, grpc-status-details-bin, retry-after, ratelimit-limit, ratelimit-remaining, ratelimit-reset, x-request-id");
      if (req.method === "OPTIONS") {
        trace.procedure = "preflight";
        res.writeHead(204, {
          "access-control-allow-methods": "GET, POST, PUT, DELETE",
          "access-control-allow-headers": "x-api-key, content-type, connect-protocol-version, connect-timeout-ms, x-grpc-web, x-user-agent, grpc-timeout, x-request-id",
          "access-control-max-age": "86400",
        });
        res.end();
        return;
      }
    }
    if (PLAIN.has(path)) {
      trace.procedure = path;
      plain(path, req, res);
      return;
    }

    const handler = rpc.get(path);
    const flavour: GrpcFlavour | undefined = grpcFlavour(req.headers["content-type"]);
    if (handler) {
      trace.protocol = flavour === undefined ? "connect" : flavour === "grpc" ? "grpc" : "grpc-web";
      trace.procedure = procedures.get(path) ?? "other";
      if (req.method === "GET") connectGetHeaders(res);
    }
    if (!handler && flavour) {
      trace.protocol = flavour === "grpc" ? "grpc" : "grpc-web";
      trace.code = "unimplemented";
      // A gRPC client calling a method this server does not have: gRPC's answer, not an HTTP 404.
      const answer = unimplemented(flavour, path);
      leaveUnread(req, res, false);
      res.writeHead(200, answer.headers);
      if (answer.trailers) res.addTrailers(answer.trailers);
      if (answer.body) res.end(answer.body);
      else res.end();
      return;
    }
    let target: RestTarget | undefined;
    if (!handler) {
      const routed = rest.route(req, res);
      if (routed === "answered") return;
      target = routed;
      if (target) {
        trace.protocol = "rest";
        trace.procedure = routeLabel(target.route);
      } else if (path.startsWith("/hosted/")) {
        trace.procedure = "hosted";
      } else if (path === "/dashboard" || path.startsWith("/dashboard/")) {
        trace.procedure = "dashboard";
      }
    }
    const exempt = EXEMPT.has(path);
    const page = !handler && !target && (path.startsWith("/hosted/") || path.startsWith("/dashboard"));
    // A form POSTed to a page (no API key) is read whole, within its own bound, deadline and
    // count (rest/form-body.ts), before the request takes an admission slot: a slow sender
    // without a key never holds one of the API's.
    if (page && forms && req.method === "POST") {
      forms.read(req, res).then((refusal) => {
        if (refusal === undefined) servePage(path, req, res, true);
        else refuseForm(req, res, refusal);
      });
      return;
    }
    let ticket: Ticket | undefined;
    if (keylessStreams && KEYLESS_STREAMS.has(path)) {
      // Server reflection needs no key: it never takes an API slot, only one of its own few, for a short while.
      const leave = keylessStreams.enter(() => {
        log.debug("reflection stream cut: open longer than REFLECTION_STREAM_TIMEOUT_MS", { request_id: traceOf(res)?.id });
        cutStream(req);
      });
      if (!leave) {
        refuse(path, handler, req, res, overloaded("reflection streams"));
        return;
      }
      res.once("finish", leave);
      res.once("close", leave);
    } else if (!exempt && (handler || target || page)) {
      ticket = enter(path, handler, req, res);
      if (!ticket) return;
    }
    if (!handler && !target) {
      servePage(path, req, res, false);
      return;
    }

    const method = (handler?.method ?? target?.method) as DescMethod;
    const key = req.headers[API_KEY_HEADER];
    admitCaller(method, typeof key === "string" ? key : undefined, path, trace)
      .then(
        ({ caller, limitHeaders, limited }) => {
          if (limitHeaders) for (const [k, v] of Object.entries(limitHeaders)) res.setHeader(k, v);
          if (limited) {
            refuse(path, handler, req, res, limited);
            return;
          }
          const streaming = isStreamingRequest(method);
          // A grpc-web-text body is base64: its bound on the wire is the bound's base64 length.
          const limit = flavour === "grpc-web-text" ? base64Length(bodyLimit(method)) : bodyLimit(method);
          const declared = declaredLength(req);
          if (!streaming && declared !== undefined && declared > limit) {
            refuse(path, handler, req, res, bodyTooLarge(limit));
            return;
          }
          const serve = () => {
            // A unary body of known length counts in full at once; any other as it is read.
            const countedUpFront = !streaming && declared !== undefined;
            if (countedUpFront && ticket && !ticket.charge(declared)) {
              refuse(path, handler, req, res, overloaded("request bytes"));
              return;
            }
            let readAny = false;
            const body = boundedBody(req, {
              limit: streaming ? undefined : limit,
              ticket,
              countBytes: !countedUpFront,
              streaming,
              refused: () => leaveUnread(req, res, readAny),
            });
            const counted: AsyncIterable<Uint8Array> = {
              [Symbol.asyncIterator]() {
                readAny = true;
                return body;
              },
            };
            if (handler && invoke && flavour === "grpc" && req.httpVersionMajor === 2 && servesLeanStream(method, req.headers)) {
              serveGrpcStream(req as Http2ServerRequest, res as Http2ServerResponse, path, method, caller, limitHeaders, counted, invoke);
            } else if (handler) runRpc(path, handler, req, res, { caller }, counted);
            else rest.serve(target as RestTarget, req, res, caller, counted);
          };
          if (!ticket || !isBulk(method)) return serve();
          // A bulk method waits for a slot (limits.ts) with its body unread, unless its body is small.
          return ticket.enterBulk(declared).then((slot) => {
            if (res.destroyed || res.writableEnded) return; // the client left while it waited
            if (slot) serve();
            else refuse(path, handler, req, res, overloaded("bulk requests"));
          });
        },
        (err: ConnectError) => refuse(path, handler, req, res, err),
      )
      .catch((err) => {
        log.error("request failed before its handler", { path, request_id: trace.id, err });
        if (!res.headersSent) sendError(res, Code.Internal, "internal error", "INTERNAL");
      });
  };
  /**
   * A request in its server span (tracing on): `handle` sets the request's trace at once, which
   * then holds the span. The plain routes (probes and scrapes, every few seconds) make no traces.
   */
  const traced = (req: Req, res: Res): void => {
    if (PLAIN.has((req.url ?? "/").split("?", 1)[0] ?? "/")) {
      handle(req, res);
      return;
    }
    const span = (tracing as Tracing).serveRequest(req.headers, () => handle(req, res));
    const trace = traceOf(res);
    if (trace) trace.span = span;
    else span.end();
  };
  return Object.assign(tracing ? traced : handle, { grpcStream });
}

/**
 * The caching policy of a Connect GET (a NO_SIDE_EFFECTS method, the message in the query string)
 * answer, success or error: never stored by any cache. Its answer is one API key's view of billing
 * state that changes with every ingest, and the server sends no validator to revalidate with; a
 * shared cache must never hand it to another key, and a browser's cache should not keep it on
 * disk. `Vary` names what the answer depends on besides the URL (whose query already holds the
 * message, `encoding`, `compression` and `connect`): the key header and the negotiated response
 * compression, for a cache that ignores `no-store`.
 */
const CONNECT_GET_CACHE_CONTROL = "private, no-store";
const CONNECT_GET_VARY = "X-API-Key, Accept-Encoding";

function connectGetHeaders(res: Res): void {
  res.setHeader("cache-control", CONNECT_GET_CACHE_CONTROL);
  res.setHeader("vary", CONNECT_GET_VARY);
}

/** What the server decided from a call's key: its caller, the key's rate-limit headers, and the refusal when over the limit. */
interface Admitted {
  caller: Authenticated["caller"] | undefined;
  limitHeaders?: Record<string, string>;
  limited?: ConnectError;
}

/** A call of a service that needs no key. */
const NO_CALLER: Admitted = Object.freeze({ caller: undefined });

/** The request handler, and optionally a handler of HTTP/2 streams it serves itself (true: served). */
export type RequestHandler = ((req: Req, res: Res) => void) & {
  grpcStream?: (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => boolean;
};

/** An HTTP/2 stream served by the lean gRPC path, with its reply. */
type LeanStream = ServerHttp2Stream & { reply?: GrpcReply };

export interface Listener {
  port: number;
  /**
   * Stops accepting and lets in-flight requests finish for up to `graceMs`; then, if any are
   * left, calls `overdue` (work in flight is told to stop and answer) and waits up to
   * SHUTDOWN_ANSWER_MS more; then closes every connection. Resolves with the number of requests
   * in flight when `graceMs` passed (overdue) and when the connections were closed (cut).
   */
  close(graceMs?: number, overdue?: () => void): Promise<{ overdue: number; cut: number }>;
  /** With TLS: serves new connections with this certificate and key (those open keep theirs). */
  setSecureContext?(pair: TlsPair): void;
}

/** A PEM certificate (chain) and its private key. */
export interface TlsPair {
  cert: Buffer;
  key: Buffer;
}

/** After the drain's deadline, how long work told to stop has to write its answer before the connections are closed. */
export const SHUTDOWN_ANSWER_MS = 1_000;

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/**
 * How often the HTTP/1.1 server looks for requests past their header or request timeout (Node
 * checks only periodically): a quarter of the shorter timeout, at most once a second, so a
 * timeout fires at most that much late.
 */
function checkingInterval(limits: ConnectionLimits): number {
  return Math.max(25, Math.min(1_000, Math.floor(Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs) / 4)));
}

/**
 * Serves `handler` on one port for HTTP/1.1 and h2c, bounded by `limits`: a connection that does
 * not finish its first bytes (the HTTP/2 preface) in time, an HTTP/1.1 request whose headers or
 * whole request arrive too slowly, and a connection that moves no bytes for the idle timeout are
 * closed and their sockets destroyed. On `host` (undefined: every interface). With `secure`, TLS
 * instead of cleartext: ALPN picks HTTP/2 (h2) or HTTP/1.1 in place of the sniffer, and the
 * handshake must finish within the preface timeout.
 */
export function listen(handler: RequestHandler, port: number, limits: ConnectionLimits, host?: string, secure?: TlsPair): Promise<Listener> {
  let inflight = 0;
  let closing = false;
  let drained: (() => void) | undefined;
  const tracked = (req: Req, res: Res) => {
    inflight++;
    res.on("close", () => {
      inflight--;
      if (closing && inflight === 0) drained?.();
    });
    if (closing && "setHeader" in res && req.httpVersionMajor === 1) res.setHeader("connection", "close");
    handler(req, res);
  };

  // HTTP/1.1: headersTimeout and requestTimeout answer 408 and close (checked every
  // connectionsCheckingInterval); keepAliveTimeout closes a connection idle between requests;
  // timeout (no 'timeout' listener: the socket is destroyed) one that moves no bytes mid-request.
  const h1 = http.createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.idleTimeoutMs,
      connectionsCheckingInterval: checkingInterval(limits),
    },
    tracked,
  );
  h1.timeout = limits.idleTimeoutMs;
  // Mid-request, no bytes for the idle timeout closes the connection only when no response is
  // under way: a long request (a test clock advanced over years of cycles) keeps its socket while
  // its handler works. A body that stops arriving is bounded by requestTimeout.
  h1.on("timeout", (socket: Socket) => {
    if (!(socket as Socket & { _httpMessage?: unknown })._httpMessage) socket.destroy();
  });
  // The header and request timeouts need the server's connection list and its checking timer,
  // which Node starts on 'listening'. h1 never listens itself (it is handed sockets), so start
  // them here; without this neither timeout fires, nor does closeIdleConnections() close anything.
  h1.emit("listening");
  // HTTP/2: a session with no stream bytes either way (HEADERS or DATA; PINGs do not count) for
  // the idle timeout is destroyed (no 'timeout' listener on the server): its client sees GOAWAY
  // and the socket is closed. A stream that keeps sending or receiving keeps its session.
  // No 'request' listener: each stream is offered to the handler's own HTTP/2 path first (lean
  // unary gRPC), and only the others get Node's compatibility objects, built here as Node's own
  // listener would (which it would do for every stream).
  const h2 = http2.createServer({});
  // An idle session is closed (GOAWAY) only when none of its streams is open: a call whose
  // handler works for longer than the idle timeout keeps its session. Counted here, with the
  // lean streams in flight, in one close listener per stream.
  const openStreams = new WeakMap<Http2Session, number>();
  h2.on("stream", (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, _flags: number, rawHeaders: string[]) => {
    const session = stream.session;
    if (session) openStreams.set(session, (openStreams.get(session) ?? 0) + 1);
    if (handler.grpcStream?.(stream, headers)) {
      inflight++;
      stream.on("close", () => {
        if (session) openStreams.set(session, (openStreams.get(session) ?? 1) - 1);
        inflight--;
        if (closing && inflight === 0) drained?.();
      });
      return;
    }
    if (session) stream.on("close", () => openStreams.set(session, (openStreams.get(session) ?? 1) - 1));
    const req = new http2.Http2ServerRequest(stream, headers, {}, rawHeaders);
    const res = new http2.Http2ServerResponse(stream);
    if (headers[":method"] === "CONNECT") {
      res.statusCode = 405;
      res.end();
      return;
    }
    const expect = headers.expect;
    if (expect !== undefined) {
      if (expect.toLowerCase() !== "100-continue") {
        res.statusCode = 417;
        res.end();
        return;
      }
      res.writeContinue();
    }
    tracked(req, res);
  });
  h2.setTimeout(limits.idleTimeoutMs);
  const sessions = new Set<Http2Session>();
  h2.on("session", (s) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  h2.on("timeout", (session: Http2Session) => {
    if ((openStreams.get(session) ?? 0) === 0) session.destroy();
  });
  const sockets = new Set<Socket>();

  // noDelay on every accepted socket, before the protocol is known: the HTTP/2 session is handed
  // the socket itself (below) but does not set TCP_NODELAY on a socket it did not accept, and
  // without it every gRPC call would wait ~40 ms for a delayed ACK.
  // TLS: each accepted socket goes to a TLS server (no listener of its own) instead of the sniffer.
  // Its ALPN picks the protocol, h2 (gRPC, HTTP/2 clients) or http/1.1 (REST, browsers, a client
  // that offers none), and the secured socket goes to the same HTTP/2 or HTTP/1.1 server as a
  // cleartext one: every path, limit and timeout is the same. handshakeTimeout is one deadline from
  // accept (Node's, not an inactivity timer), as the preface's is; a failed handshake is destroyed.
  const secured = secure ? tls.createServer({ cert: secure.cert, key: secure.key, ALPNProtocols: ["h2", "http/1.1"], handshakeTimeout: limits.prefaceTimeoutMs }) : undefined;
  secured?.on("secureConnection", (socket: TLSSocket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    if (socket.alpnProtocol === "h2") h2.emit("connection", socket);
    else h1.emit("connection", socket);
  });
  secured?.on("tlsClientError", (_err: Error, socket: TLSSocket) => socket.destroy());

  const tcp = net.createServer({ noDelay: true }, (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    if (secured) {
      secured.emit("connection", socket);
      return;
    }
    // One deadline from accept, not an inactivity timer: a byte every few seconds does not
    // extend it. Until the protocol is known nothing else bounds the connection.
    const sniffing = setTimeout(() => socket.destroy(), limits.prefaceTimeoutMs);
    socket.on("close", () => clearTimeout(sniffing));
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const n = Math.min(head.length, PREFACE.length);
      const isH2 = head.subarray(0, n).equals(PREFACE.subarray(0, n));
      if (isH2 && head.length < PREFACE.length) return; // wait for the whole preface
      clearTimeout(sniffing);
      socket.off("data", onData);
      // The bytes already read go back to the socket; both servers are handed the socket itself.
      // The HTTP/2 session reads through the native handle and consumes what was put back on
      // its own (Node >= 16.14, nodejs/node#41185); resume() after the HTTP/2 handoff would
      // hand the socket's next bytes to the JS stream instead and break the framing. The HTTP/1.1
      // parser reads through the stream, which must flow again.
      socket.pause();
      socket.unshift(head);
      if (isH2) {
        h2.emit("connection", socket);
      } else {
        h1.emit("connection", socket);
        socket.resume();
      }
    };
    socket.on("data", onData);
  });
  if (limits.maxConnections > 0) tcp.maxConnections = limits.maxConnections;

  return new Promise((resolve, reject) => {
    tcp.once("error", reject);
    tcp.listen(port, host, () => {
      const address = tcp.address();
      resolve({
        port: typeof address === "object" && address ? address.port : port,
        ...(secured ? { setSecureContext: (pair: TlsPair) => secured.setSecureContext({ cert: pair.cert, key: pair.key }) } : {}),
        async close(graceMs = 10_000, overdue?: () => void) {
          closing = true;
          const stopped = new Promise<void>((r) => tcp.close(() => r()));
          for (const s of sessions) s.close();
          h1.close(); // closes idle keep-alive connections and stops the checking timer
          const drain = (ms: number) => Promise.race([new Promise<void>((r) => (drained = r)), new Promise((r) => setTimeout(r, ms).unref())]);
          if (inflight > 0) await drain(graceMs);
          const late = inflight;
          if (late > 0 && overdue) {
            overdue();
            await drain(SHUTDOWN_ANSWER_MS);
          }
          const cut = inflight;
          for (const socket of sockets) socket.destroy();
          await stopped;
          return { overdue: late, cut };
        },
      });
    });
  });
}
