/** Storage of customer portal sessions. */
import type { PortalSessionStore } from "../../billing/subscriptions/ports.js";
import type { PortalSession } from "../../billing/subscriptions/types.js";
import type { Entities, PortalSessionRow } from "../entities/index.js";
import type { Sql } from "../sql.js";

/** Row → domain. */
export function portalSessionFromRow(r: PortalSessionRow): PortalSession {
  return {
    id: r.id,
    environmentId: r.environment_id,
    token: r.token,
    subjectId: r.subject_id,
    returnUrl: r.return_url,
    expiresAt: r.expires_at,
    createdAt: r.created_at,
  };
}

/** Domain → row. */
export function portalSessionToRow(s: PortalSession): PortalSessionRow {
  return {
    id: s.id,
    environment_id: s.environmentId,
    token: s.token,
    subject_id: s.subjectId,
    return_url: s.returnUrl,
    expires_at: s.expiresAt,
    created_at: s.createdAt,
  };
}

export class SqlPortalSessionStore implements PortalSessionStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
  ) {}

  async insert(s: PortalSession): Promise<void> {
    await this.sql.write((em) => em.insert(this.entities.PortalSession, portalSessionToRow(s)));
  }

  async get(token: string): Promise<PortalSession | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.entities.PortalSession, { token }));
    return r ? portalSessionFromRow(r) : undefined;
  }
}
