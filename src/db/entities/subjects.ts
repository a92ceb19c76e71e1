/** Tables of subjects: who is billed. */
import { EntitySchema } from "typeorm";
import { type Dialect, type ExactText, idColumn, jsonColumn, seqColumn, textColumn, timeColumn } from "../columns.js";

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
  test_clock_id: string | null;
  payment_method_id: string | null;
  /** DESIGN §15: the domain's BillingDetails as JSON; NULL when never set. */
  billing_details?: BillingDetailsRow | null;
}

/** A subject's billing details as stored (see BillingDetails in the domain). */
export interface BillingDetailsRow {
  legalName: string | null;
  email: string | null;
  address: { line1: string | null; line2: string | null; city: string | null; postalCode: string | null; state: string | null; country: string } | null;
  taxIds: { type: string; value: string }[];
  taxExempt: string;
  taxRateIds: string[];
}

export function subjectsEntities(dialect: Dialect, exact: ExactText) {
  const Subject = new EntitySchema<SubjectRow>({
    name: "Subject",
    tableName: "subjects",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      external_id: textColumn(255),
      external_id_key: textColumn(255),
      email: textColumn(254),
      name: textColumn(255),
      metadata: jsonColumn(dialect),
      created_at: timeColumn(),
      updated_at: timeColumn(),
      deleted_at: timeColumn(true),
      test_clock_id: textColumn(32),
      payment_method_id: textColumn(32),
      billing_details: jsonColumn(dialect, true),
    }),
    uniques: [
      { name: "uq_subjects_id", columns: ["id"] },
      { name: "uq_subjects_env_external_id", columns: ["environment_id", "external_id_key"] },
    ],
    indices: [
      { name: "ix_subjects_env_seq", columns: ["environment_id", "seq"] },
      // A page of the live subjects from the index alone (any offset), then only that page's rows.
      { name: "ix_subjects_env_live_seq", columns: ["environment_id", "deleted_at", "seq"] },
      // Search walks live subjects in seq order matching name or email from the index alone (migration 18).
      { name: "ix_subjects_env_live_search", columns: ["environment_id", "deleted_at", "seq", "name", "email"] },
    ],
  });

  return { Subject };
}
