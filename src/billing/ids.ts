import { randomBytes } from "node:crypto";

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** `n` base62 characters from the OS CSPRNG (rejection sampling, so every character is uniform). */
export function randomBase62(n: number): string {
  let out = "";
  while (out.length < n) {
    for (const b of randomBytes(n * 2)) {
      if (b < 248) out += ALPHABET[b % 62];
      if (out.length === n) break;
    }
  }
  return out;
}

/** Type prefixes of every resource ID (DESIGN §4). */
export type IdPrefix = "subj" | "env" | "key" | "rc" | "rate" | "pm" | "rcat" | "sub" | "stl" | "inv" | "ue";

/** An opaque ID: prefix, underscore, 22 base62 characters (about 131 random bits). */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBase62(22)}`;
}
