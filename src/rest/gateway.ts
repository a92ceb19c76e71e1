/**
 * The REST bridge: the documented JSON paths, built from the contract's google.api.http
 * annotations, each calling the same method implementation through the one invoker (rpc/invoke.ts:
 * the server's interceptors, then the implementation) with the same error mapping (rpc/errors.ts
 * publicError) and logging as Connect and gRPC calls. The request pipeline (src/edge/handler.ts) finds the route first
 * (`route`), authenticates the key and admits the request from its headers, and only then has the
 * body read (`serve`), through a stream that stops at the method's bound. The request message is
 * read by the one JSON reader (rpc/json.ts) from the body, the query string and the path; the
 * output is written by the one JSON writer (rpc/json-out.ts) with the router's JSON options. A
 * call's signal is never aborted: it runs to its end (an ingest commits) even if its client left.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse, IncomingHttpHeaders } from "node:http2";
import { type DescMethod, type DescService, type JsonObject, type JsonReadOptions, type JsonValue, type JsonWriteOptions, type Message, fromJson, getOption, toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues } from "@connectrpc/connect";
import { type FieldViolation, InvalidArgumentError } from "../billing/errors.js";
import type { Caller } from "../billing/tenancy.js";
import { nextTurn } from "../billing/yielding.js";
import { http } from "../gen/google/api/annotations_pb.js";
import type { Logger } from "../log.js";
import { type RequestTrace, traceOf } from "../ops/trace.js";
import { isRateLimited } from "../ratelimit.js";
import { preAuthKey } from "../rpc/auth.js";
import { DeferredProblems, deferredKey, traceKey } from "../rpc/context.js";
import { fastRequestReaders } from "../rpc/convert/usage.js";
import { publicError, toConnectError } from "../rpc/errors.js";
import { REPLAYED_HEADER } from "../rpc/idempotency.js";
import { headersOf } from "../rpc/requests.js";
import type { Invoker } from "../rpc/invoke.js";
import { checkJson, findField, fromText, invalidFields } from "../rpc/json.js";
import { parseJsonBody } from "../rpc/json-parse.js";
import { restJson, stringifyRest } from "../rpc/json-out.js";
import { sendConnectError, sendError } from "./errors.js";

/** A body at least this large lets the event loop turn between being parsed, checked and served. */
const LARGE_BODY_BYTES = 256 * 1024;

type Req = IncomingMessage | Http2ServerRequest;
type Res = ServerResponse | Http2ServerResponse;

export interface RestRoute {
  httpMethod: string;
  template: string;
  method: DescMethod;
  /** `*` (whole body), a field name, or "" (no body). */
  body: string;
  responseBody: string;
  regex: RegExp;
  params: string[];
  literalSegments: number;
  /** A REST-only route (RawRoute): answered by its own function rather than an RPC. */
  raw?: RawRoute["serve"];
}

/**
 * A REST-only GET route with no RPC of its own (a PDF): admitted as `method` is (its key, its
 * rate class), then answered by `serve` with the path's parameters (decoded) and the URL; what it
 * throws is answered as an RPC's error is.
 */
export interface RawRoute {
  template: string;
  method: DescMethod;
  serve(caller: Caller | undefined, params: string[], url: URL, res: Res): Promise<void>;
}

/** A path template's pattern: `{name}` segments match one segment each. */
function templatePattern(template: string): { regex: RegExp; params: string[]; literalSegments: number } {
  const params: string[] = [];
  const segments = template.split("/").filter(Boolean);
  const regex = new RegExp(
    `^/${segments
      .map((seg) => {
        const m = /^\{([a-z_][a-z0-9_.]*)\}$/.exec(seg);
        if (m) {
          params.push(m[1] as string);
          return "([^/]+)";
        }
        return seg.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      })
      .join("/")}/?$`,
  );
  return { regex, params, literalSegments: segments.length - params.length };
}

/** Reads every unary RPC's google.api.http rule into a route table, most specific paths first. */
export function buildRoutes(services: DescService[]): RestRoute[] {
  const out: RestRoute[] = [];
  for (const service of services) {
    for (const method of service.methods) {
      if (method.methodKind !== "unary") continue;
      const rule = getOption(method, http);
      const p = rule.pattern;
      if (p.case === undefined || p.case === "custom") continue;
      const template = p.value;
      out.push({ httpMethod: p.case.toUpperCase(), template, method, body: rule.body, responseBody: rule.responseBody, ...templatePattern(template) });
    }
  }
  return out.sort((a, b) => b.literalSegments - a.literalSegments || a.params.length - b.params.length);
}

/** "/subjects/{id}" → "subjects"; "/" → "". */
function firstSegment(path: string): string {
  const end = path.indexOf("/", 1);
  return path.slice(1, end === -1 ? undefined : end);
}

/**
 * The whole body, from a stream that refuses to go past the method's bound or the server's
 * (src/edge/body.ts); their ConnectErrors are thrown.
 */
async function readBody(body: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const c of body) chunks.push(c);
  return Buffer.concat(chunks);
}

/** A refusal while reading the body: 413 for one over its bound, else the error as it is, with its metadata (Retry-After) as headers. */
export function sendRefusal(res: Res, err: ConnectError): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  err.metadata.forEach((value, key) => {
    res.setHeader(key, value);
  });
  if (err.code === Code.ResourceExhausted && !isRateLimited(err)) {
    sendError(res, Code.ResourceExhausted, err.rawMessage, "PAYLOAD_TOO_LARGE", { status: 413 });
    return;
  }
  sendConnectError(res, err);
}

/**
 * The query string's parameters, decoded strictly: a value whose percent-encoding is not UTF-8 is
 * null (URLSearchParams would put U+FFFD in its place). A name that is not UTF-8 names no field
 * and is left out, as unknown parameters are.
 */
function queryParams(search: string): [string, string | null][] {
  const out: [string, string | null][] = [];
  for (const part of search.replace(/^\?/, "").split("&")) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    const [k, v] = eq === -1 ? [part, ""] : [part.slice(0, eq), part.slice(eq + 1)];
    let key: string;
    try {
      key = decodeURIComponent(k.replace(/\+/g, " "));
    } catch {
      continue;
    }
    try {
      out.push([key, decodeURIComponent(v.replace(/\+/g, " "))]);
    } catch {
      out.push([key, null]);
    }
  }
  return out;
}

/** The request message as the body, query string and path give it: read whole (`message`) or as proto JSON. */
interface RestRequest {
  json: Record<string, JsonValue>;
  /** The message itself, when the body was read straight into it (rpc/convert fastRequestReaders): `json` is then unused. */
  message?: Message | undefined;
  /** Per-item instants the JSON reader left out (rpc/json.ts), for the method to reject their items. */
  deferred: FieldViolation[];
  /** What is wrong with the body's fields; the query's and path's are added to them. */
  violations: FieldViolation[];
}

/**
 * The body's part of the request message, read by the one JSON reader (as for JSON over Connect
 * and gRPC: the same errors); undefined once a refusal is sent (or the client went away). Its
 * field violations are returned, to be answered with the query's and the path's.
 */
async function bodyRequest(route: RestRoute, body: AsyncIterable<Uint8Array>, res: Res, encoding: string | undefined): Promise<RestRequest | undefined> {
  let raw: Buffer;
  try {
    raw = await readBody(body);
  } catch (err) {
    // Not a ConnectError: the client went away mid-body (the request is aborted), nobody to answer.
    if (err instanceof ConnectError) sendRefusal(res, err);
    else res.destroy();
    return undefined;
  }
  // A body is read as sent: compressed JSON would otherwise be refused as bytes that are not UTF-8.
  if (encoding !== undefined && encoding.trim().toLowerCase() !== "identity") {
    const message = `REST request bodies are read as sent: Content-Encoding ${encoding} is not accepted (send the JSON uncompressed; Connect and gRPC take gzip and br)`;
    sendError(res, Code.InvalidArgument, message, "UNSUPPORTED_CONTENT_ENCODING", { status: 415 });
    return undefined;
  }
  // A large body is parsed in a turn of its own, and checked in another (a 1 MB batch takes about
  // 15 ms to parse and 8 ms to check), then lets other requests in: no request holds the server's
  // one thread for long.
  const large = raw.length >= LARGE_BODY_BYTES;
  try {
    if (large) await nextTurn();
    const parsed = parseJsonBody(raw);
    if (large) await nextTurn();
    // A body that is the whole message (no path or query fields) may be read straight into it;
    // any other goes the general way, which names what is wrong.
    const fast = route.body === "*" && route.params.length === 0 ? fastRequestReaders.get(route.method.input.typeName) : undefined;
    const message = fast?.(parsed);
    const checked = message ? { json: {}, violations: [], deferred: [] } : checkJson(route.method.input, parsed);
    if (large) await nextTurn();
    return { ...checked, message };
  } catch (err) {
    if (!(err instanceof InvalidArgumentError)) throw err;
    sendConnectError(res, toConnectError(err));
    return undefined;
  }
}

/** Adds the query string's fields (unless the body is the whole message) and the path's to `json`; their violations are pushed. */
function addQueryAndPath(route: RestRoute, match: RegExpExecArray, url: URL, json: Record<string, JsonValue>, violations: FieldViolation[]): void {
  const input = route.method.input;
  for (const [key, raw] of queryParams(url.search)) {
    const field = findField(input, key);
    if (!field || route.params.includes(field.name) || route.body === "*") continue;
    if (raw === null) {
      violations.push({ field: field.name, description: "is not valid percent-encoded UTF-8" });
      continue;
    }
    const value = fromText(field, raw, field.name, violations);
    if (value === undefined) continue;
    if (field.fieldKind === "list") json[field.name] = [...((json[field.name] as JsonValue[] | undefined) ?? []), value];
    else json[field.name] = value;
  }
  route.params.forEach((name, i) => {
    const field = findField(input, name);
    let raw: string;
    try {
      raw = decodeURIComponent(match[i + 1] ?? "");
    } catch {
      violations.push({ field: name, description: "is not a valid percent-encoded path segment" });
      return;
    }
    const value = field && fromText(field, raw, name, violations);
    if (field && value !== undefined) json[field.name] = value;
  });
}

interface Deps {
  invoke: Invoker;
  log: Logger;
  /** The router's, so that a REST call reads and writes JSON as a Connect call does. */
  jsonOptions: Partial<JsonReadOptions & JsonWriteOptions>;
}

/** What the implementation may read of the request besides its message. */
interface Call {
  requestMethod: string;
  url: string;
  trace: RequestTrace | undefined;
  header: () => Headers;
}

/**
 * Calls the method through the invoker for `caller` (authenticated by the server from the
 * headers before the body was read); the output as REST writes it, or the error the client is told.
 */
async function invokeRest(deps: Deps, route: RestRoute, request: RestRequest, caller: Caller | undefined, call: Call) {
  const { invoke, log, jsonOptions } = deps;
  const method = route.method;
  try {
    let message: Message;
    try {
      message = request.message ?? fromJson(method.input, request.json, jsonOptions);
    } catch (err) {
      throw ConnectError.from(err, Code.InvalidArgument);
    }
    const contextValues = createContextValues().set(preAuthKey, { caller }).set(traceKey, call.trace);
    if (request.deferred.length > 0) {
      const problems = new DeferredProblems();
      problems.add(0, request.deferred);
      contextValues.set(deferredKey, problems);
    }
    const out = await invoke({ method, message, contextValues, protocolName: "rest", requestMethod: call.requestMethod, url: call.url, header: call.header });
    return { ok: true as const, header: out.header, ...restJson(method.output, toJson(method.output, out.message, jsonOptions) as JsonObject) };
  } catch (err) {
    return { ok: false as const, error: publicError(err, log, `/${method.parent.typeName}/${method.name}`, call.trace?.id) };
  }
}

/** `jsonOptions`: the router's, so that a REST call reads and writes JSON as a Connect call does. */
export function createRestGateway(services: DescService[], invoke: Invoker, log: Logger, jsonOptions: Deps["jsonOptions"], rawRoutes: RawRoute[] = []) {
  const deps: Deps = { invoke, log, jsonOptions };
  const raw = rawRoutes.map((r): RestRoute => ({ httpMethod: "GET", template: r.template, method: r.method, body: "", responseBody: "", ...templatePattern(r.template), raw: r.serve }));
  const routes = [...raw, ...buildRoutes(services)];
  // Routes by their first path segment (all start with a literal one), so that a request tries a
  // handful of patterns rather than all of them; each list keeps the most-specific-first order.
  const byFirstSegment = new Map<string, RestRoute[]>();
  for (const route of routes) {
    const first = firstSegment(route.template);
    byFirstSegment.set(first, [...(byFirstSegment.get(first) ?? []), route]);
  }

  /** A REST-only route: its answer, or its error as an RPC's is answered. */
  async function serveRaw(route: RestRoute, serve: RawRoute["serve"], match: RegExpExecArray, url: URL, res: Res, caller: Caller | undefined): Promise<void> {
    try {
      const params = route.params.map((name, i) => {
        try {
          return decodeURIComponent(match[i + 1] ?? "");
        } catch {
          throw invalidFields([{ field: name, description: "is not a valid percent-encoded path segment" }]);
        }
      });
      await serve(caller, params, url, res);
    } catch (err) {
      sendConnectError(res, publicError(err, log, `${route.httpMethod} ${route.template}`, traceOf(res)?.id));
    }
  }

  async function serve(target: RestTarget, res: Res, caller: Caller | undefined, body: AsyncIterable<Uint8Array>, requestMethod: string): Promise<void> {
    const { route, match, url } = target;
    if (route.raw) return serveRaw(route, route.raw, match, url, res, caller);
    const request = route.body === "" ? { json: {}, deferred: [], violations: [] } : await bodyRequest(route, body, res, target.encoding);
    if (request === undefined) return;
    addQueryAndPath(route, match, url, request.json, request.violations);
    if (request.violations.length > 0) {
      sendConnectError(res, toConnectError(invalidFields(request.violations)));
      return;
    }
    const header = () => headersOf((res as { req?: { headers: IncomingHttpHeaders } }).req?.headers ?? {});
    const result = await invokeRest(deps, route, request, caller, { requestMethod, url: url.pathname, trace: traceOf(res), header });
    if (!result.ok) {
      sendConnectError(res, result.error);
      return;
    }
    const out = stringifyRest(route.responseBody === "" ? result.json : (result.json[route.responseBody] ?? null), result.rawNumbers);
    const replayed = result.header?.get(REPLAYED_HEADER);
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(out), ...(replayed ? { [REPLAYED_HEADER]: replayed } : {}) });
    res.end(out);
  }

  return {
    /**
     * The REST route of a request, read from its method and path only; undefined when its path is
     * no REST route, "answered" when the path is one but not for this HTTP method (405 sent).
     */
    route(req: Req, res: Res): RestTarget | "answered" | undefined {
      const url = new URL(req.url ?? "/", "http://localhost");
      const allowed = new Set<string>();
      for (const route of byFirstSegment.get(firstSegment(url.pathname)) ?? []) {
        const match = route.regex.exec(url.pathname);
        if (!match) continue;
        if (route.httpMethod !== req.method) {
          allowed.add(route.httpMethod);
          continue;
        }
        const encoding = req.headers["content-encoding"];
        return { route, match, url, method: route.method, encoding: typeof encoding === "string" ? encoding : undefined };
      }
      if (allowed.size === 0) return undefined;
      res.setHeader("allow", [...allowed].join(", "));
      sendError(res, Code.Unimplemented, `${req.method} is not allowed on ${url.pathname}; use ${[...allowed].join(" or ")}`, "METHOD_NOT_ALLOWED", { status: 405 });
      return "answered";
    },

    /** Serves a routed request for `caller` (authenticated by the server), reading the body from `body`. */
    serve(target: RestTarget, req: Req, res: Res, caller: Caller | undefined, body: AsyncIterable<Uint8Array>): void {
      serve(target, res, caller, body, req.method ?? "GET").catch((err) => {
        if (!res.headersSent) sendError(res, Code.Internal, "internal error", "INTERNAL");
        else res.end();
        log.error("rest bridge failed", { path: target.url.pathname, request_id: traceOf(res)?.id, err });
      });
    },
  };
}

export interface RestTarget {
  route: RestRoute;
  match: RegExpExecArray;
  url: URL;
  method: DescMethod;
  /** The request's Content-Encoding: a body is read only as sent (identity); any other is refused, 415. */
  encoding?: string | undefined;
}

export type RestGateway = ReturnType<typeof createRestGateway>;
