/** Table of operator dashboard sessions (issue 19). */
import { EntitySchema } from "typeorm";
import { type Dialect, type ExactText, idColumn, seqColumn, textColumn, timeColumn } from "../columns.js";

export interface DashboardSessionRow {
  seq?: string;
  id: string;
  environment_id: string;
  /** The API key it was opened with: a revoked key ends its sessions. */
  key_id: string;
  /** SHA-256 (hex) of the cookie's token: the token itself is never stored. */
  token_hash: string;
  csrf_token: string;
  expires_at: Date;
  created_at: Date;
}

export function dashboardSessionsEntities(dialect: Dialect, exact: ExactText) {
  const DashboardSession = new EntitySchema<DashboardSessionRow>({
    name: "DashboardSession",
    tableName: "dashboard_sessions",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      key_id: idColumn(),
      token_hash: textColumn(64, false),
      csrf_token: textColumn(64, false),
      expires_at: timeColumn(),
      created_at: timeColumn(),
    }),
    uniques: [
      { name: "uq_dashboard_sessions_id", columns: ["id"] },
      { name: "uq_dashboard_sessions_token_hash", columns: ["token_hash"] },
    ],
    indices: [{ name: "ix_dashboard_sessions_expires", columns: ["expires_at"] }],
  });
  return { DashboardSession };
}
