/**
 * The admit chain: what every API request (Connect, gRPC, gRPC-Web, REST) passes before its
 * handler reads its body, in this order:
 *
 * 0. connection caps, at the listener (listener.ts);
 * 1. a slot (`slot`): one of the server's requests in flight (limits.ts Admission; full: 503 /
 *    unavailable at once), or for a key-less reflection stream one of its own few, cut after a
 *    short while; liveness, readiness, metrics and the no-op take none;
 * 2. the key, from the headers (401 / unauthenticated, 403 / permission_denied);
 * 3. the key's rate limit (429 / resource_exhausted with Retry-After; its headers on every answer),
 *    shared across servers through Redis when RATE_LIMIT_REDIS_URL is set (bounded: ratelimit-redis.ts);
 * 4. body bounds: the declared length against the method's bound (413 / resource_exhausted), a
 *    bulk slot for a bulk method, the server's bytes in flight (503);
 *
 * then the handler, reading the body through `boundedBody` (body.ts); idempotency (DESIGN §12) is
 * the interceptor rpc/idempotency.ts in the server's one list, on every path.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Caller } from "../billing/tenancy.js";
import { sendError } from "../rest/errors.js";
import { type Admission, type KeylessStreams, type Ticket, bodyLimit, bodyTooLarge, isBulk, overloaded } from "../limits.js";
import type { Logger } from "../log.js";
import { type RequestTrace, traceOf } from "../ops/trace.js";
import type { RateLimits } from "../config.js";
import { type KeyLimiter, effectiveLimits, rateClass, rateLimitHeaders, rateLimited } from "../ratelimit.js";
import { API_KEY_HEADER, type Authenticated } from "../rpc/auth.js";
import { publicError } from "../rpc/errors.js";
import { isStreamingRequest } from "../rpc/requests.js";
import { boundedBody, declaredLength, leaveUnread } from "./body.js";
import type { Req, Res } from "./listener.js";

/** Liveness, readiness, metrics, the transport's no-op and their RPC: never refused by admission control. */
const EXEMPT = new Set(["/healthz", "/readyz", "/metrics", "/ping", "/billing.v1.HealthService/Ping", "/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch"]);

/** Key-less streams counted apart from admission (KeylessStreams): gRPC server reflection. */
const KEYLESS_STREAMS = new Set(["/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"]);

/** How an admitted request is answered, and how a refusal is, on the request's protocol. */
export interface Responder {
  /** Answers `err` without reading (more of) the body; `readAny`: some of it was read. */
  refuse(err: ConnectError, readAny?: boolean): void;
  /** Headers for every answer from here on (the key's rate limit). */
  headers(h: Record<string, string>): void;
  /** The admitted call: its body is read through `body`, within the bounds. */
  serve(caller: Caller | undefined, body: AsyncIterable<Uint8Array>): void;
}

export interface AdmitParts {
  /** The server's bounds on requests and body bytes in flight. */
  admission: Admission;
  /** Key-less gRPC reflection streams: their own count and lifetime (limits.ts KeylessStreams). */
  keylessStreams?: KeylessStreams | undefined;
  /** The caller of `method` with this `x-api-key` value and its key (undefined: a service that needs none); throws for a key refused. */
  authenticate: (method: DescMethod, key: string | undefined) => Authenticated | undefined | Promise<Authenticated | undefined>;
  /** Per-key token buckets (this server's, or shared through Redis), and the server's default limits (an environment may override them). */
  rateLimiter?: KeyLimiter | undefined;
  rateLimits?: RateLimits | undefined;
  log: Logger;
}

/** An API request on its way in. */
export interface Admittee {
  path: string;
  method: DescMethod;
  req: Req;
  res: Res;
  trace: RequestTrace;
  responder: Responder;
  /** A grpc-web-text body is base64: its bound on the wire is the bound's base64 length. */
  wireLimit?: ((limit: number) => number) | undefined;
}

export function createAdmitChain(parts: AdmitParts) {
  const { admission, keylessStreams, authenticate, rateLimiter, rateLimits, log } = parts;

  /**
   * Step 1: the request's slot, given back once the answer is written (a client may send its next
   * request at once) or the connection is gone. Undefined: an exempt path, or a reflection stream
   * (its own slot, the stream cut when open too long); false, with the refusal answered: full.
   */
  const slot = (path: string, res: Res, req: Req, refuse: (err: ConnectError) => void): Ticket | undefined | false => {
    const keyless = keylessStreams !== undefined && KEYLESS_STREAMS.has(path);
    if (!keyless && EXEMPT.has(path)) return undefined;
    const ticket = keyless ? undefined : admission.enter();
    const leave = keyless
      ? keylessStreams.enter(() => {
          log.debug("reflection stream cut: open longer than REFLECTION_STREAM_TIMEOUT_MS", { request_id: traceOf(res)?.id });
          // An HTTP/2 stream is reset (the client sees CANCELLED), an HTTP/1.1 connection closed.
          if ("stream" in req) req.stream.close(http2.constants.NGHTTP2_CANCEL);
          else req.socket.destroy();
        })
      : ticket && (() => ticket.leave());
    if (!leave) {
      refuse(overloaded(keyless ? "reflection streams" : "requests"));
      return false;
    }
    res.once("finish", leave);
    res.once("close", leave);
    return ticket;
  };

  /** Steps 2 and 3: the caller from its key (before any of the body is read), then the key's rate limit; throws the refusal. */
  const caller = async (a: Admittee): Promise<Caller | undefined> => {
    const key = a.req.headers[API_KEY_HEADER];
    let authed: Authenticated | undefined;
    try {
      authed = await authenticate(a.method, typeof key === "string" ? key : undefined);
    } catch (err) {
      // A database that cannot be reached while the key is looked up: unavailable, as in a call.
      throw err instanceof ConnectError ? err : publicError(err, log, a.path, a.trace.id);
    }
    if (!authed) return undefined;
    a.trace.environmentId = authed.caller.environmentId;
    if (!rateLimiter || !rateLimits) return authed.caller;
    const cls = rateClass(a.method);
    const env = authed.found.environment;
    const verdict = await rateLimiter.take(authed.found.key.id, cls, effectiveLimits(rateLimits, { ingestRps: env.ingestRps ?? null, apiRps: env.apiRps ?? null })[cls]);
    if (verdict) {
      a.responder.headers(rateLimitHeaders(verdict));
      if (!verdict.allowed) throw rateLimited(cls, verdict);
    }
    return authed.caller;
  };

  /** Step 4 and the handler: the body's bounds, then the call served with its body read within them. */
  const serve = async (a: Admittee, ticket: Ticket | undefined, who: Caller | undefined): Promise<void> => {
    const { method, req, res, responder } = a;
    const streaming = isStreamingRequest(method);
    const limit = a.wireLimit ? a.wireLimit(bodyLimit(method)) : bodyLimit(method);
    const declared = declaredLength(req.headers);
    if (!streaming && declared !== undefined && declared > limit) return responder.refuse(bodyTooLarge(limit));
    // A bulk method waits for a slot (limits.ts) with its body unread, unless its body is small.
    if (ticket && isBulk(method)) {
      const bulk = await ticket.enterBulk(declared);
      if (res.destroyed || res.writableEnded) return; // the client left while it waited
      if (!bulk) return responder.refuse(overloaded("bulk requests"));
    }
    // A unary body of known length counts in full at once; any other as it is read.
    const countedUpFront = !streaming && declared !== undefined;
    if (countedUpFront && ticket && !ticket.charge(declared)) return responder.refuse(overloaded("request bytes"));
    let readAny = false;
    const body = boundedBody(req, { limit: streaming ? undefined : limit, ticket, countBytes: !countedUpFront, streaming, refused: () => leaveUnread(req, res, readAny) });
    responder.serve(who, {
      [Symbol.asyncIterator]() {
        readAny = true;
        return body;
      },
    });
  };

  /** The whole chain for an API request (steps 1 to 4, then its handler). */
  const admit = (a: Admittee): void => {
    const ticket = slot(a.path, a.res, a.req, (err) => a.responder.refuse(err));
    if (ticket === false) return;
    caller(a)
      .then(
        (who) => serve(a, ticket, who),
        (err: ConnectError) => a.responder.refuse(err),
      )
      .catch((err) => {
        log.error("request failed before its handler", { path: a.path, request_id: a.trace.id, err });
        if (!a.res.headersSent) sendError(a.res, Code.Internal, "internal error", "INTERNAL");
      });
  };

  return { slot, admit };
}
