/** Credit notes (DESIGN §15). Amounts in whole smallest units of the invoice's currency, as decimal strings. */
import type { Metadata } from "../metadata.js";

export type CreditNoteReason = "duplicate" | "fraudulent" | "order_change" | "product_unsatisfactory" | "other";
export const CREDIT_NOTE_REASONS: readonly CreditNoteReason[] = ["duplicate", "fraudulent", "order_change", "product_unsatisfactory", "other"];

export type CreditNoteOutcome = "refund" | "credit_balance" | "reduce_amount_due";
export const CREDIT_NOTE_OUTCOMES: readonly CreditNoteOutcome[] = ["refund", "credit_balance", "reduce_amount_due"];

/**
 * Where a refund note's refund stands at the provider: made and not settled yet, the money back,
 * or failed (the money did not go back). Only forward: pending to succeeded or failed, succeeded
 * to failed (Stripe may fail a refund it reported succeeded); never back to pending.
 */
export type RefundStatus = "pending" | "succeeded" | "failed";

export interface CreditNoteLine {
  /** The invoice line credited (index in its lines); null: the whole invoice, no line in particular. */
  invoiceLineIndex: number | null;
  description: string;
  /** Tax included. */
  amount: string;
  taxAmount: string;
}

export interface CreditNote {
  id: string;
  environmentId: string;
  /** `PREFIX-CN-000001`. */
  number: string;
  invoiceId: string;
  invoiceNumber: string;
  subjectId: string;
  currency: string;
  reason: CreditNoteReason;
  memo: string | null;
  outcome: CreditNoteOutcome;
  lines: CreditNoteLine[];
  subtotal: string;
  totalTax: string;
  total: string;
  status: "issued" | "void";
  createdAt: Date;
  /** When it was voided with its invoice (invoice-void.ts); absent or null: not. */
  voidedAt?: Date | null;
  creditGrantId: string | null;
  refundId: string | null;
  /** For outcome refund (null otherwise): where its refund stands (RefundStatus). */
  refundStatus: RefundStatus | null;
  /** The provider's reason of a failed refund (Stripe's failure_reason); null otherwise. */
  refundFailureReason: string | null;
  metadata: Metadata;
}
