/** Wire ⇄ domain for credit notes (DESIGN §15). */
import type { ListCreditNotesInput } from "../../billing/credit-notes/credit-notes.js";
import type { CreditNote } from "../../billing/credit-notes/types.js";
import type { CreateCreditNoteInput } from "../../billing/credit-notes/validation.js";
import { type CreditNote as CreditNotePb, CreditNoteSchema } from "../../gen/billing/v1/credit_note_pb.js";
import type { CreateCreditNoteRequest, ListCreditNotesRequest } from "../../gen/billing/v1/credit_note_service_pb.js";
import { amount, toPb } from "./common.js";

export function creditNoteToPb(n: CreditNote, pdfUrl: string): CreditNotePb {
  const money = (value: string) => amount(n.currency, value);
  return toPb(CreditNoteSchema, {
    ...n,
    lines: n.lines.map((l) => ({ ...l, amount: money(l.amount), taxAmount: money(l.taxAmount) })),
    subtotal: money(n.subtotal),
    totalTax: money(n.totalTax),
    total: money(n.total),
    pdfUrl,
  });
}

export function createCreditNoteInput(req: CreateCreditNoteRequest): CreateCreditNoteInput {
  return {
    invoiceId: req.invoiceId,
    reason: req.reason,
    memo: req.memo,
    outcome: req.outcome,
    lines: req.lines.map((l) => ({ invoiceLineIndex: l.invoiceLineIndex, amount: l.amount })),
    amount: req.amount,
    metadata: req.metadata,
  };
}

export function listCreditNotesInput(req: ListCreditNotesRequest): ListCreditNotesInput {
  return { invoiceId: req.invoiceId ?? "", subjectId: req.subjectId ?? "", limit: req.limit, offset: req.offset };
}
