/**
 * Provider secrets sealed at rest (DESIGN §16): AES-256-GCM under the server's
 * SECRETS_ENCRYPTION_KEY, a random 96-bit nonce per seal. The sealed text names the key that
 * sealed it (`v1.<key id>.<nonce>.<ciphertext+tag>`, base64url parts; the key id is the first 8
 * hex digits of the key's SHA-256), so that after a rotation the previous key
 * (SECRETS_ENCRYPTION_KEY_PREVIOUS) still opens what it sealed until `billing secrets rotate`
 * re-seals it. Pure: node:crypto only.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";

/** The keys secrets are sealed with: `current` seals and opens; `previous` only opens. */
export interface SecretKeys {
  current: Buffer;
  previous?: Buffer;
}

const VERSION = "v1";
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** Why a sealed text does not open: malformed, sealed by a key this server does not have, or altered. */
export class SecretOpenError extends Error {}

/** The key's id in sealed texts: the first 8 hex digits of its SHA-256 (it reveals nothing of the key). */
export function keyId(key: Buffer): string {
  return createHash("sha256").update(key).digest("hex").slice(0, 8);
}

function checkKey(key: Buffer): void {
  if (key.length !== 32) throw new Error("a secrets key is 32 bytes");
}

/** Seals `secret` with `key`: a fresh nonce each time, so two seals of one secret differ. */
export function seal(secret: string, key: Buffer): string {
  checkKey(key);
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv("aes-256-gcm", key, nonce);
  const body = Buffer.concat([cipher.update(secret, "utf8"), cipher.final(), cipher.getAuthTag()]);
  return [VERSION, keyId(key), nonce.toString("base64url"), body.toString("base64url")].join(".");
}

/** The id of the key that sealed `sealed`, or undefined when it is not a sealed text. */
export function sealedKeyId(sealed: string): string | undefined {
  const parts = sealed.split(".");
  return parts.length === 4 && parts[0] === VERSION ? parts[1] : undefined;
}

/** Opens `sealed` with whichever of `keys` sealed it; a SecretOpenError when none did or it was altered. */
export function open(sealed: string, keys: SecretKeys): string {
  const parts = sealed.split(".");
  if (parts.length !== 4 || parts[0] !== VERSION) throw new SecretOpenError("not a sealed secret");
  const [, id, nonceText, bodyText] = parts as [string, string, string, string];
  const key = [keys.current, keys.previous].find((k): k is Buffer => k !== undefined && keyId(k) === id);
  if (!key) throw new SecretOpenError(`sealed with key ${id}, which is neither SECRETS_ENCRYPTION_KEY nor SECRETS_ENCRYPTION_KEY_PREVIOUS`);
  checkKey(key);
  const nonce = Buffer.from(nonceText, "base64url");
  const body = Buffer.from(bodyText, "base64url");
  if (nonce.length !== NONCE_BYTES || body.length < TAG_BYTES) throw new SecretOpenError("not a sealed secret");
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, nonce);
    decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
    return Buffer.concat([decipher.update(body.subarray(0, body.length - TAG_BYTES)), decipher.final()]).toString("utf8");
  } catch {
    throw new SecretOpenError(`the sealed secret does not open with key ${id}: it was altered`);
  }
}

/** Whether `sealed` was sealed with another key than the current one (a rotation re-seals it). */
export function needsReseal(sealed: string, keys: SecretKeys): boolean {
  return sealedKeyId(sealed) !== keyId(keys.current);
}

/**
 * A secrets key from its configured text: 32 bytes as 64 hex digits or base64 (standard or url);
 * undefined when it is neither (the message never shows the value).
 */
export function parseSecretsKey(text: string): Buffer | undefined {
  const t = text.trim();
  if (/^[0-9A-Fa-f]{64}$/.test(t)) return Buffer.from(t, "hex");
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(t)) return undefined;
  const b = Buffer.from(t.replace(/-/g, "+").replace(/_/g, "/"), "base64");
  return b.length === 32 ? b : undefined;
}
