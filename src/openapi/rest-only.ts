/**
 * The REST-only operations: GET routes with no RPC of their own (no RPC returns bytes), served by
 * the gateway's raw routes (pages/pdf/routes.ts pdfRoutes) and admitted as their resource's Get
 * (its key, its rate class). They are not in the contract, so they are listed here, explicitly,
 * for the document; a test holds this list to the routes the gateway serves.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import { CreditNoteService } from "../gen/billing/v1/credit_note_service_pb.js";
import { InvoiceService } from "../gen/billing/v1/invoice_service_pb.js";
import type { RestRoute } from "../rest/gateway.js";
import { errorRefs, errorStatuses } from "./errors.js";
import type { Build } from "./operations.js";
import type { Operation, Parameter } from "./types.js";

export interface RestOnlyOperation {
  template: string;
  /** The RPC it is admitted as: its key and rate class, its tag in the document. */
  admittedAs: DescMethod;
  operationId: string;
  summary: string;
  description: string;
  /** The path parameter and what it names. */
  param: { name: string; description: string };
}

const PAPER = "`?paper=a4|letter`: the paper size; absent or empty, Letter for a seller in the US or Canada, else A4. Anything else is a 400 invalid_argument naming `paper`.";

export const REST_ONLY: RestOnlyOperation[] = [
  {
    template: "/invoices/{invoice_id}/pdf",
    admittedAs: InvoiceService.method.getInvoice,
    operationId: "GetInvoicePdf",
    summary: "An invoice's PDF.",
    description: `An invoice's PDF (REST only, with the key that may read the invoice): its number, the seller and the buyer, the lines with their discounts and taxes, the totals, the credits applied and the amount due. A draft has none: FAILED_PRECONDITION (400), reason INVOICE_NOT_FINALIZED. ${PAPER}`,
    param: { name: "invoice_id", description: "The invoice's ID." },
  },
  {
    template: "/credit-notes/{credit_note_id}/pdf",
    admittedAs: CreditNoteService.method.getCreditNote,
    operationId: "GetCreditNotePdf",
    summary: "A credit note's PDF.",
    description: `A credit note's PDF (REST only, with the key that may read the credit note): its number, the invoice it credits, the parties, its lines and amounts. ${PAPER}`,
    param: { name: "credit_note_id", description: "The credit note's ID." },
  },
];

/** The operation as a GET route of the gateway's (what errorStatuses and the tests read). */
export function restOnlyRoute(op: RestOnlyOperation): RestRoute {
  const pattern = op.template.replace(/\{[a-z_]+\}/g, "([^/]+)");
  const literalSegments = op.template.split("/").filter((seg) => seg !== "" && !seg.startsWith("{")).length;
  return { httpMethod: "GET", template: op.template, method: op.admittedAs, body: "", responseBody: "", regex: new RegExp(`^${pattern}/?$`), params: [op.param.name], literalSegments };
}

const PAPER_PARAM: Parameter = {
  name: "paper",
  in: "query",
  required: false,
  description: "The paper size; absent: by the seller's country (Letter in the US and Canada, else A4).",
  schema: { type: "string", enum: ["a4", "letter"] },
};

/** The operation in the document; records its ID and error statuses in `b`. */
export function restOnlyOperation(op: RestOnlyOperation, b: Build): Operation {
  // The statuses of its kind (a GET with a path parameter and a query), as the route it is admitted as.
  const statuses = errorStatuses(restOnlyRoute(op), op.description, true);
  for (const s of statuses) b.usedStatuses.add(s);
  b.operationIds.add(op.operationId);
  return {
    operationId: op.operationId,
    tags: [op.admittedAs.parent.name],
    summary: op.summary,
    description: op.description,
    parameters: [{ name: op.param.name, in: "path", required: true, description: op.param.description, schema: { type: "string" } }, PAPER_PARAM],
    responses: {
      "200": {
        description: "The PDF (Content-Disposition inline, named by its number).",
        content: { "application/pdf": { schema: { type: "string", format: "binary" } } },
      },
      ...errorRefs(statuses),
    },
    "x-rest-only": true,
  };
}
