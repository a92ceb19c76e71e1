/**
 * Credits (DESIGN §14): grants a subject spends on its invoices, the ledger of every movement,
 * and per-currency settings. Amounts are canonical decimal strings in the smallest unit of the
 * grant's currency (money.ts), never JS numbers.
 */
import type { Metadata } from "../metadata.js";

export type GrantCategory = "paid" | "promotional";
export const GRANT_CATEGORIES: readonly GrantCategory[] = ["paid", "promotional"];

/**
 * `pending_payment`: a paid grant whose invoice is not paid yet (spends nothing); `active`;
 * `depleted`: nothing left; `expired`, `voided`: the rest left the balance; `failed`: its invoice
 * could not be paid, nothing was granted.
 */
export type GrantStatus = "pending_payment" | "active" | "depleted" | "expired" | "voided" | "failed";
export const GRANT_STATUSES: readonly GrantStatus[] = ["pending_payment", "active", "depleted", "expired", "voided", "failed"];

export interface CreditGrant {
  id: string;
  environmentId: string;
  subjectId: string;
  /** ISO 4217, upper-case. */
  currency: string;
  /** What was granted, > 0. */
  amount: string;
  /** What is left to spend, 0 ≤ remaining ≤ amount (the database refuses anything else). */
  remaining: string;
  category: GrantCategory;
  /** 1 (spent first) … 100. */
  priority: number;
  effectiveAt: Date;
  expiresAt: Date | null;
  /** Empty: every line may spend it. */
  appliesToRateCodes: string[];
  metadata: Metadata;
  status: GrantStatus;
  /** A paid grant's invoice. */
  invoiceId: string | null;
  createdAt: Date;
  voidedAt: Date | null;
  expiredAt: Date | null;
}

/**
 * `grant`, `proration`, `credit_note` (a credit note's credit, DESIGN §15), `reinstatement` (an
 * application given back when its invoice is voided) and `invoice_credit` (an invoice that became
 * open with a negative total: what it comes to below 0, DESIGN §14) are positive; `application`,
 * `expiry` and `void` negative.
 */
export type LedgerEntryType = "grant" | "application" | "expiry" | "void" | "proration" | "credit_note" | "reinstatement" | "invoice_credit";

export interface LedgerEntry {
  id: string;
  environmentId: string;
  subjectId: string;
  grantId: string;
  type: LedgerEntryType;
  currency: string;
  /** Signed. */
  amount: string;
  invoiceId: string | null;
  description: string;
  createdAt: Date;
}

/** What one grant paid of an invoice. */
export interface CreditApplication {
  grantId: string;
  /** > 0, in the invoice's currency. */
  amount: string;
}

export interface AutoTopUp {
  threshold: string;
  amount: string;
  priority: number;
}

export interface CreditSettings {
  subjectId: string;
  currency: string;
  /** `credit.balance_low` fires once per crossing below it; null: never. */
  lowBalanceThreshold: string | null;
  autoTopUp: AutoTopUp | null;
}
