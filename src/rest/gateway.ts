/**
 * The REST bridge: the JSON paths of the contract's google.api.http annotations, each calling the
 * same implementation through the one invoker (rpc/invoke.ts) with the same error mapping
 * (rpc/errors.ts publicError) as Connect and gRPC calls. The request pipeline (edge/handler.ts)
 * finds the route first (`route`), authenticates and admits the request from its headers, and only
 * then has the body read (`serve`) through a stream bounded as the method is. The message is read
 * by the one JSON reader (rpc/json.ts) and written by the one JSON writer (rpc/json-out.ts) with
 * the router's JSON options. A call's signal is never aborted: it runs to its end (an ingest
 * commits) even if its client left.
 */
import { type DescMethod, type DescService, type JsonObject, type JsonReadOptions, type JsonValue, type JsonWriteOptions, type Message, fromJson, getOption, toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues } from "@connectrpc/connect";
import { type FieldViolation, InvalidArgumentError } from "../billing/errors.js";
import type { Caller } from "../billing/tenancy.js";
import { nextTurn } from "../billing/yielding.js";
import { readAll } from "../edge/body.js";
import type { Req, Res } from "../edge/listener.js";
import { http } from "../gen/google/api/annotations_pb.js";
import type { Logger } from "../log.js";
import { traceOf } from "../ops/trace.js";
import { preAuthKey } from "../rpc/auth.js";
import { DeferredProblems, deferredKey, traceKey } from "../rpc/context.js";
import { fastRequestReaders } from "../rpc/convert/usage.js";
import { publicError, toConnectError } from "../rpc/errors.js";
import { REPLAYED_HEADER } from "../rpc/idempotency.js";
import type { Invoker } from "../rpc/invoke.js";
import { checkJson, findField, fromText, invalidFields } from "../rpc/json.js";
import { parseJsonBody } from "../rpc/json-parse.js";
import { restJson, stringifyRest } from "../rpc/json-out.js";
import { headersOf } from "../rpc/requests.js";
import { sendConnectError, sendError, sendRefusal } from "./errors.js";

/** A body at least this large lets the event loop turn between being parsed, checked and served. */
const LARGE_BODY_BYTES = 256 * 1024;

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
export function templatePattern(template: string): { regex: RegExp; params: string[]; literalSegments: number } {
  const params: string[] = [];
  const segments = template
    .split("/")
    .filter(Boolean)
    .map((seg) => {
      const m = /^\{([a-z_][a-z0-9_.]*)\}$/.exec(seg);
      if (!m) return seg.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      params.push(m[1] as string);
      return "([^/]+)";
    });
  return { regex: new RegExp(`^/${segments.join("/")}/?$`), params, literalSegments: segments.length - params.length };
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

/** `+` and percent-decoded; null when the percent-encoding is not UTF-8 (URLSearchParams would put U+FFFD in its place). */
function queryDecoded(text: string): string | null {
  try {
    return decodeURIComponent(text.replace(/\+/g, " "));
  } catch {
    return null;
  }
}

/**
 * The body's part of the request message, read by the one JSON reader (the same errors as JSON over
 * Connect and gRPC) as proto JSON, or straight into the message; undefined once a refusal is sent
 * (or the client went away). The query's and path's fields and violations are added to it.
 */
async function bodyRequest(
  route: RestRoute,
  body: AsyncIterable<Uint8Array>,
  res: Res,
  encoding: string | undefined,
): Promise<(ReturnType<typeof checkJson> & { message?: Message | undefined }) | undefined> {
  let raw: Buffer;
  try {
    raw = await readAll(body);
  } catch (err) {
    // Not a ConnectError: the client went away mid-body (the request is aborted), nobody to answer.
    if (err instanceof ConnectError) sendRefusal(res, err);
    else res.destroy();
    return undefined;
  }
  // A body is read as sent: compressed JSON would otherwise be refused as bytes that are not UTF-8.
  if (encoding !== undefined && encoding.trim().toLowerCase() !== "identity") {
    const message = `REST request bodies are read as sent: Content-Encoding ${encoding} is not accepted (send the JSON uncompressed; Connect and gRPC take gzip and br)`;
    sendError(res, Code.InvalidArgument, message, "UNSUPPORTED_CONTENT_ENCODING", 415);
    return undefined;
  }
  // A large body is parsed, checked and served in turns of their own (a 1 MB batch takes about
  // 15 ms to parse and 8 ms to check): no request holds the server's one thread for long.
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

/** The path's parameters, percent-decoded; one that does not decode is a violation (and undefined). */
function pathParams(route: RestRoute, match: RegExpExecArray, violations: FieldViolation[]): (string | undefined)[] {
  return route.params.map((name, i) => {
    try {
      return decodeURIComponent(match[i + 1] ?? "");
    } catch {
      violations.push({ field: name, description: "is not a valid percent-encoded path segment" });
      return undefined;
    }
  });
}

/** Adds the query string's fields (unless the body is the whole message) and the path's to `json`; their violations are pushed. */
function addQueryAndPath(route: RestRoute, match: RegExpExecArray, url: URL, json: Record<string, JsonValue>, violations: FieldViolation[]): void {
  const input = route.method.input;
  for (const part of url.search.slice(1).split("&")) {
    const eq = part.indexOf("=");
    const key = queryDecoded(eq === -1 ? part : part.slice(0, eq));
    // A name that is not UTF-8 names no field and is left out, as unknown parameters are.
    const field = key === null ? undefined : findField(input, key);
    if (!field || route.params.includes(field.name) || route.body === "*") continue;
    const raw = eq === -1 ? "" : queryDecoded(part.slice(eq + 1));
    if (raw === null) {
      violations.push({ field: field.name, description: "is not valid percent-encoded UTF-8" });
      continue;
    }
    const value = fromText(field, raw, field.name, violations);
    if (value === undefined) continue;
    if (field.fieldKind === "list") json[field.name] = [...((json[field.name] as JsonValue[] | undefined) ?? []), value];
    else json[field.name] = value;
  }
  pathParams(route, match, violations).forEach((raw, i) => {
    const name = route.params[i] as string;
    const field = findField(input, name);
    const value = field && raw !== undefined ? fromText(field, raw, name, violations) : undefined;
    if (field && value !== undefined) json[field.name] = value;
  });
}

/** `jsonOptions`: the router's, so that a REST call reads and writes JSON as a Connect call does. */
export function createRestGateway(services: DescService[], invoke: Invoker, log: Logger, jsonOptions: Partial<JsonReadOptions & JsonWriteOptions>, rawRoutes: RawRoute[] = []) {
  const raw = rawRoutes.map((r): RestRoute => ({ httpMethod: "GET", template: r.template, method: r.method, body: "", responseBody: "", ...templatePattern(r.template), raw: r.serve }));
  // Routes by their first path segment (all start with a literal one), so that a request tries a
  // handful of patterns rather than all of them; each list keeps the most-specific-first order.
  const byFirstSegment = new Map<string, RestRoute[]>();
  for (const route of [...raw, ...buildRoutes(services)]) {
    const first = firstSegment(route.template);
    byFirstSegment.set(first, [...(byFirstSegment.get(first) ?? []), route]);
  }

  /** Calls the method through the invoker (or a REST-only route's function) for `caller`, authenticated from the headers before the body was read. */
  async function serve({ route, match, url }: RestTarget, req: Req, res: Res, caller: Caller | undefined, body: AsyncIterable<Uint8Array>): Promise<void> {
    if (route.raw) {
      try {
        const violations: FieldViolation[] = [];
        const params = pathParams(route, match, violations);
        if (violations.length > 0) throw invalidFields(violations);
        await route.raw(caller, params as string[], url, res);
      } catch (err) {
        sendConnectError(res, publicError(err, log, `${route.httpMethod} ${route.template}`, traceOf(res)?.id));
      }
      return;
    }
    const request = route.body === "" ? { json: {}, deferred: [], violations: [] } : await bodyRequest(route, body, res, req.headers["content-encoding"]);
    if (request === undefined) return;
    addQueryAndPath(route, match, url, request.json, request.violations);
    if (request.violations.length > 0) return sendConnectError(res, toConnectError(invalidFields(request.violations)));
    const { method } = route;
    const trace = traceOf(res);
    let out: { json: JsonObject; rawNumbers: Parameters<typeof stringifyRest>[1]; replayed: string | null };
    try {
      let message: Message;
      try {
        message = request.message ?? fromJson(method.input, request.json, jsonOptions);
      } catch (err) {
        throw ConnectError.from(err, Code.InvalidArgument);
      }
      const contextValues = createContextValues().set(preAuthKey, { caller }).set(traceKey, trace);
      if (request.deferred.length > 0) {
        const problems = new DeferredProblems();
        problems.add(0, request.deferred);
        contextValues.set(deferredKey, problems);
      }
      const header = () => headersOf(req.headers);
      const result = await invoke({ method, message, contextValues, protocolName: "rest", requestMethod: req.method ?? "GET", url: url.pathname, header });
      out = { ...restJson(method.output, toJson(method.output, result.message, jsonOptions) as JsonObject), replayed: result.header.get(REPLAYED_HEADER) };
    } catch (err) {
      return sendConnectError(res, publicError(err, log, `/${method.parent.typeName}/${method.name}`, trace?.id));
    }
    const text = stringifyRest(route.responseBody === "" ? out.json : (out.json[route.responseBody] ?? null), out.rawNumbers);
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...(out.replayed ? { [REPLAYED_HEADER]: out.replayed } : {}) });
    res.end(text);
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
        if (route.httpMethod === req.method) return { route, match, url };
        allowed.add(route.httpMethod);
      }
      if (allowed.size === 0) return undefined;
      res.setHeader("allow", [...allowed].join(", "));
      sendError(res, Code.Unimplemented, `${req.method} is not allowed on ${url.pathname}; use ${[...allowed].join(" or ")}`, "METHOD_NOT_ALLOWED", 405);
      return "answered";
    },

    /** Serves a routed request for `caller` (authenticated by the server), reading the body from `body`. */
    serve(target: RestTarget, req: Req, res: Res, caller: Caller | undefined, body: AsyncIterable<Uint8Array>): void {
      serve(target, req, res, caller, body).catch((err) => {
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
}

export type RestGateway = ReturnType<typeof createRestGateway>;
