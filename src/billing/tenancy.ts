/** Who is calling: the environment (tenant) of the API key, and the key's kind. */
export type EnvironmentMode = "test" | "live";
export type KeyKind = "secret" | "publishable";

export interface Caller {
  environmentId: string;
  mode: EnvironmentMode;
  keyKind: KeyKind;
}

/**
 * The caller for work the service does on an environment's behalf (hosted checkouts, the
 * scheduler): scoped to the environment like any call. Give the environment's real `mode` where
 * anything mode-dependent (the payment provider) may be decided; the scheduler's paths read only
 * `environmentId`.
 */
export function systemCaller(environmentId: string, mode: EnvironmentMode = "test"): Caller {
  return { environmentId, mode, keyKind: "secret" };
}

export interface Environment {
  id: string;
  name: string;
  mode: EnvironmentMode;
  createdAt: Date;
  /** Per-key rate limits of the environment's keys (requests a second); null or unset: the server's default, 0: unlimited. */
  ingestRps?: number | null;
  apiRps?: number | null;
}

export interface ApiKey {
  id: string;
  environmentId: string;
  kind: KeyKind;
  /** The first characters of the key, shown in listings to tell keys apart. */
  prefix: string;
  createdAt: Date;
  revokedAt: Date | null;
}
