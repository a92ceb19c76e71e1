/**
 * The OpenAPI 3.1 document of the REST bridge, built from the same route table the bridge serves
 * (gateway.ts buildRoutes over the contract's google.api.http annotations) and from the message
 * descriptors, so that it says what the server does (DESIGN §4):
 * - proto field names (snake_case); every output field is always present (`required`);
 * - a field with explicit presence (proto3 `optional`, a message, a oneof member) is nullable:
 *   absent is written as JSON null; except, in responses, one marked `(billing.v1.always_set)`,
 *   which every response sets (the writer, rpc/json-out.ts, never writes it as null);
 * - `(billing.v1.decimal)` fields and 64-bit integers are strings; Timestamps RFC 3339 strings;
 *   maps are objects; enums their value names;
 * - `response_body: "x"` answers field x alone (a bare array for a repeated field);
 * - a request body is the request message (less the path parameters) for `body: "*"`, or the
 *   named field; the other fields of a request without a body are query parameters, converted by
 *   their type as the bridge converts them (rpc/json.ts fromText);
 * - errors are the Connect error JSON with the HTTP statuses of Connect's code table.
 * Inputs are described as the JSON reader takes them: null means absent, and numbers may come
 * as strings (decimals as JSON numbers).
 * Descriptions come from the .proto comments when given (the generated code keeps none:
 * scripts/openapi.ts reads them from `buf build`'s image).
 */
import { takesIdempotencyKey } from "../rpc/idempotency.js";
import { type DescField, type DescMessage, type DescMethod, type DescService, ScalarType, getOption } from "@bufbuild/protobuf";
import { FeatureSet_FieldPresence, type FileDescriptorSet, type SourceCodeInfo_Location } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { codeToHttpStatus, codeToString } from "@connectrpc/connect/protocol-connect";
import { always_set, decimal, rest_number } from "../gen/billing/v1/options_pb.js";
import { needsKey, publishableMay } from "../rpc/auth.js";
import { type RestRoute, buildRoutes } from "./gateway.js";

// biome-ignore lint/suspicious/noExplicitAny: a JSON Schema is an open JSON object
export type Schema = Record<string, any>;

export interface OpenApiDocument {
  openapi: "3.1.0";
  info: { title: string; version: string; description: string; license: { name: string; identifier: string } };
  servers: { url: string }[];
  tags: { name: string; description?: string }[];
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema>; responses: Record<string, Schema>; securitySchemes: Record<string, Schema> };
  security: Record<string, string[]>[];
}

export interface Operation {
  operationId: string;
  tags: string[];
  summary: string;
  description?: string;
  parameters?: Parameter[];
  requestBody?: { required: boolean; content: { "application/json": { schema: Schema } } };
  responses: Record<string, Schema>;
  security?: Record<string, string[]>[];
  /** The RPC this route calls (its Connect/gRPC path). */
  "x-rpc": string;
}

export interface Parameter {
  name: string;
  in: "path" | "query" | "header";
  required: boolean;
  description?: string;
  schema: Schema;
  style?: "form";
  explode?: boolean;
}

/** Comments by full name: `billing.v1.Subject`, `billing.v1.Subject.id`, `billing.v1.SubjectService.CreateSubject`. */
export type Comments = (fullName: string) => string | undefined;

/** A decimal as the service writes it: digits, an optional fraction, no exponent. */
export const DECIMAL_PATTERN = "^-?[0-9]+(\\.[0-9]+)?$";
const INT_PATTERN = "^-?[0-9]+$";

/** The security scheme's name in the document. */
export const API_KEY_SCHEME = "ApiKey";

const INT32 = new Set([ScalarType.INT32, ScalarType.SINT32, ScalarType.SFIXED32]);
const UINT32 = new Set([ScalarType.UINT32, ScalarType.FIXED32]);
const INT64 = new Set([ScalarType.INT64, ScalarType.SINT64, ScalarType.SFIXED64, ScalarType.UINT64, ScalarType.FIXED64]);

type Mode = "output" | "input";

/** Makes a schema also accept JSON null. */
function nullable(s: Schema): Schema {
  if (s.$ref !== undefined) {
    const { $ref, ...rest } = s;
    return { ...rest, anyOf: [{ $ref }, { type: "null" }] };
  }
  if (typeof s.type === "string") return { ...s, type: [s.type, "null"], ...(s.enum ? { enum: [...s.enum, null] } : {}) };
  if (Array.isArray(s.type)) return s.type.includes("null") ? s : { ...s, type: [...s.type, "null"], ...(s.enum ? { enum: [...s.enum, null] } : {}) };
  return s; // {} (any JSON) already takes null
}

function withDescription(s: Schema, description: string | undefined): Schema {
  return description ? { ...s, description } : s;
}

/**
 * Explicit presence: set or not, which the JSON writer (rpc/json-out.ts) writes as a value or null.
 * Lists and maps are never null; members of a real oneof are left out when unset (proto3
 * `optional` fields have no oneof in protobuf-es).
 */
function hasPresence(field: DescField): boolean {
  if (field.fieldKind === "list" || field.fieldKind === "map" || field.oneof !== undefined) return false;
  return field.presence === FeatureSet_FieldPresence.EXPLICIT;
}

/** A decimal the REST writer sends as a JSON number with its exact digits (invoice line quantity). */
const restNumber = (field: DescField) => field.fieldKind === "scalar" && getOption(field, rest_number);

function scalarSchema(type: ScalarType, isDecimal: boolean, mode: Mode): Schema {
  if (type === ScalarType.STRING) {
    if (!isDecimal) return { type: "string" };
    return mode === "output" ? { type: "string", pattern: DECIMAL_PATTERN } : { type: ["string", "number"], pattern: DECIMAL_PATTERN };
  }
  if (type === ScalarType.BOOL) return { type: "boolean" };
  if (type === ScalarType.BYTES) return { type: "string", contentEncoding: "base64" };
  if (INT64.has(type)) return mode === "output" ? { type: "string", format: "int64", pattern: INT_PATTERN } : { type: ["string", "integer"], format: "int64", pattern: INT_PATTERN };
  if (type === ScalarType.DOUBLE || type === ScalarType.FLOAT) return mode === "output" ? { type: "number", format: "double" } : { type: ["number", "string"], format: "double" };
  const range = INT32.has(type) ? { format: "int32" } : UINT32.has(type) ? { format: "uint32", minimum: 0 } : {};
  return mode === "output" ? { type: "integer", ...range } : { type: ["integer", "string"], ...range, pattern: INT_PATTERN };
}

const WRAPPERS: Record<string, ScalarType> = {
  "google.protobuf.DoubleValue": ScalarType.DOUBLE,
  "google.protobuf.FloatValue": ScalarType.FLOAT,
  "google.protobuf.Int64Value": ScalarType.INT64,
  "google.protobuf.UInt64Value": ScalarType.UINT64,
  "google.protobuf.Int32Value": ScalarType.INT32,
  "google.protobuf.UInt32Value": ScalarType.UINT32,
  "google.protobuf.BoolValue": ScalarType.BOOL,
  "google.protobuf.StringValue": ScalarType.STRING,
  "google.protobuf.BytesValue": ScalarType.BYTES,
};

/** Well-known types have their own JSON forms; they are written inline. */
function wellKnown(desc: DescMessage, mode: Mode): Schema | undefined {
  switch (desc.typeName) {
    case "google.protobuf.Timestamp":
      return { type: "string", format: "date-time" };
    case "google.protobuf.Duration":
      return { type: "string", pattern: "^-?[0-9]+(\\.[0-9]+)?s$" };
    case "google.protobuf.FieldMask":
      return { type: "string", description: "Comma-separated field names." };
    case "google.protobuf.Struct":
      // Any JSON object (generated clients type it as a map of unknown values, not an empty object).
      return { type: "object", additionalProperties: true };
    case "google.protobuf.Empty":
      return { type: "object" };
    case "google.protobuf.Value":
      return {};
    case "google.protobuf.ListValue":
      return { type: "array" };
  }
  const wrapped = WRAPPERS[desc.typeName];
  return wrapped === undefined ? undefined : scalarSchema(wrapped, false, mode);
}

/** Builds the components: one schema per message and mode (what the server writes, what it reads). */
class Schemas {
  readonly components: Record<string, Schema> = {};
  private readonly names = new Map<string, string>();
  private readonly taken = new Map<string, string>();

  constructor(private readonly comments: Comments) {}

  private nameOf(desc: DescMessage, mode: Mode): string {
    const key = `${mode} ${desc.typeName}`;
    const known = this.names.get(key);
    if (known) return known;
    // Messages named …Request or …Input are only ever read; others get "Input" for their read form.
    const short = mode === "output" || /(Request|Input)$/.test(desc.name) ? desc.name : `${desc.name}Input`;
    const name = this.taken.has(short) ? (mode === "input" ? `${desc.name}.input` : desc.typeName) : short;
    this.taken.set(name, key);
    this.names.set(key, name);
    return name;
  }

  /** A reference to the message's schema (or a well-known type's inline form). */
  message(desc: DescMessage, mode: Mode): Schema {
    const wkt = wellKnown(desc, mode);
    if (wkt) return wkt;
    const name = this.nameOf(desc, mode);
    if (!(name in this.components)) {
      this.components[name] = {}; // placeholder: a message may refer to itself
      this.components[name] = this.object(desc, mode, new Set());
    }
    return { $ref: `#/components/schemas/${name}` };
  }

  /** The message's fields as an object schema, less `omit`. */
  object(desc: DescMessage, mode: Mode, omit: Set<string>): Schema {
    const properties: Record<string, Schema> = {};
    for (const field of desc.fields) {
      if (omit.has(field.name)) continue;
      properties[field.name] = this.field(field, mode);
    }
    // A member of a oneof is there only when it is the one set.
    const names = Object.keys(properties).filter((name) => desc.fields.find((f) => f.name === name)?.oneof === undefined);
    return withDescription(
      {
        type: "object",
        properties,
        // What the server writes has every field; what it reads may leave any out.
        ...(mode === "output" && names.length > 0 ? { required: names } : {}),
        // A reader ignores unknown fields; a writer adds none.
        ...(mode === "output" ? { additionalProperties: false } : {}),
      },
      this.comments(desc.typeName),
    );
  }

  /** One value of the field (an element of a list or map, or the singular value). */
  private value(field: DescField, mode: Mode): Schema {
    switch (field.fieldKind) {
      case "scalar":
        if (mode === "output" && restNumber(field)) return { type: "number", description: "Written with the decimal's exact digits (parse it as a decimal, not a float)." };
        return scalarSchema(field.scalar, getOption(field, decimal), mode);
      case "enum":
        return { type: "string", enum: field.enum.values.map((v) => v.name) };
      case "message":
        return this.message(field.message, mode);
      case "list":
        return field.listKind === "scalar"
          ? scalarSchema(field.scalar, getOption(field, decimal), mode)
          : field.listKind === "enum"
            ? { type: "string", enum: field.enum.values.map((v) => v.name) }
            : this.message(field.message, mode);
      case "map":
        return field.mapKind === "scalar"
          ? scalarSchema(field.scalar, getOption(field, decimal), mode)
          : field.mapKind === "enum"
            ? { type: "string", enum: field.enum.values.map((v) => v.name) }
            : this.message(field.message, mode);
    }
  }

  field(field: DescField, mode: Mode): Schema {
    let s = this.value(field, mode);
    if (field.fieldKind === "list") s = { type: "array", items: s };
    else if (field.fieldKind === "map") s = { type: "object", additionalProperties: s };
    // Output: absent is null, unless every response sets it. Input: null means absent, for any field.
    if (mode === "input" || (hasPresence(field) && !getOption(field, always_set))) s = nullable(s);
    return withDescription(s, this.comments(`${field.parent.typeName}.${field.name}`));
  }
}

/** A query-string value the bridge converts: scalars, enums, their lists, and the string-form well-known types. */
function queryable(field: DescField): boolean {
  if (field.fieldKind === "scalar" || field.fieldKind === "enum") return true;
  if (field.fieldKind === "list") return field.listKind !== "message";
  if (field.fieldKind === "message")
    return ["google.protobuf.Timestamp", "google.protobuf.Duration", "google.protobuf.FieldMask"].includes(field.message.typeName) || field.message.typeName in WRAPPERS;
  return false;
}

/** The schema of a path or query value: as the bridge reads text (rpc/json.ts fromText). */
function textSchema(field: DescField, schemas: Schemas): Schema {
  const one = (s: Schema): Schema => {
    const out = { ...s };
    // Text is converted by the field's type: a number is written as digits, a bool as true/false (or 1/0).
    if (Array.isArray(out.type)) out.type = out.type.filter((t: string) => t !== "null" && t !== "string")[0] ?? "string";
    if (out.type !== "string") delete out.pattern;
    return out;
  };
  if (field.fieldKind === "list") {
    const item = field.listKind === "scalar" ? scalarSchema(field.scalar, getOption(field, decimal), "input") : { type: "string", enum: field.enum?.values.map((v) => v.name) };
    return { type: "array", items: one(item) };
  }
  if (field.fieldKind === "scalar") return one(scalarSchema(field.scalar, getOption(field, decimal), "input"));
  if (field.fieldKind === "enum") return { type: "string", enum: field.enum.values.map((v) => v.name) };
  if (field.fieldKind === "message") return one(schemas.message(field.message, "input"));
  return { type: "string" };
}

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

const STATUS_TEXT: Record<number, [string, string]> = {
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
function errorStatuses(route: RestRoute, comment: string, hasInput: boolean): number[] {
  // Any request may declare a Content-Length over its method's bound (server.ts refuses it unread).
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

const firstSentence = (text: string) => (/^(.*?\.)(\s|$)/s.exec(text)?.[1] ?? text).replace(/\s+/g, " ").trim();

export interface BuildOptions {
  version: string;
  /** The SPDX identifier of the project's license (package.json `license`); Apache-2.0 when not given. */
  license?: string;
  comments?: Comments;
}

/** The document for the REST routes of `services` (rpc/routes.ts restServices). */
export function buildOpenApi(services: DescService[], options: BuildOptions): OpenApiDocument {
  const comments: Comments = options.comments ?? (() => undefined);
  const schemas = new Schemas(comments);
  const routes = buildRoutes(services);
  // Documented in the contract's order (service, then method), not the matching order.
  const order = new Map<DescMethod, number>();
  for (const s of services) for (const m of s.methods) order.set(m, order.size);
  routes.sort((a, b) => (order.get(a.method) ?? 0) - (order.get(b.method) ?? 0));

  const paths: OpenApiDocument["paths"] = {};
  const usedStatuses = new Set<number>();
  const operationIds = new Set<string>();
  for (const route of routes) {
    const { method } = route;
    const comment = comments(`${method.parent.typeName}.${method.name}`) ?? "";
    const input = method.input;
    const parameters: Parameter[] = [];
    for (const name of route.params) {
      const field = input.fields.find((f) => f.name === name);
      if (!field) throw new Error(`${route.template}: {${name}} is not a field of ${input.typeName}`);
      parameters.push({ name, in: "path", required: true, schema: textSchema(field, schemas), ...describe(comments(`${input.typeName}.${name}`)) });
    }
    if (takesIdempotencyKey(method)) {
      parameters.push({
        name: "Idempotency-Key",
        in: "header",
        required: false,
        description:
          "1–255 printable ASCII characters. A retry with the same key and request gets the first answer again (with `Idempotent-Replayed: true`) and changes nothing; the same key with another request is a 400 IDEMPOTENCY_KEY_REUSED. Kept 24 hours.",
        schema: { type: "string", minLength: 1, maxLength: 255 },
      });
    }
    let requestBody: Operation["requestBody"];
    if (route.body === "*") {
      const omit = new Set(route.params);
      const schema = omit.size === 0 ? schemas.message(input, "input") : schemas.object(input, "input", omit);
      requestBody = { required: false, content: { "application/json": { schema } } };
    } else if (route.body !== "") {
      const field = input.fields.find((f) => f.name === route.body);
      if (!field) throw new Error(`${route.template}: body "${route.body}" is not a field of ${input.typeName}`);
      requestBody = { required: false, content: { "application/json": { schema: schemas.field(field, "input") } } };
    }
    if (route.body !== "*") {
      for (const field of input.fields) {
        if (route.params.includes(field.name) || field.name === route.body || !queryable(field)) continue;
        const list = field.fieldKind === "list";
        parameters.push({
          name: field.name,
          in: "query",
          required: false,
          schema: textSchema(field, schemas),
          ...(list ? { style: "form" as const, explode: true } : {}),
          ...describe(comments(`${input.typeName}.${field.name}`)),
        });
      }
    }
    let ok: Schema;
    if (route.responseBody === "") ok = schemas.message(method.output, "output");
    else {
      const field = method.output.fields.find((f) => f.name === route.responseBody);
      if (!field) throw new Error(`${route.template}: response_body "${route.responseBody}" is not a field of ${method.output.typeName}`);
      const s = schemas.field(field, "output");
      // The field alone: a message that is always set (the bridge would write null if it were not).
      ok = field.fieldKind === "message" && s.anyOf ? { $ref: s.anyOf[0].$ref, ...(s.description ? { description: s.description } : {}) } : s;
    }
    const statuses = errorStatuses(route, comment, parameters.length > 0 || requestBody !== undefined);
    for (const s of statuses) usedStatuses.add(s);
    const responses: Record<string, Schema> = { "200": { description: "OK", content: { "application/json": { schema: ok } } } };
    for (const s of statuses) responses[String(s)] = { $ref: `#/components/responses/${STATUS_TEXT[s]?.[0] ?? `Status${s}`}` };
    const operationId = operationIds.has(method.name) ? `${method.parent.name}_${method.name}` : method.name;
    operationIds.add(operationId);
    const op: Operation = {
      operationId,
      tags: [method.parent.name],
      summary: comment ? firstSentence(comment) : method.name,
      ...(comment ? { description: comment } : {}),
      ...(parameters.length > 0 ? { parameters } : {}),
      ...(requestBody ? { requestBody } : {}),
      responses,
      ...(needsKey(method.parent) ? {} : { security: [] }),
      "x-rpc": `/${method.parent.typeName}/${method.name}`,
    };
    paths[route.template] ??= {};
    (paths[route.template] as Record<string, Operation>)[route.httpMethod.toLowerCase()] = op;
  }

  const errorSchema: Schema = {
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

  const tags = services.map((s) => ({ name: s.name, ...describe(comments(s.typeName)) }));
  return {
    openapi: "3.1.0",
    info: {
      title: "Usage billing REST API",
      version: options.version,
      description:
        "The REST-style JSON paths, transcoded from the google.api.http annotations of the Protobuf contract onto the same handlers as gRPC and Connect. " +
        "JSON uses proto field names and always has every field: a value that is absent is null, a list [], a map {}. Decimals (amounts, quantities) are strings; " +
        "times are RFC 3339 UTC. Every call carries X-API-Key, except the ones marked as needing none. Generated from proto/ by scripts/openapi.ts.",
      license: { name: options.license ?? "Apache-2.0", identifier: options.license ?? "Apache-2.0" },
    },
    servers: [{ url: "/" }],
    tags,
    paths,
    components: {
      schemas: { ...sortedKeys(schemas.components), Error: errorSchema },
      responses,
      securitySchemes: {
        [API_KEY_SCHEME]: {
          type: "apiKey",
          in: "header",
          name: "X-API-Key",
          description: "A secret key (sk_…) of the environment; a publishable key (pk_…) only reads billing state.",
        },
      },
    },
    security: [{ [API_KEY_SCHEME]: [] }],
  };
}

function describe(text: string | undefined): { description?: string } {
  return text ? { description: text } : {};
}

function sortedKeys<T>(o: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/**
 * The comments of a FileDescriptorSet with source info (`buf build`'s image), by full name:
 * leading comments, else trailing, with the comment markers' leading space removed.
 */
export function commentsFromDescriptorSet(set: FileDescriptorSet): Map<string, string> {
  const out = new Map<string, string>();
  for (const file of set.file) {
    const locations = new Map<string, SourceCodeInfo_Location>();
    for (const loc of file.sourceCodeInfo?.location ?? []) locations.set(loc.path.join("."), loc);
    const text = (path: number[]): string | undefined => {
      const loc = locations.get(path.join("."));
      const raw = (loc?.leadingComments || loc?.trailingComments || "").trim();
      if (!raw) return undefined;
      return raw
        .split("\n")
        .map((l) => l.replace(/^ /, "").trimEnd())
        .join("\n")
        .trim();
    };
    const put = (name: string, path: number[]) => {
      const t = text(path);
      if (t) out.set(name, t);
    };
    const pkg = file.package ? `${file.package}.` : "";
    const messages = (list: typeof file.messageType, prefix: string, path: number[]) => {
      list.forEach((m, i) => {
        const name = `${prefix}${m.name}`;
        const p = [...path, i];
        put(name, p);
        m.field.forEach((f, j) => {
          put(`${name}.${f.name}`, [...p, 2, j]);
        });
        messages(m.nestedType, `${name}.`, [...p, 3]);
      });
    };
    messages(file.messageType, pkg, [4]);
    file.service.forEach((s, i) => {
      put(`${pkg}${s.name}`, [6, i]);
      s.method.forEach((m, j) => {
        put(`${pkg}${s.name}.${m.name}`, [6, i, 2, j]);
      });
    });
  }
  return out;
}
