/**
 * Event resources as the REST API returns them (the same converters and JSON writer as a GET of
 * that resource): the encoder the outbox store is given (src/billing never imports the wire), so
 * each event freezes the resource as it was when the change committed. Checkouts, credit alerts,
 * invoice refunds and usage thresholds have no GET of their own: their JSON is written here, in the same conventions
 * (snake_case, every field present, `null` for absent values, RFC 3339 times, decimal strings).
 */
import { toJson } from "@bufbuild/protobuf";
import { TimestampSchema } from "@bufbuild/protobuf/wkt";
import type { EventEncoder, EventResource } from "../billing/events/types.js";
import { DiscountSchema } from "../gen/billing/v1/coupon_pb.js";
import { CreditGrantSchema } from "../gen/billing/v1/credit_pb.js";
import { CreditNoteSchema } from "../gen/billing/v1/credit_note_pb.js";
import { InvoiceSchema } from "../gen/billing/v1/invoice_pb.js";
import { SubjectSchema } from "../gen/billing/v1/subject_pb.js";
import { SubscriptionSchema } from "../gen/billing/v1/subscription_pb.js";
import { invoiceToPb, subscriptionToPb } from "./convert/billing.js";
import { restJsonText as rest, ts } from "./convert/common.js";
import { discountToPb } from "./convert/coupons.js";
import { creditNoteToPb } from "./convert/credit-notes.js";
import { grantToPb } from "./convert/credits.js";
import { subjectToPb } from "./convert/subject.js";

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
        return rest(CreditGrantSchema, grantToPb(r.grant));
      case "credit_alert": {
        // credit.balance_low / credit.depleted: the subject's credit in one currency.
        const a = r.alert;
        return JSON.stringify({
          subject_id: a.subjectId,
          currency_code: a.currency,
          credit_balance: { currency_code: a.currency, value: a.balance },
          available_credit: { currency_code: a.currency, value: a.available },
          low_balance_threshold: a.threshold === null ? null : { currency_code: a.currency, value: a.threshold },
        });
      }
      case "invoice_refund": {
        // invoice.refund_failed: a refund of one of the invoice's payments (not a credit note's) failed; the invoice as GET returns it.
        const { invoice: i, refund: f } = r;
        return JSON.stringify({
          invoice_id: i.id,
          subject_id: i.subjectId,
          kind: r.refundKind,
          payment_reference: f.reference,
          refund_id: f.refundId,
          amount: f.amount === null ? null : { currency_code: i.currency, value: f.amount },
          failure_reason: f.failed ?? null,
          invoice: JSON.parse(rest(InvoiceSchema, invoiceToPb(i, `${publicBaseUrl()}/hosted/invoices/${i.hostedToken}`))),
        });
      }
      case "credit_note":
        return rest(CreditNoteSchema, creditNoteToPb(r.creditNote, `${publicBaseUrl()}/credit-notes/${r.creditNote.id}/pdf`));
      case "discount":
        return rest(DiscountSchema, discountToPb({ discount: r.discount, coupon: r.coupon }, new Date()));
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
