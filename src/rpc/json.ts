/**
 * The one reader of JSON requests, for the REST bridge (src/rest/gateway.ts) and for JSON over
 * Connect, gRPC and gRPC-Web (messages.ts), so that the same input gets the same error (code,
 * reason, field paths) on every protocol. Each message is checked against the contract before a
 * handler sees it, and handed on as plain proto3 JSON for fromJson:
 * - text is strict UTF-8, numbers read without loss (json-parse.ts); a lone UTF-16 surrogate in a
 *   string or key is a violation at its path;
 * - each value that does not fit its field's type is a violation at its path
 *   (`usage_based_rates[1].price.amount.value: must be a string or a number`); a JSON number is
 *   accepted for `(billing.v1.decimal)` fields; query-string values convert by the field's type;
 * - unknown fields are ignored; null means "not set" (DESIGN §4: absent);
 * - a Timestamp is read strictly by the service's one parser (src/billing/time.ts; protobuf-es
 *   rolls 2026-02-30 over to 2 March), handed on as canonical UTC text; a `(billing.v1.per_item_instant)`
 *   one that does not read is left out and reported apart (`deferred`), for the method to reject its event;
 * - an `update_mask` the body leaves out is the body's keys, null ones included (AIP-134):
 *   `{"email": null}` names `email` and leaves it unset, which clears it.
 */
import { type DescEnum, type DescField, type DescMessage, type JsonValue, ScalarType, getOption } from "@bufbuild/protobuf";
import type { GenExtension } from "@bufbuild/protobuf/codegenv2";
import type { FieldOptions } from "@bufbuild/protobuf/wkt";
import { type FieldViolation, InvalidArgumentError } from "../billing/errors.js";
import { FORMAT_PROBLEM, parseInstant } from "../billing/time.js";
import { decimal, per_item_instant } from "../gen/billing/v1/options_pb.js";
import { NOT_UNICODE, NumberLiteral, parseJsonBody, wellFormed } from "./json-parse.js";

/** A boolean field option of the contract (billing.v1 options.proto), read once per field; false where `applies` says no. */
export function fieldFlag(option: GenExtension<FieldOptions, boolean>, applies: (field: DescField) => boolean = () => true): (field: DescField) => boolean {
  const cache = new WeakMap<DescField, boolean>();
  return (field) => {
    if (!cache.has(field)) cache.set(field, applies(field) && getOption(field, option));
    return cache.get(field) === true;
  };
}

const isDecimal = fieldFlag(decimal);
const isPerItemInstant = fieldFlag(per_item_instant, (f) => f.fieldKind === "message" && f.message.typeName === "google.protobuf.Timestamp");

const indexCache = new WeakMap<DescMessage, Map<string, DescField>>();
/** The field named `name` (proto or JSON name). */
export function findField(desc: DescMessage, name: string): DescField | undefined {
  let idx = indexCache.get(desc);
  if (!idx) indexCache.set(desc, (idx = new Map(desc.fields.flatMap((f) => [[f.name, f] as const, [f.jsonName, f] as const]))));
  return idx.get(name);
}

const INT32 = new Set([ScalarType.INT32, ScalarType.SINT32, ScalarType.SFIXED32]);
const UINT32 = new Set([ScalarType.UINT32, ScalarType.FIXED32]);
const INT64 = new Set([ScalarType.INT64, ScalarType.SINT64, ScalarType.SFIXED64, ScalarType.UINT64, ScalarType.FIXED64]);
const FLOAT = new Set([ScalarType.DOUBLE, ScalarType.FLOAT]);

type Out = { ok: true; value: JsonValue } | { ok: false };

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
/**
 * A key in a field path: a key holding a lone surrogate is spelled with the JSON escape the client
 * wrote (`metadata.k\udc00`, as text), since the path itself travels as UTF-8 (in a
 * google.rpc.BadRequest) and must read the same on every protocol.
 */
const keyInPath = (key: string) => (wellFormed(key) ? key : key.replace(LONE_SURROGATE, (c) => `\\u${c.charCodeAt(0).toString(16)}`));

/** A FieldMask path as JSON writes it (lowerCamelCase); snake_case is read too. */
const MASK_PATH = /^[a-z][a-zA-Z0-9]*(?:_[a-z0-9][a-zA-Z0-9]*)*(?:\.[a-z][a-zA-Z0-9]*(?:_[a-z0-9][a-zA-Z0-9]*)*)*$/;
const camel = (path: string) => path.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
/** A JSON object (not null, an array or a number). */
const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof NumberLiteral);

class Walker {
  readonly violations: FieldViolation[] = [];
  /** Per-item instants that did not read: left out of the JSON, for the method to reject their item. */
  readonly deferred: FieldViolation[] = [];
  private bad(path: string, description: string): Out {
    this.violations.push({ field: path, description });
    return { ok: false };
  }

  /**
   * Plain JSON for a google.protobuf.Struct/Value/ListValue (numbers become JS numbers); the first
   * string or key that is not valid Unicode (a JSON string can escape half of a UTF-16 pair) is
   * the one violation.
   */
  private plain(v: unknown, path: string): Out {
    let at: string | undefined;
    const copy = (x: unknown, p: string): JsonValue => {
      if (at !== undefined) return null;
      if (x instanceof NumberLiteral) return Number(x.text);
      if (typeof x === "string" && !wellFormed(x)) at = p;
      if (Array.isArray(x)) return x.map((y, i) => copy(y, `${p}[${i}]`));
      if (x === null || typeof x !== "object") return x as JsonValue;
      const o: Record<string, JsonValue> = {};
      for (const [k, y] of Object.entries(x)) {
        if (!wellFormed(k)) at ??= `${p}.${keyInPath(k)}`;
        o[k] = copy(y, `${p}.${k}`);
      }
      return o;
    };
    const value = copy(v, path);
    return at === undefined ? { ok: true, value } : this.bad(at, NOT_UNICODE);
  }

  scalar(field: DescField, type: ScalarType, v: unknown, path: string): Out {
    if (type === ScalarType.STRING) {
      if (typeof v === "string") return wellFormed(v) ? { ok: true, value: v } : this.bad(path, NOT_UNICODE);
      if (v instanceof NumberLiteral && isDecimal(field)) return { ok: true, value: v.text };
      return this.bad(path, isDecimal(field) ? "must be a decimal number or a string" : "must be a string");
    }
    if (type === ScalarType.BOOL) {
      if (typeof v === "boolean") return { ok: true, value: v };
      return this.bad(path, "must be true or false");
    }
    if (type === ScalarType.BYTES) {
      if (typeof v === "string") return { ok: true, value: v };
      return this.bad(path, "must be a base64 string");
    }
    const text = v instanceof NumberLiteral ? v.text : typeof v === "string" ? v.trim() : undefined;
    if (FLOAT.has(type)) {
      // Whole numbers beyond 2^53 would silently change on the way to a double.
      if (text !== undefined && /^-?\d+$/.test(text) && !Number.isSafeInteger(Number(text))) {
        return this.bad(path, `must be at most ${Number.MAX_SAFE_INTEGER}`);
      }
      if (text !== undefined && text !== "" && Number.isFinite(Number(text))) return { ok: true, value: Number(text) };
      return this.bad(path, "must be a number");
    }
    if (text === undefined || !/^-?\d+$/.test(text)) return this.bad(path, "must be an integer");
    const n = BigInt(text);
    if (INT32.has(type) && (n < -2147483648n || n > 2147483647n)) return this.bad(path, "is out of range");
    if (UINT32.has(type) && (n < 0n || n > 4294967295n)) return this.bad(path, "is out of range");
    if (INT64.has(type)) return { ok: true, value: n.toString() };
    return { ok: true, value: Number(n) };
  }

  enumValue(e: DescEnum, v: unknown, path: string): Out {
    if (typeof v === "string" && e.values.some((x) => x.name === v)) return { ok: true, value: v };
    return this.bad(path, `must be one of ${e.values.map((x) => x.name).join(", ")}`);
  }

  message(desc: DescMessage, v: unknown, path: string): Out {
    switch (desc.typeName) {
      case "google.protobuf.Timestamp": {
        // Read strictly here (protobuf-es's fromJson rolls 2026-02-30 over to March 2), range
        // included, and handed on as the canonical UTC text of the millisecond read.
        if (typeof v !== "string") return this.bad(path, FORMAT_PROBLEM);
        const p = parseInstant(v);
        return p.ok ? { ok: true, value: new Date(p.ms).toISOString() } : this.bad(path, p.problem);
      }
      case "google.protobuf.FieldMask": {
        if (typeof v !== "string") return this.bad(path, "must be a string of comma-separated field names");
        const paths = v === "" ? [] : v.split(",").map((x) => x.trim());
        const wrong = paths.find((x) => !MASK_PATH.test(x));
        if (wrong !== undefined) return this.bad(path, `must be comma-separated field names ("${wrong}" is not one)`);
        return { ok: true, value: paths.map(camel).join(",") };
      }
      case "google.protobuf.Struct":
        return isObject(v) ? this.plain(v, path) : this.bad(path, "must be an object");
      case "google.protobuf.Value":
        return this.plain(v, path);
      case "google.protobuf.ListValue":
        return Array.isArray(v) ? this.plain(v, path) : this.bad(path, "must be an array");
    }
    if (!isObject(v)) return this.bad(path, "must be an object");
    const out: Record<string, JsonValue> = {};
    /** Fields the body gives as null: not set, but named (for a derived update_mask). */
    const nulls: string[] = [];
    let ok = true;
    for (const [key, value] of Object.entries(v)) {
      const field = findField(desc, key);
      if (!field) continue; // unknown fields are ignored
      if (value === null) {
        nulls.push(field.name); // null means not set
        continue;
      }
      const at = path === "" ? field.name : `${path}.${field.name}`;
      if (typeof value === "string" && isPerItemInstant(field)) {
        const p = parseInstant(value);
        if (p.ok) out[field.name] = new Date(p.ms).toISOString();
        else this.deferred.push({ field: at, description: p.problem });
        continue;
      }
      const r = this.field(field, value, at);
      if (r.ok) out[field.name] = r.value;
      else ok = false;
    }
    // A mask left out is the fields the body gives (AIP-134), a null one included: that field
    // is named and left unset, so an update clears it.
    const mask = findField(desc, "update_mask");
    if (ok && mask?.fieldKind === "message" && mask.message.typeName === "google.protobuf.FieldMask" && !(mask.name in out)) {
      const named = new Set([...Object.keys(out), ...nulls.filter((name) => name !== mask.name)]);
      out[mask.name] = [...named].map((name) => (findField(desc, name) as DescField).jsonName).join(",");
    }
    return ok ? { ok: true, value: out } : { ok: false };
  }

  /** One item of a list or map field (never null). */
  private item(field: DescField & { fieldKind: "list" | "map" }, v: unknown, path: string): Out {
    if (v === null) return this.bad(path, "must not be null");
    const kind = field.fieldKind === "list" ? field.listKind : field.mapKind;
    if (kind === "scalar") return this.scalar(field, field.scalar as ScalarType, v, path);
    return kind === "enum" ? this.enumValue(field.enum as DescEnum, v, path) : this.message(field.message as DescMessage, v, path);
  }

  field(field: DescField, v: unknown, path: string): Out {
    switch (field.fieldKind) {
      case "scalar":
        return this.scalar(field, field.scalar, v, path);
      case "enum":
        return this.enumValue(field.enum, v, path);
      case "message":
        return this.message(field.message, v, path);
      case "list": {
        if (!Array.isArray(v)) return this.bad(path, "must be an array");
        const items = v.map((item, i) => this.item(field, item, `${path}[${i}]`));
        return items.every((r) => r.ok) ? { ok: true, value: items.map((r) => (r as { value: JsonValue }).value) } : { ok: false };
      }
      case "map": {
        if (!isObject(v)) return this.bad(path, "must be an object");
        const out: Record<string, JsonValue> = {};
        let ok = true;
        for (const [key, item] of Object.entries(v)) {
          const p = `${path}.${keyInPath(key)}`;
          const r = wellFormed(key) ? this.item(field, item, p) : this.bad(p, `the key ${NOT_UNICODE}`);
          if (r.ok) out[key] = r.value;
          else ok = false;
        }
        return ok ? { ok: true, value: out } : { ok: false };
      }
    }
  }
}

/**
 * Checks a parsed JSON body against a request message: its proto3 JSON (empty when there are
 * violations), every field that is wrong with its path, and the per-item instants that did not read.
 */
export function checkJson(desc: DescMessage, body: unknown): { json: Record<string, JsonValue>; violations: FieldViolation[]; deferred: FieldViolation[] } {
  const w = new Walker();
  const r = w.message(desc, body, "");
  if (!r.ok && w.violations.length === 0) w.violations.push({ field: "", description: "must be a JSON object" });
  return { json: r.ok ? (r.value as Record<string, JsonValue>) : {}, violations: w.violations, deferred: w.deferred };
}

/** One JSON request message from its bytes: parseJsonBody, then checkJson (violations returned, for REST to add its own). */
export function readJsonMessage(desc: DescMessage, bytes: Uint8Array): ReturnType<typeof checkJson> {
  return checkJson(desc, parseJsonBody(bytes));
}

/** The error for field violations of a request (reason INVALID_FIELD), on every protocol. */
export function invalidFields(violations: readonly FieldViolation[]): InvalidArgumentError {
  return new InvalidArgumentError(violations, "INVALID_FIELD", violations.map((v) => `${v.field || "body"}: ${v.description}`).join("; "));
}

const TEXT_BOOL = new Map(Object.entries({ true: true, "1": true, false: false, "0": false }));

/** Converts one query-string or path value to the JSON its field expects. */
export function fromText(field: DescField, raw: string, path: string, violations: FieldViolation[]): JsonValue | undefined {
  const w = new Walker();
  const kind = field.fieldKind === "list" ? field.listKind : field.fieldKind;
  let r: Out;
  if (kind === "scalar" && field.scalar === ScalarType.BOOL) r = w.scalar(field, ScalarType.BOOL, TEXT_BOOL.get(raw) ?? raw, path);
  else if (kind === "scalar" && field.scalar !== undefined) r = w.scalar(field, field.scalar, field.scalar === ScalarType.STRING ? raw : new NumberLiteral(raw.trim()), path);
  else if (kind === "enum" && field.enum) r = w.enumValue(field.enum, raw, path);
  else r = w.message(field.message as DescMessage, raw, path);
  violations.push(...w.violations);
  return r.ok ? r.value : undefined;
}
