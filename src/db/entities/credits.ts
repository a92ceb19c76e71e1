/**
 * Tables of credits (DESIGN §14): grants, the ledger of every movement, per-currency settings and
 * the state of their alerts. `remaining` never leaves [0, amount]: a CHECK constraint on both
 * stores (SQLite's compares the text exactly for the sign and as numbers for the bound; spending
 * is one conditional statement besides, see credit-store.ts).
 */
import { EntitySchema } from "typeorm";
import { type Dialect, type ExactText, decimalColumn, idColumn, intColumn, jsonColumn, seqColumn, sumColumn, textColumn, timeColumn } from "../columns.js";

export interface CreditGrantRow {
  seq?: string;
  id: string;
  environment_id: string;
  subject_id: string;
  currency: string;
  amount: string;
  remaining: string;
  category: string;
  priority: number;
  effective_at: Date;
  expires_at: Date | null;
  applies_to_rate_codes: string[];
  metadata: Record<string, string>;
  status: string;
  invoice_id: string | null;
  /** The subject's test clock when it has one (expiry runs on that clock). */
  clock_id: string | null;
  created_at: Date;
  voided_at: Date | null;
  expired_at: Date | null;
}

export interface CreditLedgerRow {
  seq?: string;
  id: string;
  environment_id: string;
  subject_id: string;
  grant_id: string;
  entry_type: string;
  currency: string;
  amount: string;
  /** '' when the entry has no invoice (the unique key treats it as a value). */
  invoice_id: string;
  /**
   * The credit note that made the entry ("credit_note", and "void" for a refund of a credit
   * purchase, several of which may take back from one grant on one invoice); '' otherwise.
   */
  credit_note_id: string;
  description: string;
  created_at: Date;
}

export interface CreditSettingsRow {
  environment_id: string;
  subject_id: string;
  currency: string;
  low_balance_threshold: string | null;
  top_up_threshold: string | null;
  top_up_amount: string | null;
  top_up_priority: number | null;
  updated_at: Date;
}

export interface CreditAlertStateRow {
  environment_id: string;
  subject_id: string;
  currency: string;
  kind: string;
  below: boolean;
  changed_at: Date;
  /** How many times the row moved below (migration 35): the number of its latest crossing. */
  crossings?: number;
}

/** The SQLite form of the grants' CHECK (MySQL's is `remaining >= 0 AND remaining <= amount`, in the migration). */
export const SQLITE_REMAINING_CHECK = "remaining NOT LIKE '-%' AND CAST(remaining AS REAL) <= CAST(amount AS REAL)";

export function creditsEntities(dialect: Dialect, exact: ExactText) {
  const CreditGrant = new EntitySchema<CreditGrantRow>({
    name: "CreditGrant",
    tableName: "credit_grants",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      subject_id: idColumn(),
      currency: textColumn(3, false),
      amount: sumColumn(dialect),
      remaining: sumColumn(dialect),
      category: textColumn(16, false),
      priority: intColumn(),
      effective_at: timeColumn(),
      expires_at: timeColumn(true),
      applies_to_rate_codes: jsonColumn(dialect),
      metadata: jsonColumn(dialect),
      status: textColumn(16, false),
      invoice_id: textColumn(32),
      clock_id: textColumn(32),
      created_at: timeColumn(),
      voided_at: timeColumn(true),
      expired_at: timeColumn(true),
    }),
    uniques: [{ name: "uq_credit_grants_id", columns: ["id"] }],
    indices: [
      { name: "ix_credit_grants_env_seq", columns: ["environment_id", "seq"] },
      { name: "ix_credit_grants_subject", columns: ["subject_id", "currency", "status"] },
      { name: "ix_credit_grants_expiry", columns: ["status", "expires_at"] },
    ],
    checks: dialect === "sqlite" ? [{ name: "ck_credit_grants_remaining", expression: SQLITE_REMAINING_CHECK }] : [],
  });

  const CreditLedgerEntry = new EntitySchema<CreditLedgerRow>({
    name: "CreditLedgerEntry",
    tableName: "credit_ledger",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      subject_id: idColumn(),
      grant_id: idColumn(),
      entry_type: textColumn(16, false),
      currency: textColumn(3, false),
      amount: sumColumn(dialect),
      invoice_id: idColumn(),
      credit_note_id: idColumn(),
      description: textColumn(1000, false),
      created_at: timeColumn(),
    }),
    uniques: [
      { name: "uq_credit_ledger_id", columns: ["id"] },
      { name: "uq_credit_ledger_movement", columns: ["grant_id", "invoice_id", "entry_type", "credit_note_id"] },
    ],
    indices: [{ name: "ix_credit_ledger_subject_seq", columns: ["subject_id", "seq"] }],
  });

  const CreditSettings = new EntitySchema<CreditSettingsRow>({
    name: "CreditSettings",
    tableName: "credit_settings",
    columns: exact({
      environment_id: { ...idColumn(), primary: true },
      subject_id: { ...idColumn(), primary: true },
      currency: { ...textColumn(3, false), primary: true },
      low_balance_threshold: decimalColumn(dialect, true),
      top_up_threshold: decimalColumn(dialect, true),
      top_up_amount: decimalColumn(dialect, true),
      top_up_priority: { type: "int", nullable: true, default: null },
      updated_at: timeColumn(),
    }),
  });

  const CreditAlertState = new EntitySchema<CreditAlertStateRow>({
    name: "CreditAlertState",
    tableName: "credit_alert_state",
    columns: exact({
      environment_id: { ...idColumn(), primary: true },
      subject_id: { ...idColumn(), primary: true },
      currency: { ...textColumn(3, false), primary: true },
      kind: { ...textColumn(16, false), primary: true },
      below: { type: "boolean", nullable: false },
      changed_at: timeColumn(),
      crossings: { type: "int", nullable: false, default: 0 },
    }),
  });

  return { CreditGrant, CreditLedgerEntry, CreditSettings, CreditAlertState };
}
