/**
 * The PDF of a finalized invoice and of a credit note (DESIGN §15), pure: the document from the
 * domain objects alone, the same bytes for the same input. Every amount through displayMoney (the
 * currency's exponent: JPY 0 decimals, USD 2, KWD 3), as the hosted page shows it; a credit
 * (discount, credit applied, amount credited) negative.
 */
import type { CreditNote, CreditNoteOutcome, CreditNoteReason } from "../../billing/credit-notes/types.js";
import type { BookedTax } from "../../billing/invoicing/booking.js";
import { dec, displayMoney } from "../../billing/money.js";
import { carriedDescription } from "../../billing/payments/carries.js";
import { type Invoice, amountDueOf } from "../../billing/subscriptions/types.js";
import { type Paper, PdfWriter, type Row, buyerLines, day, paperFor, sellerLines } from "./document.js";

export interface PdfOptions {
  /** `?paper=`: a4 or letter; absent: by the seller's country (paperFor). */
  paper?: string | null;
}

const negate = (v: string) => (v.startsWith("-") ? v.slice(1) : `-${v}`);
const nonZero = (v: string | undefined) => v !== undefined && !dec(v).isZero();

/** "VAT 20% (included)". */
export function taxLabel(t: Pick<BookedTax, "displayName" | "percentage" | "inclusive">): string {
  return `${t.displayName} ${t.percentage}%${t.inclusive ? " (included)" : ""}`;
}

function paperOf(inv: Invoice, options: PdfOptions): Paper {
  return paperFor(options.paper, inv.seller?.address?.country);
}

/** The invoice's number as printed (a draft has none: its ID). */
export const invoiceTitle = (inv: Pick<Invoice, "number" | "id">) => inv.number || inv.id;

/** The PDF of `inv` (finalized: a draft has none; the caller refuses it). */
export function invoicePdf(inv: Invoice, options: PdfOptions = {}): Promise<Buffer> {
  const m = (v: string) => displayMoney(v, inv.currency);
  const at = inv.finalizedAt ?? inv.createdAt;
  const w = new PdfWriter(paperOf(inv, options), `Invoice ${invoiceTitle(inv)}`, at);
  w.title("Invoice", invoiceTitle(inv));
  w.facts([`Issued ${day(at)}`, `Period ${day(inv.periodStart)} – ${day(inv.periodEnd)}`, `Status ${inv.status}`]);
  w.parties(["From", sellerLines(inv.seller)], ["Bill to", buyerLines(inv.customer, inv.customerName ?? inv.subjectId)]);
  const rows: Row[] = inv.lines.map((l) => ({
    cells: [l.description, l.quantity, m(l.unitAmount), m(l.amount)],
    details: [
      ...(l.discountAmounts ?? []).map((d): [string, string] => [`Discount: ${d.name}`, m(negate(d.amount))]),
      ...(l.taxAmounts ?? []).map((t): [string, string] => [taxLabel(t), m(t.amount)]),
    ],
  }));
  w.table(["Description", "Quantity", "Unit price", "Amount"], rows, "No charges");
  for (const d of inv.discounts ?? []) w.total(`Discount: ${d.name}`, m(negate(d.amount)));
  w.total("Subtotal", m(inv.subtotal ?? inv.total));
  const taxes = inv.taxAmounts ?? [];
  for (const t of taxes) w.total(`${taxLabel(t)} on ${m(t.taxableAmount)}`, m(t.amount));
  if (taxes.length > 0 || nonZero(inv.totalTax)) w.total("Total tax", m(inv.totalTax ?? "0"));
  w.total("Total", m(inv.total), true);
  // Earlier invoices' balances carried in (payments/carries.ts): outside the total, in the amount due.
  for (const d of inv.carriedIn ?? []) w.total(carriedDescription(d), m(d.amount));
  for (const a of inv.creditsApplied ?? []) w.total(`Credit applied ${a.grantId}`, m(negate(a.amount)));
  if (nonZero(inv.amountCredited)) w.total("Amount credited", m(negate(inv.amountCredited as string)));
  w.total("Amount due", m(amountDueOf(inv)), true);
  w.paragraphs(inv.notes ?? []);
  return w.finish(inv.seller?.footer ?? "");
}

const REASONS: Record<CreditNoteReason, string> = {
  duplicate: "Duplicate",
  fraudulent: "Fraudulent",
  order_change: "Order change",
  product_unsatisfactory: "Product unsatisfactory",
  other: "Other",
};

const OUTCOMES: Record<CreditNoteOutcome, string> = {
  refund: "Refunded to the payment method.",
  credit_balance: "Credited to the customer's balance, for later invoices.",
  reduce_amount_due: "Deducted from the invoice's amount due.",
};

/** The PDF of credit note `note` of invoice `inv` (the parties are the invoice's). */
export function creditNotePdf(note: CreditNote, inv: Invoice, options: PdfOptions = {}): Promise<Buffer> {
  const m = (v: string) => displayMoney(v, note.currency);
  const w = new PdfWriter(paperOf(inv, options), `Credit note ${note.number}`, note.createdAt);
  w.title("Credit note", note.number);
  w.facts([
    `Issued ${day(note.createdAt)}`,
    `For invoice ${note.invoiceNumber || inv.number || inv.id}`,
    `Reason ${REASONS[note.reason] ?? note.reason}`,
    ...(note.status === "void" ? ["Status void"] : []),
  ]);
  w.parties(["From", sellerLines(inv.seller)], ["Credit to", buyerLines(inv.customer, inv.customerName ?? inv.subjectId)]);
  const rows: Row[] = note.lines.map((l) => ({
    cells: [l.description, "", "", m(l.amount)],
    details: nonZero(l.taxAmount) ? [["Tax included", m(l.taxAmount)]] : [],
  }));
  w.table(["Description", "", "", "Amount"], rows, "No lines");
  w.total("Subtotal", m(note.subtotal));
  if (nonZero(note.totalTax)) w.total("Total tax", m(note.totalTax));
  w.total("Total credited", m(note.total), true);
  w.paragraphs([OUTCOMES[note.outcome] ?? "", note.memo ?? ""].filter((s) => s !== ""));
  return w.finish(inv.seller?.footer ?? "");
}
