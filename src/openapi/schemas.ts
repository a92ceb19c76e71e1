/**
 * JSON Schemas of the contract's messages and fields, as the JSON writer and reader treat them
 * (DESIGN §4): what the server writes (output) and what it reads (input), and the text form of a
 * path or query value.
 */
import { type DescField, type DescMessage, ScalarType, getOption } from "@bufbuild/protobuf";
import { FeatureSet_FieldPresence } from "@bufbuild/protobuf/wkt";
import { always_set, decimal, rest_number } from "../gen/billing/v1/options_pb.js";
import type { Comments, Schema } from "./types.js";

/** A decimal as the service writes it: digits, an optional fraction, no exponent. */
export const DECIMAL_PATTERN = "^-?[0-9]+(\\.[0-9]+)?$";
const INT_PATTERN = "^-?[0-9]+$";

const INT32 = new Set([ScalarType.INT32, ScalarType.SINT32, ScalarType.SFIXED32]);
const UINT32 = new Set([ScalarType.UINT32, ScalarType.FIXED32]);
const INT64 = new Set([ScalarType.INT64, ScalarType.SINT64, ScalarType.SFIXED64, ScalarType.UINT64, ScalarType.FIXED64]);

export type Mode = "output" | "input";

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
export class Schemas {
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
export function queryable(field: DescField): boolean {
  if (field.fieldKind === "scalar" || field.fieldKind === "enum") return true;
  if (field.fieldKind === "list") return field.listKind !== "message";
  if (field.fieldKind === "message")
    return ["google.protobuf.Timestamp", "google.protobuf.Duration", "google.protobuf.FieldMask"].includes(field.message.typeName) || field.message.typeName in WRAPPERS;
  return false;
}

/** The schema of a path or query value: as the bridge reads text (rpc/json.ts fromText). */
export function textSchema(field: DescField, schemas: Schemas): Schema {
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
