/**
 * Stripe's request encoding, decoded: `application/x-www-form-urlencoded` with brackets for nesting
 * (`metadata[order]=7`, `payment_method_types[0]=card`), as the official library sends it
 * (its `stringifyRequestData`); query strings of GETs are encoded the same way. An object whose
 * keys are all 0, 1, 2 … becomes an array. Every leaf is a string: `coerce` gives it the type its
 * schema says (integer, number, boolean), as Stripe's API does.
 */

export type FormValue = string | FormValue[] | { [k: string]: FormValue };

/** The nested object that `body` (or a query string) encodes. */
export function decodeForm(body: string): Record<string, FormValue> {
  const root: Record<string, FormValue> = {};
  for (const [rawKey, value] of new URLSearchParams(body)) {
    const head = rawKey.match(/^[^[]+/)?.[0] ?? rawKey;
    const rest = [...rawKey.slice(head.length).matchAll(/\[([^\]]*)\]/g)].map((m) => m[1] ?? "");
    const path = [head, ...rest];
    let node: Record<string, FormValue> = root;
    for (let i = 0; i < path.length - 1; i++) {
      const k = path[i] as string;
      const next = node[k];
      if (typeof next !== "object" || next === null || Array.isArray(next)) node[k] = {};
      node = node[k] as Record<string, FormValue>;
    }
    const last = path[path.length - 1] as string;
    node[last === "" ? String(Object.keys(node).length) : last] = value;
  }
  return arrays(root) as Record<string, FormValue>;
}

/** Objects keyed 0..n-1 become arrays, recursively. */
function arrays(v: FormValue): FormValue {
  if (typeof v === "string" || Array.isArray(v)) return v;
  const keys = Object.keys(v);
  const out: Record<string, FormValue> = {};
  for (const k of keys) out[k] = arrays(v[k] as FormValue);
  if (keys.length > 0 && keys.every((k, i) => k === String(i))) return keys.map((k) => out[k] as FormValue);
  return out;
}

/** A JSON schema as Stripe's OpenAPI document writes them (the parts coercion needs). */
export interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  items?: Schema;
  anyOf?: Schema[];
  enum?: unknown[];
  $ref?: string;
  nullable?: boolean;
  [k: string]: unknown;
}

/** `v` with its string leaves turned into what `schema` expects where they read as such. */
export function coerce(v: unknown, schema: Schema | undefined, resolve: (ref: string) => Schema): unknown {
  if (!schema) return v;
  if (schema.$ref) return coerce(v, resolve(schema.$ref), resolve);
  if (schema.anyOf) {
    // The first alternative the value can be read as (a string leaf "" matches Stripe's `enum: [""]` unset).
    if (v === "" && schema.anyOf.some((s) => s.enum?.includes(""))) return "";
    for (const alt of schema.anyOf) {
      const r = coerce(v, alt, resolve);
      if (fits(r, alt.$ref ? resolve(alt.$ref) : alt)) return r;
    }
    return v;
  }
  if (typeof v === "string") {
    if (schema.type === "integer" && /^-?\d+$/.test(v)) return Number(v);
    if (schema.type === "number" && v.trim() !== "" && !Number.isNaN(Number(v))) return Number(v);
    if (schema.type === "boolean" && (v === "true" || v === "false")) return v === "true";
    return v;
  }
  if (Array.isArray(v)) return schema.type === "array" ? v.map((x) => coerce(x, schema.items, resolve)) : v;
  if (typeof v === "object" && v !== null) {
    const o = v as Record<string, unknown>;
    // An array sent with indices reads as an object only if it was empty-keyed; a schema array of an object with numeric keys:
    if (schema.type === "array") return v;
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(o)) {
      const extra = typeof schema.additionalProperties === "object" ? schema.additionalProperties : undefined;
      out[k] = coerce(x, schema.properties?.[k] ?? extra, resolve);
    }
    return out;
  }
  return v;
}

/** Whether `v`'s JSON type is the one `schema` names (a shallow test to choose among anyOf). */
function fits(v: unknown, schema: Schema): boolean {
  if (schema.enum) return schema.enum.includes(v);
  switch (schema.type) {
    case "integer":
      return Number.isInteger(v);
    case "number":
      return typeof v === "number";
    case "boolean":
      return typeof v === "boolean";
    case "string":
      return typeof v === "string";
    case "array":
      return Array.isArray(v);
    case "object":
      return typeof v === "object" && v !== null && !Array.isArray(v);
    default:
      return true;
  }
}
