/** Connect implementation of the credit note service (DESIGN §15): wire ⇄ domain only. */
import type { ServiceImpl } from "@connectrpc/connect";
import type { CreditNotes } from "../../billing/credit-notes/credit-notes.js";
import type { CreditNoteService } from "../../gen/billing/v1/credit_note_service_pb.js";
import { pageOf } from "../convert/common.js";
import { callerOf, idempotencyKeyOf } from "../context.js";
import { createCreditNoteInput, creditNoteToPb, listCreditNotesInput } from "../convert/credit-notes.js";

export function creditNoteService(notes: CreditNotes): ServiceImpl<typeof CreditNoteService> {
  return {
    async createCreditNote(req, ctx) {
      // The request's Idempotency-Key (REST and gRPC alike) names the note: its retry refunds once (credit-notes.ts).
      const n = await notes.create(callerOf(ctx), createCreditNoteInput(req), idempotencyKeyOf(ctx));
      return { creditNote: creditNoteToPb(n, notes.pdfUrl(n)) };
    },
    async getCreditNote(req, ctx) {
      const n = await notes.creditNote(callerOf(ctx), req.creditNoteId);
      return { creditNote: creditNoteToPb(n, notes.pdfUrl(n)) };
    },
    async listCreditNotes(req, ctx) {
      return pageOf(await notes.list(callerOf(ctx), listCreditNotesInput(req)), "creditNotes", (n) => creditNoteToPb(n, notes.pdfUrl(n)));
    },
  };
}
