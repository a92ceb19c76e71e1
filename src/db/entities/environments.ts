/** Tables of environments and their API keys (authentication). */
import { EntitySchema } from "typeorm";
import { type Dialect, type ExactText, idColumn, jsonColumn, textColumn, timeColumn } from "../columns.js";

export interface EnvironmentRow {
  id: string;
  name: string;
  mode: string;
  created_at: Date;
  /** Per-key rate-limit overrides (requests a second; NULL: the server's default, 0: unlimited). */
  rate_limit_ingest_rps?: number | null;
  rate_limit_api_rps?: number | null;
  /** How long a cycle's invoice stays a draft (seconds; 0: finalized at once). */
  invoice_grace_seconds?: number;
  /** DESIGN §15: invoices are numbered `<invoice_prefix>-000001`; the seller they print (JSON). */
  invoice_prefix?: string;
  seller?: SellerRow | null;
}

/** The seller printed on an environment's invoices (see SellerDetails in the domain). */
export interface SellerRow {
  legalName?: string | null;
  address?: { line1?: string | null; line2?: string | null; city?: string | null; postalCode?: string | null; state?: string | null; country: string } | null;
  taxId?: string | null;
  email?: string | null;
  footer?: string | null;
}

export interface ApiKeyRow {
  id: string;
  environment_id: string;
  kind: string;
  prefix: string;
  key_hash: string;
  created_at: Date;
  revoked_at: Date | null;
}

export function environmentsEntities(dialect: Dialect, exact: ExactText) {
  const Environment = new EntitySchema<EnvironmentRow>({
    name: "Environment",
    tableName: "environments",
    columns: exact({
      id: idColumn(true),
      name: textColumn(100, false),
      mode: textColumn(8, false),
      created_at: timeColumn(),
      rate_limit_ingest_rps: { type: "int", nullable: true },
      rate_limit_api_rps: { type: "int", nullable: true },
      invoice_grace_seconds: { type: "int", nullable: false, default: 3600 },
      invoice_prefix: { type: "varchar", length: 12, nullable: false, default: "INV" },
      seller: jsonColumn(dialect, true),
    }),
    uniques: [{ name: "uq_environments_name", columns: ["name"] }],
  });

  const ApiKey = new EntitySchema<ApiKeyRow>({
    name: "ApiKey",
    tableName: "api_keys",
    columns: exact({
      id: idColumn(true),
      environment_id: idColumn(),
      kind: textColumn(16, false),
      prefix: textColumn(24, false),
      key_hash: textColumn(64, false),
      created_at: timeColumn(),
      revoked_at: timeColumn(true),
    }),
    uniques: [{ name: "uq_api_keys_key_hash", columns: ["key_hash"] }],
    indices: [{ name: "ix_api_keys_environment", columns: ["environment_id"] }],
  });

  return { Environment, ApiKey };
}
