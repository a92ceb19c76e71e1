/** Table of customer portal sessions. */
import { EntitySchema } from "typeorm";
import { type Dialect, type ExactText, idColumn, seqColumn, textColumn, timeColumn } from "../columns.js";

export interface PortalSessionRow {
  seq?: string;
  id: string;
  environment_id: string;
  token: string;
  subject_id: string;
  return_url: string;
  expires_at: Date;
  created_at: Date;
}

export function portalSessionsEntities(dialect: Dialect, exact: ExactText) {
  const PortalSession = new EntitySchema<PortalSessionRow>({
    name: "PortalSession",
    tableName: "customer_portal_sessions",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      token: textColumn(64, false),
      subject_id: idColumn(),
      return_url: textColumn(2000, false),
      expires_at: timeColumn(),
      created_at: timeColumn(),
    }),
    uniques: [
      { name: "uq_customer_portal_sessions_id", columns: ["id"] },
      { name: "uq_customer_portal_sessions_token", columns: ["token"] },
    ],
  });

  return { PortalSession };
}
