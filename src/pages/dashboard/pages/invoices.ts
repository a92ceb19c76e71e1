/**
 * GET /dashboard/invoices[?status=] and GET /dashboard/invoices/{id} (with finalize for a draft,
 * void for an open one, the hosted page's link, and the credits applied with the amount due).
 */
import { displayMoney } from "../../../billing/money.js";
import { carriedDescription } from "../../../billing/payments/carries.js";
import { INVOICE_STATUSES } from "../../../billing/subscriptions/invoices.js";
import type { Invoice } from "../../../billing/subscriptions/types.js";
import { type Html, html, join } from "../../html.js";
import { type CreditedInvoice, lineAmountHtml, lineDescriptionHtml } from "../../prices.js";
import { INVOICE_HEAD, PAGE, type PageContext, type View, invoiceRows, notice, offsetOf, subLink, subjectNameLink, subjectNames } from "../common.js";
import { badge, csrfField, minute, pager, table } from "../layout.js";

export async function invoicesPage({ services: s, caller: c, query: q }: PageContext): Promise<View> {
  const status = q.get("status") ?? "";
  const offset = offsetOf(q);
  const result = await s.invoices.listAll(c, status, PAGE, offset);
  const options = ["", ...INVOICE_STATUSES].map((x) => html`<option value="${x}"${x === status ? html` selected` : ""}>${x || "any"}</option>`);
  const body = html`<h1>Invoices</h1><p><a href="/dashboard/invoice-settings">Invoice settings</a> <span class="muted">(number prefix, seller)</span></p>
<form method="get" action="/dashboard/invoices" class="filters"><div><label for="status">Status</label><select id="status" name="status">${options}</select></div><div><button type="submit">Filter</button></div></form>
${table("Invoices, newest first", INVOICE_HEAD, invoiceRows(result.items, await subjectNames(s, c, result.items)), "No invoices match.")}
${pager("/dashboard/invoices", q, offset, PAGE, result.hasMore)}`;
  return { title: "Invoices", body, current: "/dashboard/invoices" };
}

/** What earlier invoices carried to it (outside its total), the credits it applied, per grant (negative), and its amount due; nothing when neither. */
function creditsHtml(inv: CreditedInvoice): Html | "" {
  const applied = inv.creditsApplied ?? [];
  if (applied.length === 0 && (inv.amountDue === undefined || inv.amountDue === inv.total)) return "";
  const rows = applied.map((a) => html`<div><span class="mono">${a.grantId}</span> ${lineAmountHtml(`-${a.amount}`, inv.currency)}</div>`);
  const carried = (inv.carriedIn ?? []).map((d) => html`<div>${carriedDescription(d)} ${displayMoney(d.amount, inv.currency)}</div>`);
  return html`${carried.length > 0 ? html`<dt>Carried in</dt><dd>${carried}</dd>` : ""}<dt>${inv.status === "draft" ? "Credits to apply" : "Credits applied"}</dt><dd>${rows.length > 0 ? rows : "none"}</dd><dt>Amount due</dt><dd><strong>${displayMoney(inv.amountDue ?? inv.total, inv.currency)}</strong></dd>`;
}

/**
 * An open invoice's payment as dunning left it (DESIGN §16): processing at the provider (a bank
 * debit), or the last failure's message; a paid one's amount due below the provider's minimum,
 * carried to the next invoice (payments/carries.ts).
 */
function paymentHtml(inv: Pick<Invoice, "status" | "payment" | "currency">): Html | "" {
  const carried = inv.status === "paid" ? inv.payment?.carried : undefined;
  if (carried) return html`<dt>Payment</dt><dd>Carried to the subject's next invoice: ${displayMoney(carried, inv.currency)}. ${inv.payment?.lastError ?? ""}</dd>`;
  const p = inv.status === "open" ? inv.payment : undefined;
  const why = p?.processing ? "Processing at the payment provider (a bank debit); its outcome comes by webhook." : p?.lastError;
  return why ? html`<dt>Payment</dt><dd${p?.processing ? "" : html` class="err"`}>${why}</dd>` : "";
}

export async function invoicePage({ services: s, caller: c, open, params: [id], query: q }: PageContext): Promise<View> {
  const inv: Awaited<ReturnType<typeof s.invoices.invoice>> & CreditedInvoice = await s.invoices.invoice(c, id as string);
  const csrf = csrfField(open.session.csrfToken);
  const m = (v: string) => displayMoney(v, inv.currency);
  const lines = table(
    "Lines",
    ["Description", "#Quantity", "#Unit price", "#Amount"],
    inv.lines.map((l) => [lineDescriptionHtml(l), l.quantity, lineAmountHtml(l.unitAmount, inv.currency), lineAmountHtml(l.amount, inv.currency)]),
    "No charges.",
  );
  const actions = join(
    [
      inv.status === "draft" ? html`<form method="post" action="/dashboard/invoices/${inv.id}/finalize" class="inline">${csrf}<button type="submit">Finalize now</button></form>` : "",
      inv.status === "open" ? html`<form method="post" action="/dashboard/invoices/${inv.id}/void" class="inline">${csrf}<button type="submit" class="danger">Void</button></form>` : "",
      html`<a href="/hosted/invoices/${inv.hostedToken}" target="_blank" rel="noopener">Open the hosted page</a>`,
      inv.status === "draft" ? "" : html`<a href="/hosted/invoices/${inv.hostedToken}/pdf" target="_blank" rel="noopener">Download PDF</a>`,
    ],
    " ",
  );
  const name = inv.customerName || (await subjectNames(s, c, [inv])).get(inv.subjectId);
  const body = html`<h1>Invoice <span class="mono">${inv.number || inv.id}</span></h1>${notice(q)}
<div class="card"><dl><dt>Status</dt><dd>${badge(inv.status)}</dd>${inv.number ? html`<dt>ID</dt><dd class="mono">${inv.id}</dd>` : ""}<dt>Subject</dt><dd>${subjectNameLink(inv.subjectId, name)}</dd><dt>Subscription</dt><dd>${subLink(inv.subscriptionId)}</dd>
<dt>Period</dt><dd>${minute(inv.periodStart)} – ${minute(inv.periodEnd)}</dd><dt>Total</dt><dd><strong>${m(inv.total)}</strong></dd>${creditsHtml(inv)}${paymentHtml(inv)}${inv.status === "draft" && inv.finalizesAt ? html`<dt>Finalizes</dt><dd>${minute(inv.finalizesAt)}</dd>` : ""}</dl></div>
${lines}
<p>${actions}</p>`;
  return { title: `Invoice ${inv.number || inv.id}`, body, current: "/dashboard/invoices" };
}
