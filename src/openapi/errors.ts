/**
 * The error side of the document: the statuses a route can answer with (from its comment and its
 * kind), the Connect codes of each, and the shared Error schema and responses.
 */
import { Code } from "@connectrpc/connect";
import { codeToHttpStatus, codeToString } from "@connectrpc/connect/protocol-connect";
import { needsKey, publishableMay } from "../rpc/auth.js";
import type { RestRoute } from "../rest/gateway.js";
import type { Schema } from "./types.js";

/** Connect codes by the upper-case names the contract's comments use (`NOT_FOUND (404)`). */
const CODES_BY_NAME = new Map<string, Code>(
  Object.values(Code)
    .filter((c): c is Code => typeof c === "number")
    .map((c) => [codeToString(c).toUpperCase(), c]),
);

/** Statuses the bridge itself answers with, besides those of Connect's table. */
export const BRIDGE_STATUSES: Record<number, { name: string; codes: string[]; description: string }> = {
  413: {
    name: "PayloadTooLarge",
    codes: ["resource_exhausted"],
    description: "The body (or the Content-Length a request declares, whatever its method) is larger than the method's bound (reason PAYLOAD_TOO_LARGE).",
  },
  415: {
    name: "UnsupportedMediaType",
    codes: ["invalid_argument"],
    description: "A request body sent with a Content-Encoding other than identity: REST bodies are read as sent (reason UNSUPPORTED_CONTENT_ENCODING).",
  },
};

export const STATUS_TEXT: Record<number, [string, string]> = {
  400: ["BadRequest", "Bad input (every violated field is named with its path in a google.rpc.BadRequest detail), or a state that does not allow the call."],
  401: ["Unauthenticated", "The X-API-Key header is missing, unknown or revoked."],
  403: ["PermissionDenied", "A publishable key was used where a secret key is needed."],
  404: ["NotFound", "The resource does not exist in the key's environment."],
  409: ["Conflict", "Already exists, or a write lost a race and gave up (aborted: retry)."],
  413: ["PayloadTooLarge", BRIDGE_STATUSES[413]?.description ?? ""],
  415: ["UnsupportedMediaType", BRIDGE_STATUSES[415]?.description ?? ""],
  429: ["TooManyRequests", "Over the key's rate limit; Retry-After says when to try again."],
  500: ["InternalError", 'An unexpected failure (message "internal error"; the cause is logged).'],
  503: ["Unavailable", "The server is at its bound of requests in flight (Retry-After), or the database cannot be reached."],
  504: ["DeadlineExceeded", "The call ran out of time."],
};

/** The Connect codes that map to each status (the `code` values an error with that status can carry). */
function codesFor(status: number): string[] {
  const codes = [...CODES_BY_NAME.values()].filter((c) => codeToHttpStatus(c) === status).map(codeToString);
  return [...new Set([...codes, ...(BRIDGE_STATUSES[status]?.codes ?? [])])].sort();
}

/**
 * The error statuses a route can answer with: those its comment names (`NOT_FOUND (404)`, also
 * across a line break), and those of the bridge and the server for any route of its kind.
 */
export function errorStatuses(route: RestRoute, comment: string, hasInput: boolean): number[] {
  // Any request may declare a Content-Length over its method's bound (src/edge/admit.ts refuses it unread).
  const out = new Set<number>([413, 500, 503]);
  for (const m of comment.matchAll(/\b([A-Z]+(?:_[A-Z]+)*)\s+\((\d{3})\)/g)) {
    const code = CODES_BY_NAME.get(m[1] as string);
    if (code !== undefined) out.add(codeToHttpStatus(code));
  }
  if (hasInput) out.add(400);
  if (route.params.length > 0) out.add(404);
  if (route.body !== "") out.add(415); // a compressed body (gateway.ts)
  if (route.httpMethod !== "GET") out.add(409); // a write that loses a race and gives up is aborted (DESIGN §4)
  if (needsKey(route.method.parent)) {
    out.add(401);
    out.add(429);
    if (!publishableMay(route.method)) out.add(403);
  }
  return [...out].sort((a, b) => a - b);
}

/** The Error schema: the Connect error JSON. */
export const ERROR_SCHEMA: Schema = {
  type: "object",
  description: "The Connect error JSON. `details` carries a google.rpc.ErrorInfo with a stable `reason` and, for bad input, a google.rpc.BadRequest naming every violated field.",
  properties: {
    code: { type: "string", description: "The Connect code (snake_case)." },
    message: { type: "string", description: "For developers; never echoes a key." },
    details: {
      type: "array",
      items: {
        type: "object",
        properties: {
          type: { type: "string", description: 'The detail\'s message type, e.g. "google.rpc.ErrorInfo" or "google.rpc.BadRequest".' },
          value: { type: "string", contentEncoding: "base64", description: "The detail as binary protobuf, base64 without padding." },
          debug: { type: "object", description: "The same detail as readable JSON (proto field names), for the known types." },
        },
        required: ["type", "value"],
        additionalProperties: false,
      },
    },
  },
  required: ["code", "message", "details"],
  additionalProperties: false,
};

/** The shared responses of the statuses used, each with the codes it can carry. */
export function errorResponses(usedStatuses: Set<number>): Record<string, Schema> {
  const responses: Record<string, Schema> = {};
  for (const s of [...usedStatuses].sort((a, b) => a - b)) {
    const [name, text] = STATUS_TEXT[s] ?? [`Status${s}`, ""];
    const codes = codesFor(s);
    responses[name] = {
      description: text,
      ...(s === 429 || s === 503 ? { headers: { "Retry-After": { description: "Seconds to wait before trying again (when the refusal is a bound).", schema: { type: "integer" } } } } : {}),
      content: { "application/json": { schema: { allOf: [{ $ref: "#/components/schemas/Error" }], properties: { code: { enum: codes } } } } },
    };
  }
  return responses;
}

/** The error responses of one operation, by status (references to the shared ones). */
export function errorRefs(statuses: number[]): Record<string, Schema> {
  const out: Record<string, Schema> = {};
  for (const s of statuses) out[String(s)] = { $ref: `#/components/responses/${STATUS_TEXT[s]?.[0] ?? `Status${s}`}` };
  return out;
}
