/**
 * The REST bridge: the documented JSON paths, built from the contract's google.api.http
 * annotations, each calling the same method implementation in-process (rpc/direct.ts) with the
 * same authentication, error mapping and logging as Connect and gRPC calls.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { type DescMessage, type DescMethod, type DescService, type JsonValue, getOption } from "@bufbuild/protobuf";
import type { FieldViolation } from "../billing/errors.js";
import { http } from "../gen/google/api/annotations_pb.js";
import type { Logger } from "../log.js";
import { API_KEY_HEADER } from "../rpc/auth.js";
import type { DirectCall, DirectResult } from "../rpc/direct.js";
import { JsonSyntaxError, checkJson, findField, fromText, parseJson } from "./json.js";
import { sendConnectError, sendError } from "./errors.js";
import { NOT_UTF8, strictUtf8 } from "../rpc/unicode.js";

type Req = IncomingMessage | Http2ServerRequest;
type Res = ServerResponse | Http2ServerResponse;

export const MAX_BODY_BYTES = 5 * 1024 * 1024;

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

function readBody(req: Req): Promise<Buffer | "too_large"> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) over = true;
      else if (!over) chunks.push(c);
    });
    req.on("end", () => resolve(over ? "too_large" : Buffer.concat(chunks)));
    req.on("error", reject);
  });
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
  async function requestJson(route: RestRoute, match: RegExpExecArray, url: URL, req: Req, res: Res) {
    const input: DescMessage = route.method.input;
    const violations: FieldViolation[] = [];
    let json: Record<string, JsonValue> = {};

    if (route.body !== "") {
      const raw = await readBody(req);
      if (raw === "too_large") {
        sendError(res, 413, "resource_exhausted", `the request body is larger than ${MAX_BODY_BYTES} bytes`, "PAYLOAD_TOO_LARGE");
        return undefined;
      }
      // Strict: bytes that are not UTF-8 are a 400, never read as U+FFFD.
      const text = strictUtf8(raw);
      if (text === undefined) {
        sendError(res, 400, "invalid_argument", NOT_UTF8, "INVALID_UTF8", [{ field: "", description: NOT_UTF8 }]);
        return undefined;
      }
      if (text.trim() !== "") {
        let parsed: unknown;
        try {
          parsed = parseJson(text);
        } catch (err) {
          if (!(err instanceof JsonSyntaxError)) throw err;
          sendError(res, 400, "invalid_argument", `the request body is not valid JSON: ${err.message}`, "MALFORMED_JSON", [
            { field: "", description: `not valid JSON: ${err.message}` },
          ]);
          return undefined;
        }
        const checked = checkJson(input, parsed);
        violations.push(...checked.violations);
        json = checked.json;
      }
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
      sendError(res, 400, "invalid_argument", violations.map((v) => `${v.field || "body"}: ${v.description}`).join("; "), "INVALID_FIELD", violations);
      return undefined;
    }
    return json;
  }

  async function serve(route: RestRoute, match: RegExpExecArray, url: URL, req: Req, res: Res): Promise<void> {
    const json = await requestJson(route, match, url, req, res);
    if (json === undefined) return;
    const key = req.headers[API_KEY_HEADER];
    const result = await call({ method: route.method, json, apiKey: typeof key === "string" ? key : undefined, requestMethod: req.method ?? "GET", url: url.pathname });
    if (!result.ok) {
      sendConnectError(res, result.error);
      return;
    }
    const out = JSON.stringify(route.responseBody === "" ? result.json : (result.json[route.responseBody] ?? null));
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(out) });
    res.end(out);
  }

  /** Handles the request if its path is a REST route; returns false when it is not one. */
  return function handleRest(req: Req, res: Res): boolean {
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
      serve(route, match, url, req, res).catch((err) => {
        if (!res.headersSent) sendError(res, 500, "internal", "internal error", "INTERNAL");
        else res.end();
        log.error("rest bridge failed", { path: url.pathname, err });
      });
      return true;
    }
    if (!pathMatched) return false;
    res.setHeader("allow", [...new Set(allowed)].join(", "));
    sendError(res, 405, "unimplemented", `${req.method} is not allowed on ${url.pathname}; use ${[...new Set(allowed)].join(" or ")}`, "METHOD_NOT_ALLOWED");
    return true;
  };
}
