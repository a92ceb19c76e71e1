/**
 * Table of credit notes (DESIGN §15, migration 29). A note's lines are JSON (they are read and
 * written with the note, never queried alone); its number is unique per environment; its amounts
 * are sums (DECIMAL(65,12) on MySQL, canonical text on SQLite). A refund note's refund status
 * (migration 34) is found by its refund ID within its environment (a provider's refund webhook).
 * The finance export reads notes by their date (migration 37).
 */
import { EntitySchema } from "typeorm";
import { type Dialect, type ExactText, idColumn, jsonColumn, seqColumn, sumColumn, textColumn, timeColumn } from "../columns.js";

export interface CreditNoteRow {
  seq?: string;
  id: string;
  environment_id: string;
  number: string;
  invoice_id: string;
  /** '' when the invoice has no number (finalized before numbers). */
  invoice_number: string;
  subject_id: string;
  currency: string;
  reason: string;
  memo: string | null;
  outcome: string;
  lines: { invoiceLineIndex: number | null; description: string; amount: string; taxAmount: string }[];
  subtotal: string;
  total_tax: string;
  total: string;
  status: string;
  credit_grant_id: string | null;
  refund_id: string | null;
  /** 'pending', 'succeeded' or 'failed' for outcome 'refund' (migration 34); NULL otherwise. */
  refund_status: string | null;
  refund_failure_reason: string | null;
  metadata: Record<string, string>;
  created_at: Date;
  /** When it was voided with its invoice (migration 37); NULL: issued, or voided before. */
  voided_at?: Date | null;
}

export function creditNotesEntities(dialect: Dialect, exact: ExactText) {
  const CreditNote = new EntitySchema<CreditNoteRow>({
    name: "CreditNote",
    tableName: "credit_notes",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      number: textColumn(40, false),
      invoice_id: idColumn(),
      invoice_number: textColumn(40, false),
      subject_id: idColumn(),
      currency: textColumn(3, false),
      reason: textColumn(32, false),
      memo: textColumn(1000),
      outcome: textColumn(32, false),
      lines: jsonColumn(dialect),
      subtotal: sumColumn(dialect),
      total_tax: sumColumn(dialect),
      total: sumColumn(dialect),
      status: textColumn(16, false),
      credit_grant_id: textColumn(32),
      refund_id: textColumn(255),
      refund_status: textColumn(16),
      refund_failure_reason: textColumn(255),
      metadata: jsonColumn(dialect),
      created_at: timeColumn(),
      voided_at: timeColumn(true),
    }),
    uniques: [
      { name: "uq_credit_notes_id", columns: ["id"] },
      { name: "uq_credit_notes_env_number", columns: ["environment_id", "number"] },
    ],
    indices: [
      { name: "ix_credit_notes_env_seq", columns: ["environment_id", "seq"] },
      { name: "ix_credit_notes_invoice_seq", columns: ["invoice_id", "seq"] },
      { name: "ix_credit_notes_subject_seq", columns: ["subject_id", "seq"] },
      { name: "ix_credit_notes_env_refund", columns: ["environment_id", "refund_id"] },
      { name: "ix_credit_notes_env_created", columns: ["environment_id", "created_at"] },
      { name: "ix_credit_notes_env_voided", columns: ["environment_id", "voided_at"] },
    ],
  });
  return { CreditNote };
}
