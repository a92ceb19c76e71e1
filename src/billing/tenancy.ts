/** Who is calling: the environment (tenant) of the API key, and the key's kind. */
export type EnvironmentMode = "test" | "live";
export type KeyKind = "secret" | "publishable";

export interface Caller {
  environmentId: string;
  mode: EnvironmentMode;
  keyKind: KeyKind;
}

export interface Environment {
  id: string;
  name: string;
  mode: EnvironmentMode;
  createdAt: Date;
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
