/** The dunning fields of an invoice row (DESIGN §16), read by the invoice store and by dunning's. */
import type { InvoicePayment } from "../../billing/payments/types.js";
import type { Invoice } from "../../billing/subscriptions/types.js";
import type { InvoiceRow } from "../entities/index.js";
import { fromDbTime, fromJsonText } from "../raw.js";

/** The dunning fields of an invoice row (the invoice store's row mapping spreads them in). */
export function dunningFromRow(r: InvoiceRow): Pick<Invoice, "attemptCount" | "nextPaymentAttempt" | "payment"> {
  const state = r.payment_state ? fromJsonText<InvoicePayment>(r.payment_state) : null;
  return { attemptCount: Number(r.attempt_count ?? 0), nextPaymentAttempt: r.next_payment_attempt ? fromDbTime(r.next_payment_attempt) : null, payment: state };
}
