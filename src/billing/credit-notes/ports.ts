/**
 * Storage ports of credit notes (DESIGN §15). A credit note is written in one transaction that
 * holds its invoice's row lock: the invoice is read locked, what earlier notes credited is read
 * under that lock, then `invoices.amount_credited` grows by one conditional statement that the
 * database refuses beyond the invoice's total (whatever runs at the same time), then the outcome
 * (an amount due lowered, a credit grant; for a refund of a credit purchase, its credit checked),
 * then the number (the sequence row is locked from then until commit), a purchase's credit taken
 * back, the provider's refund, the note and its event. src/db implements it on SQL.
 */
import type { CreditWrites } from "../credits/ports.js";
import type { EventWrites } from "../events/types.js";
import type { DunningWrites } from "../payments/dunning.js";
import type { ProviderEventWrites } from "../payments/event-writes.js";
import type { Page, PageResult } from "../pagination.js";
import type { Invoice } from "../subscriptions/types.js";
import type { CreditNote, RefundStatus } from "./types.js";

export interface CreditNoteFilter {
  invoiceId?: string;
  subjectId?: string;
}

export interface CreditNoteWrites {
  /** The invoice with its lines, its row locked until the transaction ends. */
  lockInvoice(environmentId: string, invoiceId: string): Promise<Invoice | undefined>;
  /** The invoice's credit notes (every status), oldest first. */
  ofInvoice(environmentId: string, invoiceId: string): Promise<CreditNote[]>;
  /**
   * amount_credited += amount (NULL counting as 0), only if it stays within the invoice's total:
   * one conditional UPDATE. False (nothing written) when it would not. `beyondTotal`: whatever it
   * comes to (a refund the provider made already is recorded as made, never refused).
   */
  addCredited(environmentId: string, invoiceId: string, amount: string, beyondTotal?: boolean): Promise<boolean>;
  /** amount_due −= amount, only on an open invoice whose amount due is at least `amount`; false otherwise. */
  reduceAmountDue(environmentId: string, invoiceId: string, amount: string, at: Date): Promise<boolean>;
  /** An open invoice becomes paid at `at`; false when it was no longer open. */
  markPaid(environmentId: string, invoiceId: string, at: Date): Promise<boolean>;
  /** The environment's next credit-note number, `PREFIX-CN-000001` (locks the sequence until commit). */
  nextNumber(environmentId: string): Promise<string>;
  insert(note: CreditNote): Promise<void>;
  /** The environment's note whose refund is the provider's `refundId`, its row locked until the transaction ends. */
  lockByRefund(environmentId: string, refundId: string): Promise<CreditNote | undefined>;
  /** A refund note's refund status (and the provider's failure reason, null unless failed). */
  setRefundStatus(environmentId: string, id: string, status: RefundStatus, failureReason: string | null): Promise<void>;
  /**
   * Its invoice voided (credit-notes/invoice-void.ts): these issued notes of the invoice become
   * void, its amount_credited goes down by `total`, what they credited, and its amount_due up by
   * as much (what they had taken off it), back to total − credits applied.
   */
  voidNotes(environmentId: string, invoiceId: string, ids: readonly string[], total: string, at: Date): Promise<void>;
  /** A credit grant and its positive ledger entry (CreditWrites.insertGrant). */
  insertGrant: CreditWrites["insertGrant"];
  /** A credit grant, locked until the transaction ends (CreditWrites.lockGrant). */
  lockGrant: CreditWrites["lockGrant"];
  /** A refund of a credit purchase takes back credit of its grant (CreditWrites.takeBack). */
  takeBack: CreditWrites["takeBack"];
}

/**
 * `dunning`: the invoice's payment state, for the cancel of a charge waiting on an invoice a note
 * pays (payments/cancels.ts). `providerEvents`: a provider's refund webhook recorded with its
 * effect (refund-status.ts).
 */
export type CreditNoteTx = CreditNoteWrites & EventWrites & { dunning?: DunningWrites; providerEvents?: ProviderEventWrites };

/** What voiding an invoice writes of its credit notes, in the invoice's transaction (BillingTx.creditNotes). */
export type InvoiceVoidNoteWrites = Pick<CreditNoteWrites, "ofInvoice" | "voidNotes">;

/**
 * What a credit for unused time (a seat decrease's, a resume's, a change of rate card's) writes of
 * the invoices it gives back (subscriptions/given-back.ts): each read under the row lock a credit
 * note takes, and its amount credited grown by what the credit gives back of it, so that notes
 * and credits together never give back more than it took.
 */
export type GivenBackWrites = Pick<CreditNoteWrites, "lockInvoice" | "addCredited" | "reduceAmountDue" | "markPaid">;

export interface CreditNoteStore {
  get(environmentId: string, id: string): Promise<CreditNote | undefined>;
  /** Oldest first, of one invoice and/or one subject. */
  list(environmentId: string, filter: CreditNoteFilter, page: Page): Promise<PageResult<CreditNote>>;
  /** `fn` in one transaction; a deadlock or lock wait timeout is an AbortedError (retryable). */
  transaction<T>(fn: (tx: CreditNoteTx) => Promise<T>): Promise<T>;
}
