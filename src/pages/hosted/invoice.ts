/**
 * The hosted invoice (GET /hosted/invoices/{token}): readable, printable, with a Print button.
 * Each line's kind is named where it is not a plain charge (minimum, maximum, proration,
 * adjustment, commitment true-up, credit purchase); amounts have the currency's decimals, a credit
 * its minus sign. Under the total, the credits applied (per grant) and the amount due. DESIGN §15:
 * its number, the seller and buyer, each line's discounts and taxes, the discounts, subtotal and
 * taxes with their rates, the amount credited, the legal notes, and its PDF (finalized only).
 */
import { dec, displayMoney } from "../../billing/money.js";
import { type Invoice, amountDueOf } from "../../billing/subscriptions/types.js";
import { type Html, html } from "../html.js";
import { buyerLines, sellerLines } from "../pdf/document.js";
import { invoiceTitle, taxLabel } from "../pdf/invoice-pdf.js";
import { type CreditedInvoice, creditRowsHtml, lineAmountHtml, lineDescriptionHtml } from "../prices.js";
import { PRINT_SCRIPT } from "../shell.js";

const day = (d: Date) => d.toISOString().slice(0, 10);
const negate = (v: string) => (v.startsWith("-") ? v.slice(1) : `-${v}`);

/** DESIGN §15: the seller and the buyer side by side (nothing when neither is known). */
function partiesHtml(inv: Invoice): Html | "" {
  const seller = sellerLines(inv.seller);
  const buyer = buyerLines(inv.customer, inv.customerName ?? "");
  if (seller.length === 0 && buyer.length === 0) return "";
  const block = (heading: string, lines: string[]) => html`<div><div class="muted">${heading}</div>${lines.map((l) => html`<div>${l}</div>`)}</div>`;
  return html`
<div class="parties" style="display:flex;gap:2rem;flex-wrap:wrap;margin:1rem 0">${seller.length > 0 ? block("From", seller) : ""}${buyer.length > 0 ? block("Bill to", buyer) : ""}</div>`;
}

/** Under the lines: the invoice's discounts, subtotal and taxes with their rates (only where it has any). */
function bookedRowsHtml(inv: Invoice, m: (v: string) => string): Html | "" {
  const discounts = inv.discounts ?? [];
  const taxes = inv.taxAmounts ?? [];
  if (discounts.length === 0 && taxes.length === 0 && dec(inv.totalTax ?? "0").isZero()) return "";
  const row = (label: string, amount: string, cls = "") => html`<tr${cls ? html` class="${cls}"` : ""}><td colspan="3">${label}</td><td class="n">${lineAmountHtml(amount, inv.currency)}</td></tr>`;
  return html`${discounts.map((d) => row(`Discount: ${d.name}`, negate(d.amount), "discount"))}${row("Subtotal", inv.subtotal ?? inv.total, "subtotal")}${taxes.map((t) => row(`${taxLabel(t)} on ${m(t.taxableAmount)}`, t.amount, "tax"))}${row("Total tax", inv.totalTax ?? "0", "total-tax")}`;
}

/**
 * DESIGN §16: a charge waiting for the customer (authentication): "Complete payment" — a form that
 * confirms it here (the test provider simulates the authentication), or a link to the provider's
 * own page (Stripe). `error`: why the last try did not complete.
 */
export interface PendingPayment {
  confirmHere: boolean;
  actionUrl: string | null;
  error?: string;
}

function payHtml(inv: Invoice, pay: PendingPayment | undefined): Html | "" {
  if (!pay) return "";
  const error = pay.error ? html`<p class="error" role="alert">${pay.error}</p>` : "";
  const action = pay.confirmHere
    ? html`<form method="post" action="/hosted/invoices/${inv.hostedToken}/pay"><button type="submit">Complete payment</button></form>`
    : pay.actionUrl && /^https?:\/\//i.test(pay.actionUrl)
      ? html`<p><a class="button" href="${pay.actionUrl}" rel="noopener">Complete payment</a></p>`
      : "";
  return html`
<section id="pay" class="noprint"><h2>Complete payment</h2><p>Your bank asks you to confirm this payment of ${displayMoney(amountDueOf(inv), inv.currency)}.</p>${error}${action}</section>`;
}

export function invoiceHtml(inv: Invoice & CreditedInvoice, pay?: PendingPayment): Html {
  const m = (v: string) => displayMoney(v, inv.currency);
  const rows = inv.lines.map(
    (l) =>
      html`<tr><td>${lineDescriptionHtml(l)}</td><td class="n">${l.quantity}</td><td class="n">${lineAmountHtml(l.unitAmount, inv.currency)}</td><td class="n">${lineAmountHtml(l.amount, inv.currency)}</td></tr>${[
        ...(l.discountAmounts ?? []).map((d) => html`<tr class="detail muted"><td colspan="3">Discount: ${d.name}</td><td class="n">${lineAmountHtml(negate(d.amount), inv.currency)}</td></tr>`),
        ...(l.taxAmounts ?? []).map((t) => html`<tr class="detail muted"><td colspan="3">${taxLabel(t)}</td><td class="n">${m(t.amount)}</td></tr>`),
      ]}`,
  );
  const credited =
    inv.amountCredited && !dec(inv.amountCredited).isZero()
      ? html`<tr class="amount-credited"><td colspan="3">Amount credited</td><td class="n">${lineAmountHtml(negate(inv.amountCredited), inv.currency)}</td></tr>`
      : "";
  const notes = (inv.notes ?? []).map(
    (n) => html`
<p class="note">${n}</p>`,
  );
  const pdf = inv.status === "draft" ? "" : html` <a href="/hosted/invoices/${inv.hostedToken}/pdf">Download PDF</a>`;
  const draft =
    inv.status === "draft" && inv.finalizesAt
      ? html`\n<p class="draft">Draft: usage that still arrives for this period is added until it is finalized, ${inv.finalizesAt.toISOString().replace(".000Z", "Z")}. Amounts may change until then.</p>`
      : "";
  return html`<main><h1>Invoice ${invoiceTitle(inv)}</h1>
<p>Status: <strong>${inv.status}</strong> · Issued ${day(inv.finalizedAt ?? inv.createdAt)} · Period ${day(inv.periodStart)} – ${day(inv.periodEnd)}</p>${draft}${partiesHtml(inv)}
<table><thead><tr><th>Description</th><th class="n">Quantity</th><th class="n">Unit price</th><th class="n">Amount</th></tr></thead>
<tbody>${rows.length > 0 ? rows : html`<tr><td colspan="4">No charges</td></tr>`}</tbody>
<tfoot>${bookedRowsHtml(inv, m)}<tr class="total"><td colspan="3">Total</td><td class="n">${m(inv.total)}</td></tr>${credited}${creditRowsHtml(inv, 3)}</tfoot></table>${notes}${inv.lines.some((l) => l.amount.startsWith("-")) || (inv.creditsApplied ?? []).length > 0 ? html`\n<p class="muted">A negative amount is a credit.</p>` : ""}
<p class="noprint"><button type="button" onclick="${PRINT_SCRIPT}">Print</button>${pdf}</p>${payHtml(inv, pay)}</main>`;
}
