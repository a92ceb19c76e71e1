/**
 * Where the PDFs are served (DESIGN §15), REST only (no RPC returns bytes):
 *
 *   GET /invoices/{invoice_id}/pdf             with the API key, as GetInvoice (rest/gateway.ts RawRoute)
 *   GET /credit-notes/{credit_note_id}/pdf     with the API key, as GetCreditNote
 *   GET /hosted/invoices/{token}/pdf           no key: the hosted invoice page's token (hosted/checkout.ts)
 *
 * `?paper=a4|letter` (default by the seller's country). An unknown ID, or one of another
 * environment, is 404; a draft has no PDF (400 failed_precondition, INVOICE_NOT_FINALIZED).
 */
import type { CreditNote } from "../../billing/credit-notes/types.js";
import { FailedPreconditionError, UnauthenticatedError } from "../../billing/errors.js";
import type { Invoices } from "../../billing/subscriptions/invoices.js";
import type { Invoice } from "../../billing/subscriptions/types.js";
import type { Caller } from "../../billing/tenancy.js";
import { CreditNoteService } from "../../gen/billing/v1/credit_note_service_pb.js";
import { InvoiceService } from "../../gen/billing/v1/invoice_service_pb.js";
import type { RawRoute } from "../../rest/gateway.js";
import type { Res } from "../shell.js";
import { creditNotePdf, invoicePdf, invoiceTitle } from "./invoice-pdf.js";

/** The credit note read (credit-notes service), when it is wired. */
export interface CreditNoteReads {
  creditNote(caller: Caller, id: string): Promise<CreditNote>;
}

/** Refuses a draft: it has no number and its amounts may still change. */
export function checkFinalized(inv: Invoice): void {
  if (inv.status === "draft") {
    throw new FailedPreconditionError("INVOICE_NOT_FINALIZED", `invoice ${inv.id} is a draft; its PDF exists once it is finalized`);
  }
}

/** Sends `pdf` inline, named `<name>.pdf`. */
export function sendPdf(res: Res, pdf: Buffer, name: string): void {
  const file = name.replace(/[^0-9A-Za-z._-]/g, "_");
  res.writeHead(200, {
    "content-type": "application/pdf",
    "content-length": pdf.length,
    "content-disposition": `inline; filename="${file}.pdf"`,
    "cache-control": "private, no-store",
  });
  res.end(pdf);
}

/** The invoice's PDF for an answer (`url`: its `paper` parameter). */
export async function sendInvoicePdf(res: Res, inv: Invoice, url: URL): Promise<void> {
  checkFinalized(inv);
  sendPdf(res, await invoicePdf(inv, { paper: url.searchParams.get("paper") }), invoiceTitle(inv));
}

function callerOf(caller: Caller | undefined): Caller {
  if (!caller) throw new UnauthenticatedError("API_KEY_MISSING", "missing API key: send it in the X-API-Key header");
  return caller;
}

/** The REST-only PDF routes for the gateway; the credit note's once its read is wired. */
export function pdfRoutes(invoices: Invoices, creditNotes?: CreditNoteReads): RawRoute[] {
  const routes: RawRoute[] = [
    {
      template: "/invoices/{invoice_id}/pdf",
      method: InvoiceService.method.getInvoice,
      serve: async (caller, [id], url, res) => sendInvoicePdf(res, await invoices.invoice(callerOf(caller), id ?? ""), url),
    },
  ];
  if (creditNotes) {
    routes.push({
      template: "/credit-notes/{credit_note_id}/pdf",
      method: CreditNoteService.method.getCreditNote,
      serve: async (caller, [id], url, res) => {
        const who = callerOf(caller);
        const note = await creditNotes.creditNote(who, id ?? "");
        const inv = await invoices.invoice(who, note.invoiceId);
        sendPdf(res, await creditNotePdf(note, inv, { paper: url.searchParams.get("paper") }), note.number);
      },
    });
  }
  return routes;
}
