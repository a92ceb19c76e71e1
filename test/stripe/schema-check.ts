/**
 * Holds the fake Stripe to Stripe's published OpenAPI document (the subset in
 * test/stripe/openapi-subset.json, see extract-schemas.ts): every request, decoded from its form
 * encoding and typed by the schema (form.ts), is validated against its operation's request schema,
 * and every answer against the schema of its status (200, else `default`: Stripe's error). With
 * ajv, as test/helpers/openapi.ts validates the project's own answers.
 */
import { readFileSync } from "node:fs";
import AjvModule, { type ErrorObject, type ValidateFunction } from "ajv";
import { coerce, type Schema } from "./form.js";

// ajv is CommonJS: under NodeNext its default export is the module object, whose `default` is the class.
const Ajv = AjvModule.default;

export interface RequestProblem {
  param: string;
  message: string;
}

export interface SchemaChecker {
  /** The request's parameters typed by the schema, and what in them Stripe's schema refuses. */
  request(operation: string, params: unknown): { value: unknown; problems: (RequestProblem & { toString(): string })[] };
  /** What in an answer Stripe's schema refuses, each with its path. */
  response(operation: string, status: number, body: unknown): string[];
  /** What in an API object (a webhook event, the object it carries) the component schema `name` refuses. */
  object(name: string, value: unknown): string[];
}

interface Subset {
  info: Record<string, unknown>;
  operations: Record<string, { request: Schema; responses: Record<string, Schema | undefined> }>;
  components: { schemas: Record<string, Schema> };
}

const SUBSET = new URL("./openapi-subset.json", import.meta.url);

/** `a/b/0` (ajv's instance path) as Stripe names a parameter: `a[b][0]`. */
function param(path: string, extra?: string): string {
  const parts = path.split("/").filter(Boolean);
  if (extra !== undefined) parts.push(extra);
  const [head, ...rest] = parts;
  return `${head ?? ""}${rest.map((p) => `[${p}]`).join("")}`;
}

function describe(e: ErrorObject): string {
  return `${e.instancePath || "(body)"} ${e.message}${e.params && Object.keys(e.params).length ? ` ${JSON.stringify(e.params)}` : ""}`;
}

/**
 * OpenAPI 3.0's `nullable: true` as JSON Schema says it (ajv takes `nullable` only beside `type`;
 * Stripe writes it beside `anyOf` too): the schema, or null.
 */
function nullables(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(nullables);
  if (!v || typeof v !== "object") return v;
  const { nullable, ...rest } = v as Record<string, unknown>;
  const out = Object.fromEntries(Object.entries(rest).map(([k, x]) => [k, k === "properties" ? Object.fromEntries(Object.entries(x as object).map(([n, y]) => [n, nullables(y)])) : nullables(x)]));
  if (nullable !== true) return out;
  if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
  return { anyOf: [out, { type: "null" }] };
}

/**
 * A request schema closed as Stripe's API is: the document says `additionalProperties: false` on a
 * request's top level only, but Stripe refuses an unknown nested parameter too
 * ("Received unknown parameter: address[planet]"); open maps (metadata) say so and stay open.
 */
function closed(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(closed);
  if (!v || typeof v !== "object") return v;
  const o = v as Record<string, unknown>;
  const out = Object.fromEntries(Object.entries(o).map(([k, x]) => [k, k === "properties" ? Object.fromEntries(Object.entries(x as object).map(([n, y]) => [n, closed(y)])) : closed(x)]));
  if (o.properties && o.additionalProperties === undefined) out.additionalProperties = false;
  return out;
}

let shared: SchemaChecker | undefined;

/** The checker of the committed subset (or of `subset`, for tests). */
export function loadChecker(subset?: Subset): SchemaChecker {
  if (subset) return makeChecker(subset);
  shared ??= makeChecker(JSON.parse(readFileSync(SUBSET, "utf8")) as Subset);
  return shared;
}

function makeChecker(subset: Subset): SchemaChecker {
  const ajv = new Ajv({ strict: false, allErrors: true, logger: false });
  for (const f of ["unix-time", "decimal", "date-time", "uri", "email", "binary"]) ajv.addFormat(f, true);
  const rewrite = (s: unknown): unknown => nullables(JSON.parse(JSON.stringify(s).replaceAll('"#/components/schemas/', '"stripe-subset.json#/components/schemas/')));
  ajv.addSchema({ $id: "stripe-subset.json", components: nullables(subset.components) } as object);
  const compiled = new Map<string, ValidateFunction>();
  const compile = (key: string, schema: Schema) => {
    let v = compiled.get(key);
    if (!v) {
      v = ajv.compile(rewrite(schema) as object);
      compiled.set(key, v);
    }
    return v;
  };
  const resolve = (ref: string): Schema => subset.components.schemas[ref.replace("#/components/schemas/", "")] as Schema;
  const op = (operation: string) => {
    const o = subset.operations[operation];
    if (!o) throw new Error(`fake stripe: ${operation} is not in test/stripe/openapi-subset.json (add it to OPERATIONS in extract-schemas.ts)`);
    return o;
  };
  return {
    request(operation, params) {
      const o = op(operation);
      const value = coerce(params, o.request, resolve);
      const validate = compile(`${operation} request`, closed(o.request) as Schema);
      if (validate(value)) return { value, problems: [] };
      const problems = (validate.errors ?? []).map((e) => {
        const unknown = e.keyword === "additionalProperties" ? String((e.params as { additionalProperty: string }).additionalProperty) : undefined;
        const p = param(e.instancePath, unknown);
        const message = unknown !== undefined ? `Received unknown parameter: ${p}` : `Invalid ${p}: ${describe(e)}`;
        return { param: p, message, toString: () => message };
      });
      // anyOf reports every branch: the unknown-parameter ones say it best; keep one line per param.
      const seen = new Set<string>();
      return { value, problems: problems.filter((x) => !seen.has(x.message) && seen.add(x.message)) };
    },
    object(name, value) {
      if (!subset.components.schemas[name]) return [`no schema ${JSON.stringify(name)} in test/stripe/openapi-subset.json`];
      const validate = compile(`component ${name}`, { $ref: `#/components/schemas/${name}` });
      return validate(value) ? [] : (validate.errors ?? []).map(describe);
    },
    response(operation, status, body) {
      const o = op(operation);
      const key = o.responses[String(status)] ? String(status) : "default";
      const schema = o.responses[key];
      if (!schema) return [`status ${status} is not documented for ${operation}`];
      const validate = compile(`${operation} ${key}`, schema);
      return validate(body) ? [] : (validate.errors ?? []).map(describe);
    },
  };
}

/** Where the subset came from (its header). */
export function subsetInfo(): Record<string, unknown> {
  return (JSON.parse(readFileSync(SUBSET, "utf8")) as Subset).info;
}
