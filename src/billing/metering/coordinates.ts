/** The hash that names a combination of dimension values in the totals and distinct values' keys. */
import { hash } from "node:crypto";
import { coordinatesKey } from "../catalog/rates.js";

/**
 * Recent coordinates' hashes: a metric's events repeat a few combinations over and over. Only
 * short combinations are kept (at most 10,000 of up to 256 characters, about 5 MB), since
 * dimension values may be long and come from callers.
 */
const coordinateHashes = new Map<string, string>();
const CACHED_KEY_CHARS = 256;

export function hashCoordinates(dims: Record<string, string>): string {
  const key = coordinatesKey(dims);
  let h = coordinateHashes.get(key);
  if (h === undefined) {
    h = hash("sha256", key, "hex");
    if (key.length <= CACHED_KEY_CHARS) {
      if (coordinateHashes.size >= 10_000) coordinateHashes.clear();
      coordinateHashes.set(key, h);
    }
  }
  return h;
}
