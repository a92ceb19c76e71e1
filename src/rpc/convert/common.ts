/** Wire ⇄ domain helpers shared by every converter. */
import { type Timestamp, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { JsonObject } from "@bufbuild/protobuf";
import type { Violations } from "../../billing/errors.js";

export function ts(date: Date): Timestamp {
  return timestampFromDate(date);
}

/** A google.protobuf.Struct used as `map<string,string>` with presence: every value must be a string. */
export function stringMapFromStruct(obj: JsonObject, v: Violations): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(obj)) {
    if (typeof value === "string") out[key] = value;
    else v.add(key, "must be a string");
  }
  return out;
}
