/** Storage of operator dashboard sessions (issue 19). */
import { In, LessThan } from "typeorm";
import type { OpenOperatorSession, OperatorSession, OperatorSessionStore } from "../../billing/operator-sessions.js";
import type { EnvironmentMode } from "../../billing/tenancy.js";
import type { Entities } from "../entities/index.js";
import { fromDbTime } from "../raw.js";
import type { Sql } from "../sql.js";

interface JoinedRow {
  id: string;
  environment_id: string;
  key_id: string;
  csrf_token: string;
  expires_at: unknown;
  created_at: unknown;
  env_name: string;
  env_mode: string;
  key_prefix: string;
  key_revoked_at: unknown;
}

export class SqlDashboardSessionStore implements OperatorSessionStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
  ) {}

  async insert(s: OperatorSession, tokenHash: string): Promise<void> {
    await this.sql.run((em) =>
      em.insert(this.entities.DashboardSession, {
        id: s.id,
        environment_id: s.environmentId,
        key_id: s.keyId,
        token_hash: tokenHash,
        csrf_token: s.csrfToken,
        expires_at: s.expiresAt,
        created_at: s.createdAt,
      }),
    );
  }

  async get(tokenHash: string): Promise<(OpenOperatorSession & { keyRevoked: boolean }) | undefined> {
    return (await this.getMany([tokenHash]))[0];
  }

  async getMany(tokenHashes: string[]): Promise<(OpenOperatorSession & { keyRevoked: boolean; tokenHash: string })[]> {
    if (tokenHashes.length === 0) return [];
    // One round trip on every dashboard request: the browser's sessions, their keys (revoked?) and environments.
    const rows: (JoinedRow & { token_hash: string })[] = await this.sql.query(
      "SELECT s.id, s.token_hash, s.environment_id, s.key_id, s.csrf_token, s.expires_at, s.created_at, e.name AS env_name, e.mode AS env_mode, k.prefix AS key_prefix, k.revoked_at AS key_revoked_at " +
        `FROM dashboard_sessions s JOIN api_keys k ON k.id = s.key_id AND k.environment_id = s.environment_id JOIN environments e ON e.id = s.environment_id WHERE s.token_hash IN (${tokenHashes.map(() => "?").join(", ")})`,
      tokenHashes,
    );
    return rows.map((r) => ({
      tokenHash: r.token_hash,
      session: { id: r.id, environmentId: r.environment_id, keyId: r.key_id, csrfToken: r.csrf_token, expiresAt: fromDbTime(r.expires_at), createdAt: fromDbTime(r.created_at) },
      environment: { id: r.environment_id, name: r.env_name, mode: r.env_mode as EnvironmentMode },
      keyPrefix: r.key_prefix,
      keyRevoked: r.key_revoked_at !== null && r.key_revoked_at !== undefined,
    }));
  }

  async delete(tokenHash: string): Promise<boolean> {
    const res = await this.sql.run((em) => em.delete(this.entities.DashboardSession, { token_hash: tokenHash }));
    return (res.affected ?? 0) > 0;
  }

  async deleteExpired(now: Date, limit: number): Promise<number> {
    return this.sql.run(async (em) => {
      const rows = await em.find(this.entities.DashboardSession, { select: { seq: true }, where: { expires_at: LessThan(now) }, order: { expires_at: "ASC" }, take: limit });
      if (rows.length === 0) return 0;
      const res = await em.delete(this.entities.DashboardSession, { seq: In(rows.map((r) => r.seq as string)) });
      return res.affected ?? rows.length;
    });
  }
}
