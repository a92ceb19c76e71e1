/**
 * API keys (DESIGN §3): random, shown once, stored only as a SHA-256 hash, identified by a short
 * visible prefix. Secret keys have full access; publishable keys only reach billing state.
 */
import { createHash } from "node:crypto";
import { newId, randomBase62 } from "./ids.js";
import type { ApiKey, Caller, Environment, EnvironmentMode, KeyKind } from "./tenancy.js";

/** `sk_test_…` / `pk_live_…` followed by 32 base62 characters (about 190 random bits). */
export function generateKey(kind: KeyKind, mode: EnvironmentMode): string {
  return `${kind === "secret" ? "sk" : "pk"}_${mode}_${randomBase62(32)}`;
}

export function hashKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

/** What listings show of a key: its kind and mode and the first four random characters. */
export function keyPrefix(key: string): string {
  return key.slice(0, key.indexOf("_", 3) + 5);
}

export interface KeyWithEnvironment {
  key: ApiKey;
  environment: Environment;
}

/** Storage port for environments and keys. */
export interface AuthStore {
  findKeyByHash(hash: string): Promise<KeyWithEnvironment | undefined>;
  findEnvironmentByName(name: string): Promise<Environment | undefined>;
  /** Throws AlreadyExistsError when the name is taken. */
  insertEnvironment(env: Environment): Promise<void>;
  listEnvironments(): Promise<Environment[]>;
  /** Sets (a number; 0 is unlimited) or clears (null) an environment's rate-limit overrides; undefined leaves one as it is. False: no such environment. */
  setEnvironmentRateLimits(id: string, limits: { ingestRps?: number | null; apiRps?: number | null }): Promise<boolean>;
  /** Throws AlreadyExistsError when a key with the same hash exists. */
  insertKey(key: ApiKey, hash: string): Promise<void>;
  listKeys(environmentId?: string): Promise<ApiKey[]>;
  /** Sets revoked_at on a key not yet revoked; false when there is no such key. */
  revokeKey(id: string, at: Date): Promise<boolean>;
}

/** Stores a key for an environment: only its hash and its display prefix. Returns the record's ID. */
export async function storeKey(store: AuthStore, environmentId: string, kind: KeyKind, key: string, now: Date, revoked = false): Promise<string> {
  const id = newId("key");
  await store.insertKey({ id, environmentId, kind, prefix: keyPrefix(key), createdAt: now, revokedAt: revoked ? now : null }, hashKey(key));
  return id;
}

export function callerOf(found: KeyWithEnvironment): Caller {
  return { environmentId: found.environment.id, mode: found.environment.mode, keyKind: found.key.kind };
}
