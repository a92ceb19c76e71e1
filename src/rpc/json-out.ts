/**
 * The one writer of JSON responses, for the REST bridge (rest/gateway.ts) and for JSON over
 * Connect, gRPC and gRPC-Web (the router's per-method jsonOptions, routes.ts): protobuf-es proto3
 * JSON (proto field names, every implicit-presence field emitted), then
 * - `null` for every unset field with explicit presence (proto3 `optional`, a message field), at
 *   every depth, where protobuf-es leaves the key out (DESIGN §4: every field is emitted, an absent
 *   optional value is `null`; SDK models declare these `Optional`). Proto3 JSON readers take `null`
 *   as "not set". Members of a real `oneof` stay left out (the contract has none today). A field
 *   marked `(billing.v1.always_set)` left out is a server bug, thrown: OpenAPI types it non-null;
 * - on REST only, `(billing.v1.rest_number)` fields (invoice line `quantity`) as a JSON number token
 *   with the decimal's exact digits, never through a JS number (proto3 JSON keeps them strings).
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

/** Per message: its fields in field-number order (as protobuf-es writes them), the always-set ones, and whether anything at any depth needs more than protobuf-es wrote. */
interface Plan {
  fields: DescField[];
  alwaysSet: Set<DescField>;
  needsWalk: boolean;
}

const plans = new WeakMap<DescMessage, Plan>();
const isRestNumber = fieldFlag(rest_number, (f) => f.fieldKind === "scalar");

/** Whether an unset `f` is written as null: explicit presence (a oneof member is left out). */
function nullWhenUnset(f: DescField): boolean {
  return (f.fieldKind === "scalar" || f.fieldKind === "enum" || f.fieldKind === "message") && f.presence !== IMPLICIT && f.oneof === undefined;
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
  // A message field whose JSON is its own (Timestamp, Value, Struct…) is written as protobuf-es writes it.
  p.needsWalk = fields.some((f) => isRestNumber(f) || nullWhenUnset(f) || (f.message && !hasCustomJsonRepresentation(f.message) && plan(f.message, seen).needsWalk));
  plans.set(desc, p);
  return p;
}

/** `rest`: writing a REST body, where `(billing.v1.rest_number)` fields become raw JSON numbers; `rawNumbers`: whether one did. */
interface Walk {
  rest: boolean;
  rawNumbers: boolean;
}

function rawNumber(value: JsonValue, w: Walk): JsonValue | LosslessNumber {
  if (typeof value !== "string") return value;
  w.rawNumbers = true;
  return new LosslessNumber(JSON_NUMBER.test(value) ? value : canonicalDecimal(value));
}

function messageValue(desc: DescMessage, value: JsonValue, w: Walk): JsonValue {
  if (value === null || typeof value !== "object" || Array.isArray(value) || hasCustomJsonRepresentation(desc)) return value;
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
    const m = f.message;
    if (f.fieldKind === "scalar") out[key] = w.rest && isRestNumber(f) ? rawNumber(value, w) : value;
    else if (!m) out[key] = value;
    else if (f.fieldKind === "message") out[key] = messageValue(m, value, w);
    else if (f.fieldKind === "list") out[key] = Array.isArray(value) ? value.map((x) => messageValue(m, x, w)) : value;
    else out[key] = value !== null && typeof value === "object" && !Array.isArray(value) ? Object.fromEntries(Object.entries(value).map(([k, x]) => [k, messageValue(m, x, w)])) : value;
  }
  return out as JsonObject;
}

/** Proto3 JSON written by protobuf-es's toJson (with `useProtoFieldName`), with `null` for every unset explicit-presence field. */
export function withNulls(desc: DescMessage, json: JsonObject): JsonObject {
  return walk(desc, json, { rest: false, rawNumbers: false });
}

/** A REST response message: withNulls, and `(billing.v1.rest_number)` fields as raw JSON numbers (`rawNumbers`: whether it holds any, see stringifyRest). */
export function restJson(desc: DescMessage, json: JsonObject): { json: JsonObject; rawNumbers: boolean } {
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
 * protobuf-es wrote), with unset explicit-presence fields as `null`. Connect takes one encoder per
 * method (routes.ts), which is how it knows the output message.
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
