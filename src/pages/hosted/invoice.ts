/**
 * The hosted invoice (GET /hosted/invoices/{token}): readable, printable, with a Print button.
 * Each line's kind is named where it is not a plain charge (minimum, maximum, proration,
 * adjustment, commitment true-up, credit purchase); amounts have the currency's decimals, a credit
 * its minus sign. Under the total, the credits applied (per grant) and the amount due.
 */
import { displayMoney } from "../../billing/money.js";
import type { Invoice } from "../../billing/subscriptions/types.js";
import { type Html, html } from "../html.js";
import { type CreditedInvoice, creditRowsHtml, lineAmountHtml, lineDescriptionHtml } from "../prices.js";
import { PRINT_SCRIPT } from "../shell.js";

const day = (d: Date) => d.toISOString().slice(0, 10);

export function invoiceHtml(inv: Invoice & CreditedInvoice): Html {
  const m = (v: string) => displayMoney(v, inv.currency);
  const rows = inv.lines.map(
    (l) =>
      html`<tr><td>${lineDescriptionHtml(l)}</td><td class="n">${l.quantity}</td><td class="n">${lineAmountHtml(l.unitAmount, inv.currency)}</td><td class="n">${lineAmountHtml(l.amount, inv.currency)}</td></tr>`,
  );
  const draft =
    inv.status === "draft" && inv.finalizesAt
      ? html`\n<p class="draft">Draft: usage that still arrives for this period is added until it is finalized, ${inv.finalizesAt.toISOString().replace(".000Z", "Z")}. Amounts may change until then.</p>`
      : "";
  return html`<main><h1>Invoice ${inv.id}</h1>
<p>Status: <strong>${inv.status}</strong> · Issued ${day(inv.createdAt)} · Period ${day(inv.periodStart)} – ${day(inv.periodEnd)}</p>${draft}
<table><thead><tr><th>Description</th><th class="n">Quantity</th><th class="n">Unit price</th><th class="n">Amount</th></tr></thead>
<tbody>${rows.length > 0 ? rows : html`<tr><td colspan="4">No charges</td></tr>`}</tbody>
<tfoot><tr class="total"><td colspan="3">Total</td><td class="n">${m(inv.total)}</td></tr>${creditRowsHtml(inv, 3)}</tfoot></table>${inv.lines.some((l) => l.amount.startsWith("-")) || (inv.creditsApplied ?? []).length > 0 ? html`\n<p class="muted">A negative amount is a credit.</p>` : ""}
<p class="noprint"><button type="button" onclick="${PRINT_SCRIPT}">Print</button></p></main>`;
}
