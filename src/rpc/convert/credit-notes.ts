/** Wire ⇄ domain for credit notes (DESIGN §15). */
import { create, toJson } from "@bufbuild/protobuf";
import type { ListCreditNotesInput } from "../../billing/credit-notes/credit-notes.js";
import type { CreditNote } from "../../billing/credit-notes/types.js";
import type { CreateCreditNoteInput } from "../../billing/credit-notes/validation.js";
import { type CreditNote as CreditNotePb, CreditNoteSchema } from "../../gen/billing/v1/credit_note_pb.js";
import type { CreateCreditNoteRequest, ListCreditNotesRequest } from "../../gen/billing/v1/credit_note_service_pb.js";
import { restJson, stringifyRest } from "../json-out.js";
import { ts } from "./common.js";

export function creditNoteToPb(n: CreditNote, pdfUrl: string): CreditNotePb {
  const money = (value: string) => ({ currencyCode: n.currency, value });
  return create(CreditNoteSchema, {
    id: n.id,
    number: n.number,
    invoiceId: n.invoiceId,
    invoiceNumber: n.invoiceNumber,
    subjectId: n.subjectId,
    reason: n.reason,
    memo: n.memo ?? undefined,
    outcome: n.outcome,
    lines: n.lines.map((l) => ({
      invoiceLineIndex: l.invoiceLineIndex ?? undefined,
      description: l.description,
      amount: money(l.amount),
      taxAmount: money(l.taxAmount),
    })),
    subtotal: money(n.subtotal),
    totalTax: money(n.totalTax),
    total: money(n.total),
    status: n.status,
    createdAt: ts(n.createdAt),
    creditGrantId: n.creditGrantId ?? undefined,
    refundId: n.refundId ?? undefined,
    pdfUrl,
    metadata: n.metadata,
  });
}

/** A credit note's JSON as GET /credit-notes/{id} returns it (the `credit_note.created` event's data). */
export function creditNoteEventJson(n: CreditNote, pdfUrl: string): string {
  const json = toJson(CreditNoteSchema, creditNoteToPb(n, pdfUrl), { useProtoFieldName: true, alwaysEmitImplicit: true });
  const out = restJson(CreditNoteSchema, json as never);
  return stringifyRest(out.json, out.rawNumbers);
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
