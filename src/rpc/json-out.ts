/**
 * The one writer of JSON responses, for the REST bridge (rest/gateway.ts) and for
 * JSON over Connect, gRPC and gRPC-Web (the router's per-method jsonOptions, routes.ts): protobuf-es
 * proto3 JSON (proto field names, every implicit-presence field emitted: `""`, `0`, `false`, `[]`,
 * `{}`), then
 * - `null` for every field with explicit presence (proto3 `optional`, a message field) that is not
 *   set, at every depth, where protobuf-es leaves the key out (DESIGN §4: every field is emitted,
 *   and an absent optional value is `null`, never `""`; SDK models declare these `Optional`).
 *   Proto3 JSON readers take `null` as "not set", so this is still valid proto3 JSON for Connect
 *   clients. Members of a real `oneof` stay left out when unset (the contract has none today).
 *   A field marked `(billing.v1.always_set)` is never written as null: the OpenAPI document types
 *   it non-null, so a response that leaves it out is a server bug, thrown (an internal error);
 * - on REST only, fields marked `(billing.v1.rest_number)` (invoice line `quantity`) as a JSON
 *   number token with the decimal's exact digits, never through a JS number. Proto3 JSON keeps them
 *   strings: a generated client reads a string field only from a JSON string.
 */
import { type DescField, type DescMessage, type JsonObject, type JsonValue, getOption } from "@bufbuild/protobuf";
import { hasCustomJsonRepresentation } from "@bufbuild/protobuf/wkt";
import { LosslessNumber, stringify as losslessStringify } from "lossless-json";
import { canonicalDecimal } from "../billing/money.js";
import { always_set, rest_number } from "../gen/billing/v1/options_pb.js";
import { fieldFlag } from "./json.js";

/** FeatureSet.FieldPresence.IMPLICIT: proto3 fields without `optional` (always emitted). */
const IMPLICIT = 2;
const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

interface Plan {
  /** Fields in field-number order (the order protobuf-es writes them). */
  fields: DescField[];
  /** The `(billing.v1.always_set)` fields. */
  alwaysSet: Set<DescField>;
  /** Whether anything in this message (at any depth) needs more than protobuf-es wrote. */
  needsWalk: boolean;
}

const plans = new WeakMap<DescMessage, Plan>();
const isRestNumber = fieldFlag(rest_number, (f) => f.fieldKind === "scalar");

/** Whether an unset `f` is written as null: explicit presence (a oneof member is left out). */
function nullWhenUnset(f: DescField): boolean {
  return (f.fieldKind === "scalar" || f.fieldKind === "enum" || f.fieldKind === "message") && f.presence !== IMPLICIT && f.oneof === undefined;
}

/** A message field whose JSON is its own (Timestamp, Value, Struct…): written as protobuf-es writes it. */
function opaque(desc: DescMessage): boolean {
  return hasCustomJsonRepresentation(desc);
}

function plan(desc: DescMessage, seen = new Set<DescMessage>()): Plan {
  const known = plans.get(desc);
  if (known) return known;
  const fields = [...desc.fields].sort((a, b) => a.number - b.number);
  const alwaysSet = new Set(fields.filter((f) => nullWhenUnset(f) && getOption(f, always_set)));
  // Recursive messages: assume a walk is needed while the plan is being made.
  const p: Plan = { fields, alwaysSet, needsWalk: true };
  if (seen.has(desc)) return p;
  seen.add(desc);
  let needsWalk = false;
  for (const f of fields) {
    if (isRestNumber(f)) needsWalk = true;
    if (nullWhenUnset(f)) needsWalk = true;
    const m = f.fieldKind === "message" ? f.message : f.fieldKind === "list" && f.listKind === "message" ? f.message : f.fieldKind === "map" && f.mapKind === "message" ? f.message : undefined;
    if (m && !opaque(m) && plan(m, seen).needsWalk) needsWalk = true;
  }
  p.needsWalk = needsWalk;
  plans.set(desc, p);
  return p;
}

interface Walk {
  /** Writing a REST body: `(billing.v1.rest_number)` fields become raw JSON numbers. */
  rest: boolean;
  /** Whether one did (the text then needs lossless-json's writer, stringifyRest). */
  rawNumbers: boolean;
}

function rawNumber(value: JsonValue, w: Walk): JsonValue | LosslessNumber {
  if (typeof value !== "string") return value;
  w.rawNumbers = true;
  return new LosslessNumber(JSON_NUMBER.test(value) ? value : canonicalDecimal(value));
}

function messageValue(desc: DescMessage, value: JsonValue, w: Walk): JsonValue {
  if (value === null || typeof value !== "object" || Array.isArray(value) || opaque(desc)) return value;
  return walk(desc, value, w);
}

function walk(desc: DescMessage, json: JsonObject, w: Walk): JsonObject {
  const p = plan(desc);
  if (!p.needsWalk) return json;
  const out: Record<string, unknown> = {};
  for (const f of p.fields) {
    const key = f.name;
    const value = json[key];
    if (value === undefined) {
      if (p.alwaysSet.has(f)) throw new Error(`${desc.typeName}.${key} is always set in responses, and this one leaves it out`);
      if (nullWhenUnset(f)) out[key] = null;
      continue;
    }
    switch (f.fieldKind) {
      case "scalar":
        out[key] = w.rest && isRestNumber(f) ? rawNumber(value, w) : value;
        break;
      case "message":
        out[key] = messageValue(f.message, value, w);
        break;
      case "list":
        out[key] = f.listKind === "message" && Array.isArray(value) ? value.map((x) => messageValue(f.message, x, w)) : value;
        break;
      case "map":
        if (f.mapKind === "message" && value !== null && typeof value === "object" && !Array.isArray(value)) {
          const m: Record<string, JsonValue> = {};
          for (const [k, x] of Object.entries(value)) m[k] = messageValue(f.message, x, w);
          out[key] = m;
        } else {
          out[key] = value;
        }
        break;
      default:
        out[key] = value;
    }
  }
  return out as JsonObject;
}

/**
 * Proto3 JSON written by protobuf-es's toJson (with `useProtoFieldName`) with `null` for every
 * unset explicit-presence field, for JSON over Connect, gRPC and gRPC-Web.
 */
export function withNulls(desc: DescMessage, json: JsonObject): JsonObject {
  return walk(desc, json, { rest: false, rawNumbers: false });
}

/** A REST response message: its JSON, and whether it holds raw numbers (see stringifyRest). */
export interface RestJson {
  json: JsonObject;
  rawNumbers: boolean;
}

/** A REST response message: withNulls, and `(billing.v1.rest_number)` fields as raw JSON numbers. */
export function restJson(desc: DescMessage, json: JsonObject): RestJson {
  const w: Walk = { rest: true, rawNumbers: false };
  return { json: walk(desc, json, w), rawNumbers: w.rawNumbers };
}

/**
 * The text of (part of) a REST response: raw numbers with their digits as written. lossless-json's
 * writer is slower than the native one, so only bodies holding raw numbers go through it.
 */
export function stringifyRest(value: unknown, rawNumbers: boolean): string {
  return rawNumbers ? (losslessStringify(value) as string) : JSON.stringify(value);
}

/**
 * The text encoder of a method's JSON output (connect-node 2.1.2's serializer hands it the text
 * protobuf-es wrote): the same text with its unset explicit-presence fields as `null`. Connect
 * takes one encoder per method (routes.ts), which is how it knows the output message.
 */
export function nullsEncoder(desc: DescMessage): { encode(text?: string): Uint8Array } {
  const encoder = new TextEncoder();
  if (!plan(desc).needsWalk) return encoder;
  return {
    encode(text = "") {
      const json = JSON.parse(text) as JsonValue;
      return encoder.encode(JSON.stringify(json !== null && typeof json === "object" && !Array.isArray(json) ? withNulls(desc, json) : json));
    },
  };
}
