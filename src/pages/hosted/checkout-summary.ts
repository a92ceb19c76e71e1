/**
 * What the hosted checkout page says is due (checkout.ts): what completing it charges, as
 * checkout-preview.ts books it now (DESIGN §15's order: the lines, their discounts, the subtotal,
 * the taxes, the total, the credit applied, then "Due today", the amount due). Without a preview
 * (none wired, or it cannot be priced now): the amount kept when the checkout opened.
 */
import { dec, displayMoney } from "../../billing/money.js";
import type { CheckoutPreview } from "../../billing/subscriptions/checkout-preview.js";
import type { CheckoutSession } from "../../billing/subscriptions/types.js";
import { type Html, html } from "../html.js";
import { taxLabel } from "../pdf/invoice-pdf.js";
import { lineAmountHtml, lineDescriptionHtml } from "../prices.js";

const negate = (v: string) => (v.startsWith("-") ? v.slice(1) : `-${v}`);

/** The lines and booked rows of what the checkout charges, then "Due today". */
export function dueTodayHtml(s: CheckoutSession, preview: CheckoutPreview | undefined): Html {
  const due = html`<p>Due today: <strong>${displayMoney(preview?.amountDue ?? s.amountDue, s.currency)}</strong></p>`;
  const inv = preview?.invoice;
  if (!inv || inv.lines.length === 0 || dec(preview.amountDue).isZero()) return due;
  const row = (label: Html | string, amount: string, cls: string) => html`<tr class="${cls}"><td>${label}</td><td class="n">${lineAmountHtml(amount, inv.currency)}</td></tr>`;
  const discounts = inv.discounts ?? [];
  const taxes = inv.taxAmounts ?? [];
  const credits = inv.creditsApplied ?? [];
  const booked = discounts.length > 0 || taxes.length > 0 || credits.length > 0;
  const rows = [
    ...inv.lines.map((l) => row(lineDescriptionHtml(l), l.amount, "line")),
    ...discounts.map((d) => row(`Discount: ${d.name}`, negate(d.amount), "discount")),
    ...(booked ? [row("Subtotal", inv.subtotal ?? inv.total, "subtotal")] : []),
    ...taxes.map((t) => row(taxLabel(t), t.amount, "tax")),
    ...(booked ? [row("Total", inv.total, "total")] : []),
    ...credits.map((c) => row("Credit applied", negate(c.amount), "credit-applied")),
  ];
  return html`<table class="summary"><tbody>${rows}</tbody></table>
${due}`;
}
