/** Tables of invoices and their lines. */
import { EntitySchema } from "typeorm";
import { type Dialect, type ExactText, idColumn, intColumn, jsonColumn, seqColumn, sumColumn, textColumn, timeColumn } from "../columns.js";

export interface InvoiceRow {
  seq?: string;
  id: string;
  environment_id: string;
  subject_id: string;
  subscription_id: string;
  period_key: string;
  status: string;
  currency: string;
  total: string;
  hosted_token: string;
  period_start: Date;
  period_end: Date;
  created_at: Date;
  updated_at: Date;
  finalizes_at?: Date | null;
  finalized_at?: Date | null;
  /** When it was voided, marked uncollectible (migration 37; NULL: not, or not yet). */
  voided_at?: Date | null;
  marked_uncollectible_at?: Date | null;
  clock_id?: string | null;
  usage_from?: Date | null;
  usage_to?: Date | null;
  basis?: InvoiceBasisRow | null;
  credits_applied?: { grantId: string; amount: string }[] | null;
  amount_due?: string | null;
  /** DESIGN §15 (migration 26): the number given at finalization, the booked totals and what is printed. */
  number?: string | null;
  subtotal?: string | null;
  total_discount?: string | null;
  total_tax?: string | null;
  amount_credited?: string | null;
  booking?: InvoiceBookingRow | null;
  /** DESIGN §16 (migration 30): dunning's attempts, the next one, and the provider's side of the payment (JSON). */
  attempt_count?: number;
  next_payment_attempt?: Date | null;
  payment_state?: { reference?: string | null; actionUrl?: string | null; lastError?: string | null; provider?: string | null; actionRequired?: boolean; firstFailedAt?: string | null } | null;
}

/** What an invoice prints besides its lines (see the domain's Invoice): JSON. */
export interface InvoiceBookingRow {
  discounts?: unknown[];
  taxAmounts?: unknown[];
  notes?: string[];
  customer?: unknown;
  customerName?: string | null;
  seller?: unknown;
  /** Earlier invoices' amounts carried in (payments/carries.ts): outside the total, in amount_due. */
  carriedIn?: unknown[];
}

/** The last number given per (environment, kind): "invoice" or "credit_note". */
export interface InvoiceSequenceRow {
  environment_id: string;
  kind: string;
  last_number: string;
}

/** What an invoice's usage window was priced from (see UsageWindow in the domain). */
export interface InvoiceBasisRow {
  rateCardId: string;
  fixedRateQuantities: Record<string, string>;
  rateMultipliers: Record<string, string>;
  /** The cycle the window lies in, ISO 8601 (absent on windows written before it was kept). */
  cycleStart?: string;
  cycleEnd?: string;
  /** Per rate (pricing metric ID "/" rate code), the window's first-seen anchor, ISO 8601, with the multiplier its earlier windows were billed at (text alone: kept before it was); absent: none, as on every window written before; a key of another form matches no rate. */
  firstSeen?: Record<string, string | { at: string; billedMultiplier: string }>;
  /** The window's changes of usage terms it settles (UsageTermsAdjustment: rate, when, old and new multiplier; absent: none). */
  usageAdjustments?: { code: string; since: string; changedAt: string; old: string; new: string; description: string; settled?: string }[];
}

export interface InvoiceLineRow {
  seq?: string;
  invoice_id: string;
  position: number;
  description: string;
  quantity: string;
  unit_amount: string;
  amount: string;
  kind?: string;
  line_key?: string | null;
  window_invoice_id?: string | null;
  /** A line's discount and tax amounts, and a credit's taxes as paid (JSON; NULL: none). */
  booking?: { discountAmounts?: unknown[]; taxAmounts?: unknown[]; paidTax?: unknown[] } | null;
}

export function invoicesEntities(dialect: Dialect, exact: ExactText) {
  const Invoice = new EntitySchema<InvoiceRow>({
    name: "Invoice",
    tableName: "invoices",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      subject_id: idColumn(),
      subscription_id: idColumn(),
      period_key: textColumn(40, false),
      status: textColumn(16, false),
      currency: textColumn(3, false),
      total: sumColumn(dialect),
      hosted_token: textColumn(64, false),
      period_start: timeColumn(),
      period_end: timeColumn(),
      created_at: timeColumn(),
      updated_at: timeColumn(),
      // A draft finalizes at finalizes_at on its subscription's clock (clock_id; NULL: real time).
      finalizes_at: timeColumn(true),
      finalized_at: timeColumn(true),
      // When it became void or uncollectible (migration 37): the finance export reads those by date.
      voided_at: timeColumn(true),
      marked_uncollectible_at: timeColumn(true),
      clock_id: textColumn(32),
      // The usage window the invoice bills, and what it was priced from.
      usage_from: timeColumn(true),
      usage_to: timeColumn(true),
      basis: jsonColumn(dialect, true),
      // Credit grants spent on it (JSON list; NULL: none) and what is charged: total less them (NULL on no row since migration 25).
      credits_applied: jsonColumn(dialect, true),
      amount_due: sumColumn(dialect, true),
      // DESIGN §15: the number (NULL on drafts and internal empty invoices), the booked totals, what is printed.
      number: textColumn(40),
      subtotal: sumColumn(dialect, true),
      total_discount: sumColumn(dialect, true),
      total_tax: sumColumn(dialect, true),
      amount_credited: sumColumn(dialect, true),
      booking: jsonColumn(dialect, true),
      attempt_count: { type: "int", nullable: false, default: 0 },
      next_payment_attempt: timeColumn(true),
      payment_state: jsonColumn(dialect, true),
    }),
    uniques: [
      { name: "uq_invoices_id", columns: ["id"] },
      { name: "uq_invoices_subscription_period", columns: ["subscription_id", "period_key"] },
      { name: "uq_invoices_hosted_token", columns: ["hosted_token"] },
      { name: "uq_invoices_env_number", columns: ["environment_id", "number"] },
    ],
    indices: [
      { name: "ix_invoices_subject_seq", columns: ["subject_id", "seq"] },
      { name: "ix_invoices_status_finalizes", columns: ["status", "finalizes_at"] },
      { name: "ix_invoices_subscription_seq", columns: ["subscription_id", "seq"] },
      { name: "ix_invoices_env_status_seq", columns: ["environment_id", "status", "seq"] },
      { name: "ix_invoices_env_finalized", columns: ["environment_id", "finalized_at"] },
      { name: "ix_invoices_env_created", columns: ["environment_id", "created_at"] },
      { name: "ix_invoices_env_voided", columns: ["environment_id", "voided_at"] },
      { name: "ix_invoices_env_uncollectible", columns: ["environment_id", "marked_uncollectible_at"] },
      { name: "ix_invoices_status_next_attempt", columns: ["status", "next_payment_attempt"] },
    ],
  });

  const InvoiceLine = new EntitySchema<InvoiceLineRow>({
    name: "InvoiceLine",
    tableName: "invoice_lines",
    columns: exact({
      seq: seqColumn(dialect),
      invoice_id: idColumn(),
      position: intColumn(),
      description: textColumn(1000, false),
      quantity: sumColumn(dialect),
      unit_amount: sumColumn(dialect),
      amount: sumColumn(dialect),
      // fixed, usage, minimum, maximum, proration, adjustment, commitment_true_up, credit_purchase (charge: written before lines had kinds).
      kind: { type: "varchar", length: 24, nullable: false, default: "charge" },
      line_key: textColumn(1000),
      window_invoice_id: textColumn(32),
      booking: jsonColumn(dialect, true),
    }),
    indices: [
      { name: "ix_invoice_lines_invoice", columns: ["invoice_id", "position"] },
      { name: "ix_invoice_lines_window", columns: ["window_invoice_id"] },
    ],
  });

  const InvoiceSequence = new EntitySchema<InvoiceSequenceRow>({
    name: "InvoiceSequence",
    tableName: "invoice_sequences",
    columns: exact({
      environment_id: idColumn(true),
      kind: { type: "varchar", length: 16, primary: true },
      last_number: { type: "bigint", nullable: false },
    }),
  });

  return { Invoice, InvoiceLine, InvoiceSequence };
}
