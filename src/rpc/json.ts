/**
 * The one reader of JSON requests, for the REST bridge (src/rest/gateway.ts) and for JSON over
 * Connect, gRPC and gRPC-Web (src/rpc/messages.ts), so that the same input gets the same error
 * (code, reason, field paths) on every protocol. Each message is checked against the contract
 * before a handler sees it:
 * - numbers are parsed without loss (a JSON number sent to a decimal field keeps every digit);
 * - every value is checked against its field's type, and each mismatch is reported with its
 *   path (`usage_based_rates[1].price.amount.value: must be a string or a number`);
 * - a JSON number is accepted for fields marked `(billing.v1.decimal)`, as the spec allows;
 * - query-string values are converted by the field's type (`limit=abc` is a 400, `true` is a bool);
 * - unknown fields are ignored; null means "not set" (DESIGN §4: absent);
 * - a Timestamp is read strictly by the service's one parser (src/billing/time.ts; protobuf-es's
 *   own reader rolls 2026-02-30 over to 2 March) and handed on as canonical UTC text; one marked
 *   `(billing.v1.per_item_instant)` that does not read is left out and reported apart
 *   (`deferred`), for the method to reject the one event holding it;
 * - a message with an `update_mask` the body leaves out gets the body's keys as its mask, null
 *   ones included: `{"email": null}` in an update names `email` and leaves it unset, which clears it
 *   (the field becomes absent, as null says), while a key left out leaves the field unchanged.
 * The result is plain proto3 JSON, which fromJson then reads.
 */
import { type DescEnum, type DescField, type DescMessage, type JsonValue, type Message, ScalarType, getOption } from "@bufbuild/protobuf";
import { parse as parseLossless } from "lossless-json";
import { type FieldViolation, InvalidArgumentError } from "../billing/errors.js";
import { FORMAT_PROBLEM, parseInstant } from "../billing/time.js";
import { decimal, per_item_instant } from "../gen/billing/v1/options_pb.js";
import { NOT_UNICODE, notUtf8, strictUtf8 } from "./unicode.js";

/** A JSON number as written, digit for digit. */
class NumberLiteral {
  constructor(readonly text: string) {}
}

export class JsonSyntaxError extends Error {}

/** A JSON number token (RFC 8259 grammar), outside strings. */
const NUMBER_TOKEN = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/g;
/** The key of the one-key object a number token is wrapped in before JSON.parse (see parseJson). */
const NUMBER_KEY = "\u0000#";
const NUMBER_TEXT = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/** Up to this many characters, malformed JSON is re-read to say where it is wrong. */
const SMALL_JSON = 64 * 1024;

/** The index just past the string that opens at `start` (a quote), or -1 when it never closes. */
function stringEnd(text: string, start: number): number {
  let k = start + 1;
  for (;;) {
    k = text.indexOf('"', k);
    if (k < 0) return -1;
    let slashes = 0;
    while (text.charCodeAt(k - 1 - slashes) === 92) slashes++;
    if (slashes % 2 === 0) return k + 1;
    k++;
  }
}

/** Whether a digit or minus sign (a number token's start) occurs outside strings; true for a string that never closes. */
function hasNumberOutsideStrings(text: string): boolean {
  let i = 0;
  for (;;) {
    const q = text.indexOf('"', i);
    const stop = q < 0 ? text.length : q;
    for (let k = i; k < stop; k++) {
      const c = text.charCodeAt(k);
      if ((c >= 48 && c <= 57) || c === 45) return true;
    }
    if (q < 0) return false;
    const end = stringEnd(text, q);
    if (end < 0) return true;
    i = end;
  }
}

/**
 * Parses JSON text keeping numbers as their literal text. Throws JsonSyntaxError.
 * The native parser does the work: every number token outside strings is first rewritten as a
 * one-key object `{"\u0000#":"<literal>"}`, which the reviver turns into a NumberLiteral (an
 * object a client writes that way is read as that number, which it could have sent as such).
 * lossless-json, used before, built each string a character at a time: one 1 MB batch held about
 * 30 MB of heap while parsed, and a few at once exhausted the 192 MB heap. Duplicate keys: the
 * last one wins, as with JSON.parse. On malformed text lossless-json reports where the error is.
 */
export function parseJson(text: string): unknown {
  // Most bodies (a batch of events, whose values are strings) hold no number at all: the native
  // parser alone reads them, without the rewriting and the reviver (an object keyed "\u0000#"
  // written by the client still goes the long way, to be read as the number it spells).
  if (!hasNumberOutsideStrings(text) && !text.includes("\\u0000")) {
    try {
      return JSON.parse(text);
    } catch {
      // malformed: the long way says where
    }
  }
  const parts: string[] = [];
  let i = 0;
  while (i < text.length) {
    const q = text.indexOf('"', i);
    const outside = q < 0 ? text.slice(i) : text.slice(i, q);
    parts.push(outside.replace(NUMBER_TOKEN, (n) => `{"\\u0000#":"${n}"}`)); // NUMBER_KEY, escaped as JSON
    if (q < 0) break;
    const end = stringEnd(text, q);
    if (end < 0) {
      parts.push(text.slice(q));
      break;
    }
    parts.push(text.slice(q, end));
    i = end;
  }
  try {
    return JSON.parse(parts.join(""), (_key, value: unknown) => {
      if (value === null || typeof value !== "object" || !(NUMBER_KEY in value)) return value;
      const literal = (value as Record<string, unknown>)[NUMBER_KEY];
      return typeof literal === "string" && NUMBER_TEXT.test(literal) && Object.keys(value).length === 1 ? new NumberLiteral(literal) : value;
    });
  } catch {
    // Where the text is wrong, in the client's own positions: lossless-json says it, but only
    // for small bodies (it is the slow, heap-hungry parser this one replaced; a large batch that
    // is wrong near its end would hold the event loop and the heap for seconds).
    if (text.length <= SMALL_JSON) {
      try {
        parseLossless(text);
      } catch (err) {
        throw new JsonSyntaxError(err instanceof Error ? err.message : String(err));
      }
    }
    throw new JsonSyntaxError("invalid JSON");
  }
}

const decimalCache = new WeakMap<DescField, boolean>();
function isDecimal(field: DescField): boolean {
  let v = decimalCache.get(field);
  if (v === undefined) {
    v = getOption(field, decimal);
    decimalCache.set(field, v);
  }
  return v;
}

function fieldIndex(desc: DescMessage): Map<string, DescField> {
  const m = new Map<string, DescField>();
  for (const f of desc.fields) {
    m.set(f.name, f);
    m.set(f.jsonName, f);
  }
  return m;
}
const indexCache = new WeakMap<DescMessage, Map<string, DescField>>();
export function findField(desc: DescMessage, name: string): DescField | undefined {
  let idx = indexCache.get(desc);
  if (!idx) {
    idx = fieldIndex(desc);
    indexCache.set(desc, idx);
  }
  return idx.get(name);
}

const INT32 = new Set([ScalarType.INT32, ScalarType.SINT32, ScalarType.SFIXED32]);
const UINT32 = new Set([ScalarType.UINT32, ScalarType.FIXED32]);
const INT64 = new Set([ScalarType.INT64, ScalarType.SINT64, ScalarType.SFIXED64, ScalarType.UINT64, ScalarType.FIXED64]);
const FLOAT = new Set([ScalarType.DOUBLE, ScalarType.FLOAT]);

type Out = { ok: true; value: JsonValue } | { ok: false };

/** A JSON string can escape half of a UTF-16 pair; such text has no UTF-8 form to store. */
const wellFormed = (text: string) => (text as unknown as { isWellFormed(): boolean }).isWellFormed();

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
/**
 * A key in a field path: a key holding a lone surrogate is spelled with the JSON escape the client
 * wrote (`metadata.k\udc00`, as text), since the path itself travels as UTF-8 (in a
 * google.rpc.BadRequest) and must read the same on every protocol.
 */
const keyInPath = (key: string) => (wellFormed(key) ? key : key.replace(LONE_SURROGATE, (c) => `\\u${c.charCodeAt(0).toString(16)}`));

const perItemCache = new WeakMap<DescField, boolean>();
function isPerItemInstant(field: DescField): boolean {
  let v = perItemCache.get(field);
  if (v === undefined) {
    v = field.fieldKind === "message" && field.message.typeName === "google.protobuf.Timestamp" && getOption(field, per_item_instant);
    perItemCache.set(field, v);
  }
  return v;
}

/** A FieldMask path as JSON writes it (lowerCamelCase); snake_case is read too. */
const MASK_PATH = /^[a-z][a-zA-Z0-9]*(?:_[a-z0-9][a-zA-Z0-9]*)*(?:\.[a-z][a-zA-Z0-9]*(?:_[a-z0-9][a-zA-Z0-9]*)*)*$/;
const camel = (path: string) => path.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());

class Walker {
  readonly violations: FieldViolation[] = [];
  /** Per-item instants that did not read: left out of the JSON, for the method to reject their item. */
  readonly deferred: FieldViolation[] = [];
  private bad(path: string, description: string): Out {
    this.violations.push({ field: path, description });
    return { ok: false };
  }

  /** The path of the first string or key in plain JSON that is not valid Unicode, if any. */
  private malformedAt(v: unknown, path: string): string | undefined {
    if (typeof v === "string") return wellFormed(v) ? undefined : path;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const at = this.malformedAt(v[i], `${path}[${i}]`);
        if (at !== undefined) return at;
      }
      return undefined;
    }
    if (v !== null && typeof v === "object" && !(v instanceof NumberLiteral)) {
      for (const [k, x] of Object.entries(v)) {
        const at = wellFormed(k) ? this.malformedAt(x, `${path}.${k}`) : `${path}.${keyInPath(k)}`;
        if (at !== undefined) return at;
      }
    }
    return undefined;
  }

  /** Plain JSON for a google.protobuf.Struct/Value/ListValue, checked for lone surrogates. */
  private plainChecked(v: unknown, path: string): Out {
    const at = this.malformedAt(v, path);
    return at === undefined ? { ok: true, value: this.plain(v) } : this.bad(at, NOT_UNICODE);
  }

  /** Plain JSON for a google.protobuf.Struct/Value: numbers become JS numbers. */
  private plain(v: unknown): JsonValue {
    if (v instanceof NumberLiteral) return Number(v.text);
    if (Array.isArray(v)) return v.map((x) => this.plain(x));
    if (v !== null && typeof v === "object") {
      const o: Record<string, JsonValue> = {};
      for (const [k, x] of Object.entries(v)) o[k] = this.plain(x);
      return o;
    }
    return v as JsonValue;
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
        if (v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof NumberLiteral)) return this.plainChecked(v, path);
        return this.bad(path, "must be an object");
      case "google.protobuf.Value":
        return this.plainChecked(v, path);
      case "google.protobuf.ListValue":
        if (Array.isArray(v)) return this.plainChecked(v, path);
        return this.bad(path, "must be an array");
    }
    if (v === null || typeof v !== "object" || Array.isArray(v) || v instanceof NumberLiteral) {
      return this.bad(path, "must be an object");
    }
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
        const out: JsonValue[] = [];
        let ok = true;
        v.forEach((item, i) => {
          const p = `${path}[${i}]`;
          const r =
            item === null
              ? this.bad(p, "must not be null")
              : field.listKind === "scalar"
                ? this.scalar(field, field.scalar, item, p)
                : field.listKind === "enum"
                  ? this.enumValue(field.enum, item, p)
                  : this.message(field.message, item, p);
          if (r.ok) out.push(r.value);
          else ok = false;
        });
        return ok ? { ok: true, value: out } : { ok: false };
      }
      case "map": {
        if (v === null || typeof v !== "object" || Array.isArray(v) || v instanceof NumberLiteral) return this.bad(path, "must be an object");
        const out: Record<string, JsonValue> = {};
        let ok = true;
        for (const [key, item] of Object.entries(v)) {
          const p = `${path}.${keyInPath(key)}`;
          const r = !wellFormed(key)
            ? this.bad(p, `the key ${NOT_UNICODE}`)
            : item === null
              ? this.bad(p, "must not be null")
              : field.mapKind === "scalar"
                ? this.scalar(field, field.scalar, item, p)
                : field.mapKind === "enum"
                  ? this.enumValue(field.enum, item, p)
                  : this.message(field.message, item, p);
          if (r.ok) out[key] = r.value;
          else ok = false;
        }
        return ok ? { ok: true, value: out } : { ok: false };
      }
    }
  }
}

export interface CheckedJson {
  /** The message as proto3 JSON (empty when there are violations). */
  json: Record<string, JsonValue>;
  /** Every field that is wrong, with its path (`usage_based_rates[1].price.amount.value`). */
  violations: FieldViolation[];
  /** Per-item instants that did not read (left out of `json`): the method rejects their item. */
  deferred: FieldViolation[];
}

/** Checks a parsed JSON body against a request message; returns proto3 JSON or the violations. */
export function checkJson(desc: DescMessage, body: unknown): CheckedJson {
  const w = new Walker();
  const r = w.message(desc, body, "");
  if (!r.ok && w.violations.length === 0) w.violations.push({ field: "", description: "must be a JSON object" });
  return { json: r.ok ? (r.value as Record<string, JsonValue>) : {}, violations: w.violations, deferred: w.deferred };
}

/**
 * One JSON request message from its bytes: strict UTF-8 (else INVALID_UTF8), JSON (else
 * MALFORMED_JSON), then checkJson; an empty body is `{}`. Throws those two as InvalidArgumentError;
 * the field violations are returned, for the caller to add its own (REST: path and query).
 */
export function readJsonMessage(desc: DescMessage, bytes: Uint8Array): CheckedJson {
  const parsed = parseJsonBody(bytes);
  return checkJson(desc, parsed === EMPTY ? {} : parsed);
}

/**
 * readJsonMessage for a caller that can wait: a large body lets the event loop turn between being
 * parsed and being checked (a 1 MB batch takes about 15 ms to parse and 8 ms to check), so that no
 * request holds the server's one thread for long.
 */
export async function readJsonMessageAsync(
  desc: DescMessage,
  bytes: Uint8Array,
  turn: () => Promise<void>,
  largeBytes: number,
  fast?: (parsed: unknown) => Message | undefined,
): Promise<CheckedJson & { message?: Message }> {
  // A large body is parsed in a turn of its own: several that arrive together would otherwise be
  // parsed one after the other in the same turn.
  if (bytes.byteLength >= largeBytes) await turn();
  const parsed = parseJsonBody(bytes);
  if (bytes.byteLength >= largeBytes) await turn();
  // A body the method's fast reader takes whole (rpc/convert) is its message already; any other
  // goes the general way, which names what is wrong.
  const message = fast && parsed !== EMPTY ? fast(parsed) : undefined;
  if (message) return { json: {}, violations: [], deferred: [], message };
  return checkJson(desc, parsed === EMPTY ? {} : parsed);
}

const EMPTY = Symbol("empty body");

/** A JSON body's bytes read strictly (UTF-8, syntax), numbers kept as written; EMPTY for blank text. */
function parseJsonBody(bytes: Uint8Array): unknown {
  const text = strictUtf8(bytes);
  if (text === undefined) throw notUtf8();
  if (text.trim() === "") return EMPTY;
  try {
    return parseJson(text);
  } catch (err) {
    if (!(err instanceof JsonSyntaxError)) throw err;
    throw new InvalidArgumentError([{ field: "", description: `not valid JSON: ${err.message}` }], "MALFORMED_JSON", `the request body is not valid JSON: ${err.message}`);
  }
}

/** The error for field violations of a request (reason INVALID_FIELD), on every protocol. */
export function invalidFields(violations: readonly FieldViolation[]): InvalidArgumentError {
  return new InvalidArgumentError(violations, "INVALID_FIELD", violations.map((v) => `${v.field || "body"}: ${v.description}`).join("; "));
}

/** Converts one query-string or path value to the JSON its field expects. */
export function fromText(field: DescField, raw: string, path: string, violations: FieldViolation[]): JsonValue | undefined {
  const w = new Walker();
  const kind = field.fieldKind === "list" ? field.listKind : field.fieldKind;
  let r: Out;
  if (kind === "scalar" && field.scalar === ScalarType.BOOL) {
    r = raw === "true" || raw === "1" ? { ok: true, value: true } : raw === "false" || raw === "0" ? { ok: true, value: false } : { ok: false };
    if (!r.ok) violations.push({ field: path, description: "must be true or false" });
    return r.ok ? r.value : undefined;
  }
  if (kind === "scalar" && field.scalar !== undefined) r = w.scalar(field, field.scalar, field.scalar === ScalarType.STRING ? raw : new NumberLiteral(raw.trim()), path);
  else if (kind === "enum" && field.enum) r = w.enumValue(field.enum, raw, path);
  else r = w.message(field.message as DescMessage, raw, path);
  violations.push(...w.violations);
  return r.ok ? r.value : undefined;
}
