import { AlreadyExistsError } from "./errors.js";
import { newId } from "./ids.js";
import { type AuthStore, hashKey, storeKey } from "./keys.js";
import type { Environment, EnvironmentMode } from "./tenancy.js";

export const DEFAULT_ENVIRONMENT = "default";

/** The named environment, created with `mode` if missing (safe when several servers start at once). */
export async function ensureEnvironment(store: AuthStore, name: string, mode: EnvironmentMode, now: Date): Promise<Environment> {
  const existing = await store.findEnvironmentByName(name);
  if (existing) return existing;
  try {
    await store.insertEnvironment({ id: newId("env"), name, mode, createdAt: now });
  } catch (err) {
    if (!(err instanceof AlreadyExistsError)) throw err;
  }
  const env = await store.findEnvironmentByName(name);
  if (!env) throw new Error(`environment ${name} vanished`);
  return env;
}

/**
 * Makes sure the configured bootstrap secret key exists, in the default environment. A key that
 * exists already (created by another server, or earlier) is left as it is, revoked or not.
 */
export async function ensureBootstrapKey(store: AuthStore, key: string, mode: EnvironmentMode, now: Date): Promise<void> {
  if (await store.findKeyByHash(hashKey(key))) return;
  const env = await ensureEnvironment(store, DEFAULT_ENVIRONMENT, mode, now);
  try {
    await storeKey(store, env.id, "secret", key, now);
  } catch (err) {
    if (!(err instanceof AlreadyExistsError)) throw err;
  }
}
