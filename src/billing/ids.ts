import { randomBytes } from "node:crypto";

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
