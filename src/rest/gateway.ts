/**
 * The REST bridge: the documented JSON paths, built from the contract's google.api.http
 * annotations, each calling the same method implementation in-process (rpc/direct.ts) with the
 * same error mapping and logging as Connect and gRPC calls. The server (server.ts) finds the
 * route first (`route`), authenticates the key and admits the request from its headers, and only
 * then has the body read (`serve`), through a stream that stops at the method's bound.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse, IncomingHttpHeaders } from "node:http2";
import { type DescMessage, type DescMethod, type DescService, type JsonValue, type Message, getOption } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { type FieldViolation, InvalidArgumentError } from "../billing/errors.js";
import type { Caller } from "../billing/tenancy.js";
import { nextTurn } from "../billing/yielding.js";
import { http } from "../gen/google/api/annotations_pb.js";
import type { Logger } from "../log.js";
import { traceOf } from "../ops/trace.js";
import { isRateLimited } from "../ratelimit.js";
import type { DirectCall, DirectResult } from "../rpc/direct.js";
import { fastRequestReaders } from "../rpc/convert/usage.js";
import { toConnectError } from "../rpc/errors.js";
import { REPLAYED_HEADER } from "../rpc/idempotency.js";
import { headersOf } from "../rpc/requests.js";
import { findField, fromText, invalidFields, readJsonMessageAsync } from "../rpc/json.js";
import { stringifyRest } from "../rpc/json-out.js";
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
      out.push({
        httpMethod: p.case.toUpperCase(),
        template,
        method,
        body: rule.body,
        responseBody: rule.responseBody,
        regex,
        params,
        literalSegments: segments.length - params.length,
      });
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
 * (server.ts); their ConnectErrors are thrown.
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

export function createRestGateway(services: DescService[], call: (c: DirectCall) => Promise<DirectResult>, log: Logger) {
  const routes = buildRoutes(services);
  // Routes by their first path segment (all start with a literal one), so that a request tries a
  // handful of patterns rather than all of them; each list keeps the most-specific-first order.
  const byFirstSegment = new Map<string, RestRoute[]>();
  for (const route of routes) {
    const first = firstSegment(route.template);
    byFirstSegment.set(first, [...(byFirstSegment.get(first) ?? []), route]);
  }

  /** Builds the request message's JSON from path parameters, the query string and the body. */
  async function requestJson(route: RestRoute, match: RegExpExecArray, url: URL, body: AsyncIterable<Uint8Array>, res: Res, encoding: string | undefined) {
    const input: DescMessage = route.method.input;
    const violations: FieldViolation[] = [];
    let json: Record<string, JsonValue> = {};
    let deferred: FieldViolation[] = [];
    let message: Message | undefined;

    if (route.body !== "") {
      let raw: Buffer;
      try {
        raw = await readBody(body);
      } catch (err) {
        if (!(err instanceof ConnectError)) {
          // The client went away mid-body (the request is aborted): nobody to answer.
          res.destroy();
          return undefined;
        }
        sendRefusal(res, err);
        return undefined;
      }
      // A body is read as sent: compressed JSON would otherwise be refused as bytes that are not UTF-8.
      if (encoding !== undefined && encoding.trim().toLowerCase() !== "identity") {
        sendError(
          res,
          Code.InvalidArgument,
          `REST request bodies are read as sent: Content-Encoding ${encoding} is not accepted (send the JSON uncompressed; Connect and gRPC take gzip and br)`,
          "UNSUPPORTED_CONTENT_ENCODING",
          { status: 415 },
        );
        return undefined;
      }
      // The one JSON reader (rpc/json.ts), as for JSON over Connect and gRPC: the same errors.
      try {
        // A body that is the whole message (no path or query fields) may be read straight into it.
        const fast = route.body === "*" && route.params.length === 0 ? fastRequestReaders.get(input.typeName) : undefined;
        const checked = await readJsonMessageAsync(input, raw, nextTurn, LARGE_BODY_BYTES, fast);
        violations.push(...checked.violations);
        deferred = checked.deferred;
        json = checked.json;
        message = checked.message;
      } catch (err) {
        if (!(err instanceof InvalidArgumentError)) throw err;
        sendConnectError(res, toConnectError(err));
        return undefined;
      }
      // Reading a large body took its share of the event loop: let other requests in first.
      if (raw.length >= LARGE_BODY_BYTES) await nextTurn();
    }

    for (const [key, raw] of queryParams(url.search)) {
      const field = findField(input, key);
      if (!field || route.params.includes(field.name) || route.body === "*") continue;
      if (raw === null) {
        violations.push({ field: field.name, description: "is not valid percent-encoded UTF-8" });
        continue;
      }
      const value = fromText(field, raw, field.name, violations);
      if (value === undefined) continue;
      if (field.fieldKind === "list") {
        const list = (json[field.name] as JsonValue[] | undefined) ?? [];
        list.push(value);
        json[field.name] = list;
      } else {
        json[field.name] = value;
      }
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
      if (field) {
        const value = fromText(field, raw, name, violations);
        if (value !== undefined) json[field.name] = value;
      }
    });

    if (violations.length > 0) {
      sendConnectError(res, toConnectError(invalidFields(violations)));
      return undefined;
    }
    return { json, deferred, message };
  }

  async function serve(target: RestTarget, res: Res, caller: Caller | undefined, body: AsyncIterable<Uint8Array>, requestMethod: string): Promise<void> {
    const { route, match, url } = target;
    const request = await requestJson(route, match, url, body, res, target.encoding);
    if (request === undefined) return;
    const { json, deferred, message } = request;
    const header = () => headersOf((res as { req?: { headers: IncomingHttpHeaders } }).req?.headers ?? {});
    const result = await call({ method: route.method, json, message, deferred, caller, requestMethod, url: url.pathname, trace: traceOf(res), header });
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
      let pathMatched = false;
      const allowed: string[] = [];
      for (const route of byFirstSegment.get(firstSegment(url.pathname)) ?? []) {
        const match = route.regex.exec(url.pathname);
        if (!match) continue;
        pathMatched = true;
        if (route.httpMethod !== req.method) {
          allowed.push(route.httpMethod);
          continue;
        }
        const encoding = req.headers["content-encoding"];
        return { route, match, url, method: route.method, encoding: typeof encoding === "string" ? encoding : undefined };
      }
      if (!pathMatched) return undefined;
      res.setHeader("allow", [...new Set(allowed)].join(", "));
      sendError(res, Code.Unimplemented, `${req.method} is not allowed on ${url.pathname}; use ${[...new Set(allowed)].join(" or ")}`, "METHOD_NOT_ALLOWED", { status: 405 });
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
