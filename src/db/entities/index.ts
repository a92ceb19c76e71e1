/**
 * Table definitions. EntitySchema (not decorators) keeps column types explicit and lets the
 * same definitions load under tsx without decorator metadata. Rows are plain objects; stores
 * map them to domain types.
 */
import { EntitySchema } from "typeorm";
import { type Dialect, idColumn, jsonColumn, seqColumn, textColumn, timeColumn } from "../columns.js";

export interface EnvironmentRow {
  id: string;
  name: string;
  mode: string;
  created_at: Date;
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

export interface SubjectRow {
  /** Insertion order: the clustered key on MySQL, and the order of every listing. */
  seq?: string;
  id: string;
  environment_id: string;
  external_id: string | null;
  /** Equal to external_id while the subject is live, NULL once deleted: the unique key frees it. */
  external_id_key: string | null;
  email: string | null;
  name: string | null;
  metadata: Record<string, string>;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

export function buildEntities(dialect: Dialect) {
  const Environment = new EntitySchema<EnvironmentRow>({
    name: "Environment",
    tableName: "environments",
    columns: {
      id: idColumn(true),
      name: textColumn(100, false),
      mode: textColumn(8, false),
      created_at: timeColumn(),
    },
    uniques: [{ name: "uq_environments_name", columns: ["name"] }],
  });

  const ApiKey = new EntitySchema<ApiKeyRow>({
    name: "ApiKey",
    tableName: "api_keys",
    columns: {
      id: idColumn(true),
      environment_id: idColumn(),
      kind: textColumn(16, false),
      prefix: textColumn(24, false),
      key_hash: textColumn(64, false),
      created_at: timeColumn(),
      revoked_at: timeColumn(true),
    },
    uniques: [{ name: "uq_api_keys_key_hash", columns: ["key_hash"] }],
    indices: [{ name: "ix_api_keys_environment", columns: ["environment_id"] }],
  });

  const Subject = new EntitySchema<SubjectRow>({
    name: "Subject",
    tableName: "subjects",
    columns: {
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      external_id: textColumn(255),
      external_id_key: textColumn(255),
      email: textColumn(254),
      name: textColumn(255),
      metadata: jsonColumn(),
      created_at: timeColumn(),
      updated_at: timeColumn(),
      deleted_at: timeColumn(true),
    },
    uniques: [
      { name: "uq_subjects_id", columns: ["id"] },
      { name: "uq_subjects_env_external_id", columns: ["environment_id", "external_id_key"] },
    ],
    indices: [{ name: "ix_subjects_env_seq", columns: ["environment_id", "seq"] }],
  });

  return { Environment, ApiKey, Subject };
}

export type Entities = ReturnType<typeof buildEntities>;
