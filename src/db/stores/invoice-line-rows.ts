/** An invoice line row as the domain reads it (the invoice store's reads, and the lines tied to a period's closing invoice). */
import type { InvoiceLine, InvoiceLineKind } from "../../billing/subscriptions/types.js";
import type { InvoiceLineRow } from "../entities/index.js";

/** Rows → domain: one invoice line. */
export function lineFromRow(l: InvoiceLineRow): InvoiceLine {
  return {
    description: l.description,
    quantity: l.quantity,
    unitAmount: l.unit_amount,
    amount: l.amount,
    kind: (l.kind ?? "charge") as InvoiceLineKind,
    key: l.line_key ?? null,
    windowInvoiceId: l.window_invoice_id ?? null,
    discountAmounts: (l.booking?.discountAmounts ?? []) as InvoiceLine["discountAmounts"],
    taxAmounts: (l.booking?.taxAmounts ?? []) as InvoiceLine["taxAmounts"],
  };
}
