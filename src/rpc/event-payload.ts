/**
 * Event resources as the REST API returns them (the same converters and JSON writer as a GET of
 * that resource): the encoder the outbox store is given (src/billing never imports the wire), so
 * each event freezes the resource as it was when the change committed. Checkouts and usage
 * thresholds have no GET of their own: their JSON is written here, in the same conventions
 * (snake_case, every field present, `null` for absent values, RFC 3339 times, decimal strings).
 */
import { type DescMessage, type MessageShape, toJson } from "@bufbuild/protobuf";
import type { EventEncoder, EventResource } from "../billing/events/types.js";
import { InvoiceSchema } from "../gen/billing/v1/invoice_pb.js";
import { SubjectSchema } from "../gen/billing/v1/subject_pb.js";
import { SubscriptionSchema } from "../gen/billing/v1/subscription_pb.js";
import { TimestampSchema } from "@bufbuild/protobuf/wkt";
import { invoiceToPb, subscriptionToPb } from "./convert/billing.js";
import { ts } from "./convert/common.js";
import { creditAlertJson, grantEventJson } from "./convert/credits.js";
import { creditNoteEventJson } from "./convert/credit-notes.js";
import { discountEventJson } from "./convert/coupons.js";
import { subjectToPb } from "./convert/subject.js";
import { restJson, stringifyRest } from "./json-out.js";

function rest<D extends DescMessage>(desc: D, msg: MessageShape<D>): string {
  const json = toJson(desc, msg, { useProtoFieldName: true, alwaysEmitImplicit: true });
  const out = restJson(desc, json as never);
  return stringifyRest(out.json, out.rawNumbers);
}

/** A time as the API writes it (protobuf-es Timestamp JSON: RFC 3339, UTC, fractions only when there are any). */
const iso = (d: Date | null) => (d ? (toJson(TimestampSchema, ts(d)) as string) : null);

/** The encoder; `publicBaseUrl` builds invoices' `hosted_url` as GET /invoices/{id} does. */
export function eventEncoder(publicBaseUrl: () => string): EventEncoder {
  return (r: EventResource): string => {
    switch (r.kind) {
      case "subject":
        return rest(SubjectSchema, subjectToPb(r.subject));
      case "subscription":
        return rest(SubscriptionSchema, subscriptionToPb(r.subscription));
      case "invoice":
        return rest(InvoiceSchema, invoiceToPb(r.invoice, `${publicBaseUrl()}/hosted/invoices/${r.invoice.hostedToken}`));
      case "checkout": {
        const c = r.checkout;
        return JSON.stringify({
          id: c.id,
          subject_id: c.subjectId,
          kind: c.kind,
          status: c.status,
          amount_due: c.amountDue,
          currency_code: c.currency,
          description: c.description,
          subscription_id: r.subscriptionId,
          failure_message: r.failure,
          created_at: iso(c.createdAt),
          expires_at: iso(c.expiresAt),
        });
      }
      case "credit_grant":
        return grantEventJson(r.grant);
      case "credit_alert":
        return creditAlertJson(r.alert);
      case "credit_note":
        return creditNoteEventJson(r.creditNote, `${publicBaseUrl()}/credit-notes/${r.creditNote.id}/pdf`);
      case "discount":
        return discountEventJson({ discount: r.discount, coupon: r.coupon });
      case "usage_threshold": {
        const t = r.threshold;
        return JSON.stringify({
          subscription_id: t.subscriptionId,
          subject_id: t.subjectId,
          rate_code: t.rateCode,
          threshold_percent: t.percent,
          included_units: t.includedUnits,
          used_units: t.usedUnits,
          period: { start: iso(t.periodStart), end: iso(t.periodEnd), inclusive_start: true, inclusive_end: false },
        });
      }
    }
  };
}
