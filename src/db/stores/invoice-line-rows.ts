/** An invoice line row as the domain reads it (the invoice store's reads, and the lines tied to a period's closing invoice), and its key as written. */
import { MAX_LINE_KEY } from "../../billing/subscriptions/line-keys.js";
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

/**
 * Domain → a line's key as stored: whole. Late usage compares it with the key of the line priced
 * again, so one cut to the column (varchar(1000)) would never match; the domain keeps keys to
 * MAX_LINE_KEY (storedLine, line-keys.ts), and a longer one is refused here, never cut.
 */
export function keyRow(invoiceId: string, key: string | null): string | null {
  if (key !== null && key.length > MAX_LINE_KEY) throw new Error(`invoice ${invoiceId}: a line key of ${key.length} characters, over the ${MAX_LINE_KEY} stored (${key.slice(0, 100)}…)`);
  return key;
}
