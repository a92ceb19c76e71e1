/**
 * The REST-only operations, not in the contract, so listed here, explicitly, for the document:
 *
 * - REST_ONLY: GET routes with no RPC of their own (no RPC returns bytes), served by the gateway's
 *   raw routes (pages/pdf/routes.ts pdfRoutes) and admitted as their resource's Get (its key, its
 *   rate class); a test holds this list to the routes the gateway serves.
 * - REST_ONLY_CALLBACKS: keyless POSTs called by a payment provider, not by an API client (Stripe's
 *   webhooks, src/providers/stripe/webhooks.ts), authenticated by the caller's signature; their
 *   answers are their own small JSON bodies, not the API's Error.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import { PaymentSettingsService } from "../gen/billing/v1/payment_settings_service_pb.js";
import { CreditNoteService } from "../gen/billing/v1/credit_note_service_pb.js";
import { InvoiceService } from "../gen/billing/v1/invoice_service_pb.js";
import { type RestRoute, templatePattern } from "../rest/gateway.js";
import { errorRefs, errorStatuses } from "./errors.js";
import type { Build } from "./operations.js";
import type { Operation, Parameter, Schema } from "./types.js";

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
  return { httpMethod: "GET", template: op.template, method: op.admittedAs, body: "", responseBody: "", ...templatePattern(op.template) };
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

/** A keyless POST called by a payment provider (no RPC, no X-API-Key), with its own JSON answers. */
export interface RestOnlyCallback {
  template: string;
  /** The tag it is listed under in the document (the service whose settings configure it). */
  tag: string;
  operationId: string;
  summary: string;
  description: string;
  /** The path parameter and what it names. */
  param: { name: string; description: string };
  /** The header that authenticates the caller. */
  signatureHeader: { name: string; description: string };
  requestDescription: string;
  /** Each status the route answers with: what it means and its JSON body. */
  responses: Record<string, { description: string; schema: Schema }>;
}

const errorBody = (example: string): Schema => ({ type: "object", required: ["error"], additionalProperties: false, properties: { error: { type: "string", examples: [example] } } });

export const REST_ONLY_CALLBACKS: RestOnlyCallback[] = [
  {
    // src/providers/stripe/webhooks.ts answers these; keep the two in step.
    template: "/providers/stripe/webhooks/{environment_id}",
    tag: PaymentSettingsService.name,
    operationId: "ReceiveStripeWebhook",
    summary: "Stripe's webhooks (called by Stripe).",
    description:
      "Called by Stripe, not by an API client (REST only, no API key): the URL to give Stripe is the environment's `stripe_webhook_url` (GET /payment-settings). " +
      "The body is checked against the `Stripe-Signature` header with the environment's webhook signing secret, then each event is handled once by its id. " +
      "Handled: checkout.session.completed (a Checkout Session completed: the card saved, or an invoice paid on Stripe's page), payment_intent.succeeded (the invoice paid), payment_intent.payment_failed (the failure recorded, dunning decides); " +
      "setup_intent.succeeded, setup_intent.setup_failed, payment_method.attached, charge.succeeded, charge.failed, charge.refunded, refund.created, refund.updated, payment_intent.created and payment_intent.requires_action are acknowledged; any other type is answered 200 and ignored.",
    param: { name: "environment_id", description: "The environment whose Stripe account sends the events (the last segment of its `stripe_webhook_url`)." },
    signatureHeader: { name: "Stripe-Signature", description: "Stripe's signature of the body (t=…,v1=…), made with the endpoint's signing secret (whsec_…)." },
    requestDescription: "A Stripe event, as Stripe sends it (the raw body is what is signed).",
    responses: {
      "200": {
        description: "Received: handled, or a repeat of an event already handled, or a type that is ignored.",
        schema: { type: "object", required: ["received"], additionalProperties: false, properties: { received: { type: "boolean", const: true } } },
      },
      "400": {
        description: "The signature does not verify, or the environment is unknown, not on Stripe or has no webhook signing secret; nothing changes.",
        schema: errorBody("the Stripe-Signature header does not verify"),
      },
      "413": { description: "The body is over 1 MiB.", schema: errorBody("payload too large") },
      "500": { description: "The event could not be handled; nothing was recorded, so Stripe delivers it again later.", schema: errorBody("internal") },
    },
  },
];

/** The callback as the validator matches it: its method, template and path pattern. */
export function restOnlyCallbackRoute(op: RestOnlyCallback): { httpMethod: "POST"; template: string; regex: RegExp } {
  return { httpMethod: "POST", template: op.template, regex: new RegExp(`^${op.template.replace(/\{[a-z_]+\}/g, "([^/]+)")}/?$`) };
}

/** The callback in the document: no API key (security: none), its signature header, its own answers. */
export function restOnlyCallbackOperation(op: RestOnlyCallback, b: Build): Operation {
  b.operationIds.add(op.operationId);
  const responses: Record<string, Schema> = {};
  for (const [status, r] of Object.entries(op.responses)) responses[status] = { description: r.description, content: { "application/json": { schema: r.schema } } };
  return {
    operationId: op.operationId,
    tags: [op.tag],
    summary: op.summary,
    description: op.description,
    parameters: [
      { name: op.param.name, in: "path", required: true, description: op.param.description, schema: { type: "string" } },
      { name: op.signatureHeader.name, in: "header", required: true, description: op.signatureHeader.description, schema: { type: "string" } },
    ],
    requestBody: { required: true, content: { "application/json": { schema: { type: "object", description: op.requestDescription } } } },
    responses,
    security: [],
    "x-rest-only": true,
    "x-called-by": "Stripe",
  };
}
