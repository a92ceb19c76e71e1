import type { Violations } from "./errors.js";

export type Metadata = Record<string, string>;

export const METADATA_MAX_KEYS = 50;
export const METADATA_MAX_KEY_LENGTH = 40;
export const METADATA_MAX_VALUE_LENGTH = 500;

/** Checks the limits on caller-defined metadata (the same as the largest hosted services use). */
export function checkMetadata(metadata: Metadata, v: Violations): void {
  const keys = Object.keys(metadata);
  if (keys.length > METADATA_MAX_KEYS) v.add("", `must have at most ${METADATA_MAX_KEYS} keys`);
  for (const key of keys) {
    if (key.length === 0 || key.length > METADATA_MAX_KEY_LENGTH) {
      v.add(key, `key must have 1 to ${METADATA_MAX_KEY_LENGTH} characters`);
    }
    if ((metadata[key] ?? "").length > METADATA_MAX_VALUE_LENGTH) {
      v.add(key, `value must have at most ${METADATA_MAX_VALUE_LENGTH} characters`);
    }
  }
}
