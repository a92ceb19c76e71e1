import { AlreadyExistsError } from "../../billing/errors.js";
import type { AuthStore, KeyWithEnvironment } from "../../billing/keys.js";
import type { ApiKey, Environment, EnvironmentMode, KeyKind } from "../../billing/tenancy.js";
import type { ApiKeyRow, Entities, EnvironmentRow } from "../entities/index.js";
import { isUniqueViolation } from "../errors.js";
import { fromDbTime, fromDbTimeOrNull } from "../raw.js";
import type { Sql } from "../sql.js";

function toEnvironment(r: EnvironmentRow): Environment {
  return { id: r.id, name: r.name, mode: r.mode as EnvironmentMode, createdAt: r.created_at };
}

function toKey(r: ApiKeyRow): ApiKey {
  return {
    id: r.id,
    environmentId: r.environment_id,
    kind: r.kind as KeyKind,
    prefix: r.prefix,
    createdAt: r.created_at,
    revokedAt: r.revoked_at,
  };
}

export class SqlAuthStore implements AuthStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
  ) {}

  async findKeyByHash(hash: string): Promise<KeyWithEnvironment | undefined> {
    // Plain SQL, one round trip: this runs on every authenticated call.
    const rows: (ApiKeyRow & { env_name: string; env_mode: string; env_created_at: unknown })[] = await this.sql.query(
      "SELECT k.id, k.environment_id, k.kind, k.prefix, k.created_at, k.revoked_at, e.name AS env_name, e.mode AS env_mode, e.created_at AS env_created_at FROM api_keys k JOIN environments e ON e.id = k.environment_id WHERE k.key_hash = ?",
      [hash],
    );
    const r = rows[0];
    if (!r) return undefined;
    return {
      key: toKey({ ...r, created_at: fromDbTime(r.created_at), revoked_at: fromDbTimeOrNull(r.revoked_at) }),
      environment: toEnvironment({ id: r.environment_id, name: r.env_name, mode: r.env_mode, created_at: fromDbTime(r.env_created_at) }),
    };
  }

  async findEnvironmentByName(name: string): Promise<Environment | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.entities.Environment, { name }));
    return r ? toEnvironment(r) : undefined;
  }

  async insertEnvironment(env: Environment): Promise<void> {
    try {
      await this.sql.run((em) => em.insert(this.entities.Environment, { id: env.id, name: env.name, mode: env.mode, created_at: env.createdAt }));
    } catch (err) {
      if (isUniqueViolation(err)) throw new AlreadyExistsError("ENVIRONMENT_EXISTS", `environment ${env.name} already exists`);
      throw err;
    }
  }

  async listEnvironments(): Promise<Environment[]> {
    return (await this.sql.run((em) => em.find(this.entities.Environment, { order: { created_at: "ASC", id: "ASC" } }))).map(toEnvironment);
  }

  async insertKey(key: ApiKey, hash: string): Promise<void> {
    try {
      await this.sql.run((em) =>
        em.insert(this.entities.ApiKey, {
          id: key.id,
          environment_id: key.environmentId,
          kind: key.kind,
          prefix: key.prefix,
          key_hash: hash,
          created_at: key.createdAt,
          revoked_at: key.revokedAt,
        }),
      );
    } catch (err) {
      if (isUniqueViolation(err)) throw new AlreadyExistsError("API_KEY_EXISTS", "this API key already exists");
      throw err;
    }
  }

  async listKeys(environmentId?: string): Promise<ApiKey[]> {
    const rows = await this.sql.run((em) =>
      em.find(this.entities.ApiKey, { where: environmentId ? { environment_id: environmentId } : {}, order: { created_at: "ASC", id: "ASC" } }),
    );
    return rows.map(toKey);
  }

  async revokeKey(id: string, at: Date): Promise<boolean> {
    const res = await this.sql.run((em) =>
      em.createQueryBuilder().update(this.entities.ApiKey).set({ revoked_at: at }).where("id = :id AND revoked_at IS NULL", { id }).execute(),
    );
    return (res.affected ?? 0) > 0;
  }
}
