/** An invoice line row as the domain reads it (the invoice store's reads, and the lines tied to a period's closing invoice), and its key as written. */
import { storedKey } from "../../billing/subscriptions/line-keys.js";
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
    ...(l.booking?.paidTax ? { paidTax: l.booking.paidTax as InvoiceLine["paidTax"] } : {}),
  };
}

/** Domain → a line's booking JSON: its discounts and taxes, and a credit's taxes as paid (paidTax); null when it has none. */
export function lineBookingRow(l: InvoiceLine): InvoiceLineRow["booking"] {
  const paid = l.paidTax ? { paidTax: l.paidTax } : {};
  return l.discountAmounts?.length || l.taxAmounts?.length || l.paidTax ? { discountAmounts: l.discountAmounts ?? [], taxAmounts: l.taxAmounts ?? [], ...paid } : null;
}

/**
 * Domain → a line's key as stored: whole. Late usage compares it with the key of the line priced
 * again, so one cut to the column (varchar(1000)) would never match; the domain keeps keys to
 * MAX_LINE_KEY (storedLine, line-keys.ts). A longer one can only be a row read back and written
 * again (a draft finalized: a cut key SQLite read back longer, its half character replaced): it is
 * stored in the domain's form (storedKey), never cut.
 */
export function keyRow(key: string | null): string | null {
  return storedKey(key);
}
