import { createHash, randomBytes } from "node:crypto";

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

// Random bytes are drawn from the OS CSPRNG 4 KiB at a time, not one system call per ID.
let pool = Buffer.alloc(0);
let at = 0;
function randomByte(): number {
  if (at >= pool.length) {
    pool = randomBytes(4096);
    at = 0;
  }
  return pool[at++] as number;
}

/** `n` base62 characters from the OS CSPRNG (rejection sampling, so every character is uniform). */
export function randomBase62(n: number): string {
  let out = "";
  while (out.length < n) {
    const b = randomByte();
    if (b < 248) out += ALPHABET[b % 62];
  }
  return out;
}

/**
 * 22 base62 characters derived from `text` (SHA-256, the same rejection of bytes ≥ 248 as
 * randomBase62, padded with "0" in the rare case the digest runs out): the part of an ID that a
 * retry must find again (a keyed purchase's, a credit note's).
 */
export function derivedBase62(text: string): string {
  let out = "";
  for (const b of createHash("sha256").update(text).digest()) if (b < 248 && out.length < 22) out += ALPHABET[b % 62];
  return out.padEnd(22, "0");
}

/** Type prefixes of every resource ID (DESIGN §4). */
export type IdPrefix =
  | "subj"
  | "env"
  | "key"
  | "rc"
  | "rate"
  | "pm"
  | "rcat"
  | "sub"
  | "stl"
  | "sti"
  | "inv"
  | "ue"
  | "cs"
  | "cps"
  | "clk"
  | "pm_card"
  | "evt"
  | "we"
  | "whd"
  | "wha"
  | "ds"
  | "cpn"
  | "di"
  | "cg"
  | "cle"
  | "txr";

/** An opaque ID: prefix, underscore, 22 base62 characters (about 131 random bits). */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBase62(22)}`;
}
