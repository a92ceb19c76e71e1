/**
 * The request handler both listeners run (listener.ts): every request is traced (its request id
 * on every answer), then dispatched in this order:
 *
 * 1. CORS preflight for the API;
 * 2. the plain routes (plain.ts: health, readiness, metrics: no key, no admission);
 * 3. an RPC path: a gRPC call of a method the server lacks is answered unimplemented; the others
 *    go through the admit chain (admit.ts) to the lean path (lean/: unary binary gRPC, when an
 *    invoker is given) or to connect-node (connect.ts: gRPC, gRPC-Web, Connect);
 * 4. a REST route (rest/gateway.ts), through the same admit chain, into the same handlers;
 * 5. the pages (a form POSTed to one is read first, within its own bounds: pages.ts).
 */
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { performance } from "node:perf_hooks";
import type { DescMethod } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import type { Readiness } from "../ops/health.js";
import type { Metrics } from "../ops/metrics.js";
import { REQUEST_ID_HEADER, RequestTrace, requestIdFrom, setTrace, traceOf } from "../ops/trace.js";
import type { Tracing } from "../ops/tracing.js";
import type { FormBodies } from "../pages/form-body.js";
import type { RestGateway, RestTarget } from "../rest/gateway.js";
import { base64Length, grpcFlavour, unimplemented } from "../rpc/grpc-wire.js";
import type { Invoker } from "../rpc/invoke.js";
import { type AdmitParts, type Responder, createAdmitChain } from "./admit.js";
import { leaveUnread } from "./body.js";
import { connectResponder } from "./connect.js";
import { leanResponder, servesLean } from "./lean/serve.js";
import type { Req, Res } from "./listener.js";
import { createObserver } from "./observe.js";
import { createPageServer, refuseHttp } from "./pages.js";
import { PLAIN, createPlainRoutes } from "./plain.js";

/** What the handler serves with; the admit chain's parts (admit.ts) among them. */
export interface HandlerParts extends AdmitParts {
  router: ConnectRouter;
  rest: RestGateway;
  pages: (req: Req, res: Res) => boolean;
  /** GET /readyz and the gRPC health service: database, migrations, scheduler (ops/health.ts). */
  readiness: Readiness;
  /** The app's metrics (GET /metrics), and the bearer token a scrape must send (undefined: none). */
  metrics: Metrics;
  metricsToken?: string | undefined;
  /** Forms POSTed to pages (no key): read whole, within their own bounds, before admission (pages/form-body.ts). */
  forms?: FormBodies;
  /** The unary methods through the router's interceptors (rpc/invoke.ts): with it, binary gRPC to them is served by the lean path (lean/). */
  invoke?: Invoker | undefined;
  /** Tracing (ops/tracing.ts), when OTEL_EXPORTER_OTLP_ENDPOINT is set: each request runs in its server span. */
  tracing?: Tracing | undefined;
}

/** CORS for the API (browser apps read billing state with a publishable key): answers a preflight (true). */
function cors(req: Req, res: Res, path: string, trace: RequestTrace): boolean {
  // API keys travel in a header, never in cookies, so any origin may call; pages under /hosted/ are not shared.
  if (!req.headers.origin || path.startsWith("/hosted/")) return false;
  res.setHeader("access-control-allow-origin", "*");
  res.setHeader("access-control-expose-headers", "grpc-status, grpc-message, grpc-status-details-bin, retry-after, ratelimit-limit, ratelimit-remaining, ratelimit-reset, x-request-id");
  if (req.method !== "OPTIONS") return false;
  trace.procedure = "preflight";
  res.writeHead(204, {
    "access-control-allow-methods": "GET, POST, PUT, DELETE",
    "access-control-allow-headers": "x-api-key, content-type, connect-protocol-version, connect-timeout-ms, x-grpc-web, x-user-agent, grpc-timeout, x-request-id",
    "access-control-max-age": "86400",
  });
  res.end();
  return true;
}

/** The responder of a REST call (rest/gateway.ts). */
function restResponder(rest: RestGateway, target: RestTarget, req: Req, res: Res, trace: RequestTrace): Responder {
  return {
    refuse: (refusal, readAny) => refuseHttp(req, res, trace, refusal, readAny),
    headers(h) {
      for (const [k, v] of Object.entries(h)) res.setHeader(k, v);
    },
    serve(caller, body) {
      rest.serve(target, req, res, caller, body);
    },
  };
}

export function createRequestHandler(parts: HandlerParts): (req: Req, res: Res) => void {
  const { router, rest, log, invoke } = parts;
  const rpc = new Map(router.handlers.map((h) => [h.requestPath, h]));
  const observe = createObserver(parts.metrics, log, parts.tracing);
  const plain = createPlainRoutes(parts.readiness, parts.metrics, parts.metricsToken, log);
  const { slot, admit } = createAdmitChain(parts);
  const pages = createPageServer(parts.pages, parts.forms, slot, log);

  /** An RPC path: the lean path or connect-node, after the admit chain; a gRPC call of a method the server lacks, unimplemented. */
  const serveRpc = (path: string, handler: UniversalHandler & { method: DescMethod }, req: Req, res: Res, trace: RequestTrace): void => {
    const flavour = grpcFlavour(req.headers["content-type"]);
    trace.protocol = flavour === undefined ? "connect" : flavour === "grpc" ? "grpc" : "grpc-web";
    // Metrics' procedure labels (bounded): a method's full name; a REST route's method and template.
    trace.procedure = path.slice(1);
    if (req.method === "GET") {
      // A Connect GET (NO_SIDE_EFFECTS) answers one key's view of billing state, with no validator: never
      // stored; Vary for a cache that ignores no-store.
      res.setHeader("cache-control", "private, no-store");
      res.setHeader("vary", "X-API-Key, Accept-Encoding");
    }
    const method = handler.method;
    const lean = invoke !== undefined && flavour === "grpc" && req.httpVersionMajor === 2 && servesLean(method, req.headers);
    const responder = lean
      ? leanResponder({ invoke, log, path, method, req: req as Http2ServerRequest, res: res as Http2ServerResponse, trace })
      : connectResponder(log, path, handler, req, res, flavour);
    admit({ path, method, req, res, trace, responder, wireLimit: flavour === "grpc-web-text" ? base64Length : undefined });
  };

  /** A path with no RPC method: a gRPC call is answered unimplemented (not an HTTP 404); else REST, then pages. */
  const serveOther = (path: string, req: Req, res: Res, trace: RequestTrace): void => {
    const flavour = grpcFlavour(req.headers["content-type"]);
    if (flavour) {
      trace.protocol = flavour === "grpc" ? "grpc" : "grpc-web";
      trace.code = "unimplemented";
      const answer = unimplemented(flavour, path);
      leaveUnread(req, res, false);
      res.writeHead(200, answer.headers);
      if (answer.trailers) res.addTrailers(answer.trailers);
      if (answer.body) res.end(answer.body);
      else res.end();
      return;
    }
    const target = rest.route(req, res);
    if (target === "answered") return;
    if (target) {
      trace.protocol = "rest";
      trace.procedure = `${target.route.httpMethod} ${target.route.template}`;
      admit({ path, method: target.route.method, req, res, trace, responder: restResponder(rest, target, req, res, trace) });
      return;
    }
    pages(path, req, res, trace);
  };

  const handle = (req: Req, res: Res, path: string): void => {
    // The request id, on every answer (set before anything is written) and in the request's trace.
    const trace = new RequestTrace(requestIdFrom(req.headers[REQUEST_ID_HEADER]), performance.now(), "http", "other");
    setTrace(res, trace);
    res.setHeader(REQUEST_ID_HEADER, trace.id);
    observe(req, res, trace, path);
    if (cors(req, res, path, trace)) return;
    if (PLAIN.has(path)) {
      trace.procedure = path;
      plain(path, req, res);
      return;
    }
    const handler = rpc.get(path);
    if (handler) serveRpc(path, handler, req, res, trace);
    else serveOther(path, req, res, trace);
  };
  // Tracing on, each request runs in its server span, which its trace holds; the plain routes (probes and scrapes, every few seconds) make none.
  return (req, res) => {
    const path = (req.url ?? "/").split("?", 1)[0] ?? "/";
    if (!parts.tracing || PLAIN.has(path)) return handle(req, res, path);
    const span = parts.tracing.serveRequest(req.headers, () => handle(req, res, path));
    const trace = traceOf(res);
    if (trace) trace.span = span;
    else span.end();
  };
}
