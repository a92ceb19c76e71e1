import { AlreadyExistsError } from "../../billing/errors.js";
import type { AuthStore, KeyWithEnvironment } from "../../billing/keys.js";
import type { ApiKey, Environment, EnvironmentMode, KeyKind } from "../../billing/tenancy.js";
import type { ApiKeyRow, Entities, EnvironmentRow } from "../entities/index.js";
import { isUniqueViolation } from "../errors.js";
import { fromDbTime, fromDbTimeOrNull } from "../raw.js";
import type { Sql } from "../sql.js";

const rpsOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

function environmentFromRow(r: EnvironmentRow): Environment {
  return {
    id: r.id,
    name: r.name,
    mode: r.mode as EnvironmentMode,
    createdAt: r.created_at,
    ingestRps: rpsOrNull(r.rate_limit_ingest_rps),
    apiRps: rpsOrNull(r.rate_limit_api_rps),
  };
}

function apiKeyFromRow(r: ApiKeyRow): ApiKey {
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
    const rows: (ApiKeyRow & { env_name: string; env_mode: string; env_created_at: unknown; env_ingest_rps: unknown; env_api_rps: unknown })[] = await this.sql.query(
      "SELECT k.id, k.environment_id, k.kind, k.prefix, k.created_at, k.revoked_at, e.name AS env_name, e.mode AS env_mode, e.created_at AS env_created_at, e.rate_limit_ingest_rps AS env_ingest_rps, e.rate_limit_api_rps AS env_api_rps FROM api_keys k JOIN environments e ON e.id = k.environment_id WHERE k.key_hash = ?",
      [hash],
    );
    const r = rows[0];
    if (!r) return undefined;
    return {
      key: apiKeyFromRow({ ...r, created_at: fromDbTime(r.created_at), revoked_at: fromDbTimeOrNull(r.revoked_at) }),
      environment: environmentFromRow({
        id: r.environment_id,
        name: r.env_name,
        mode: r.env_mode,
        created_at: fromDbTime(r.env_created_at),
        rate_limit_ingest_rps: rpsOrNull(r.env_ingest_rps),
        rate_limit_api_rps: rpsOrNull(r.env_api_rps),
      }),
    };
  }

  async findEnvironmentByName(name: string): Promise<Environment | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.entities.Environment, { name }));
    return r ? environmentFromRow(r) : undefined;
  }

  async insertEnvironment(env: Environment): Promise<void> {
    try {
      await this.sql.run(async (em) => {
        await em.insert(this.entities.Environment, { id: env.id, name: env.name, mode: env.mode, created_at: env.createdAt });
        // Its number sequences exist from the start (numbering.ts): a finalization then only
        // bumps its row, never inserts one (an insert's gap locks could deadlock two environments' first numbers).
        await em.insert(this.entities.InvoiceSequence, [
          { environment_id: env.id, kind: "invoice", last_number: "0" },
          { environment_id: env.id, kind: "credit_note", last_number: "0" },
        ]);
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw new AlreadyExistsError("ENVIRONMENT_EXISTS", `environment ${env.name} already exists`);
      throw err;
    }
  }

  async listEnvironments(): Promise<Environment[]> {
    return (await this.sql.run((em) => em.find(this.entities.Environment, { order: { created_at: "ASC", id: "ASC" } }))).map(environmentFromRow);
  }

  async setEnvironmentRateLimits(id: string, limits: { ingestRps?: number | null; apiRps?: number | null }): Promise<boolean> {
    const set: Partial<EnvironmentRow> = {};
    if (limits.ingestRps !== undefined) set.rate_limit_ingest_rps = limits.ingestRps;
    if (limits.apiRps !== undefined) set.rate_limit_api_rps = limits.apiRps;
    if (Object.keys(set).length === 0) return (await this.sql.run((em) => em.countBy(this.entities.Environment, { id }))) > 0;
    const res = await this.sql.write((em) => em.createQueryBuilder().update(this.entities.Environment).set(set).where("id = :id", { id }).execute());
    return (res.affected ?? 0) > 0;
  }

  /** How long the environment's invoices that bill usage stay drafts, in seconds (0: final at once). */
  async setInvoiceGraceSeconds(id: string, seconds: number): Promise<boolean> {
    const res = await this.sql.write((em) => em.createQueryBuilder().update(this.entities.Environment).set({ invoice_grace_seconds: seconds }).where("id = :id", { id }).execute());
    return (res.affected ?? 0) > 0;
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
    const rows = await this.sql.run((em) => em.find(this.entities.ApiKey, { where: environmentId ? { environment_id: environmentId } : {}, order: { created_at: "ASC", id: "ASC" } }));
    return rows.map(apiKeyFromRow);
  }

  async revokeKey(id: string, at: Date): Promise<boolean> {
    const res = await this.sql.write((em) => em.createQueryBuilder().update(this.entities.ApiKey).set({ revoked_at: at }).where("id = :id AND revoked_at IS NULL", { id }).execute());
    return (res.affected ?? 0) > 0;
  }
}
