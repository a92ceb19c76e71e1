/**
 * What the hosted checkout page says is due (checkout.ts): what completing it charges, as
 * checkout-preview.ts books it now (DESIGN §15's order: the lines, their discounts, the subtotal,
 * the taxes, the total, what earlier invoices carried, the credit applied, then "Due today", the amount due). An invoice that is
 * a draft for the environment's grace period (a change's invoice of the old card's usage) is not
 * charged today but when it finalizes: its amount is labelled so, with when (about the grace
 * period after completing). Without a preview (none wired, or it cannot be priced now): the amount
 * kept when the checkout opened.
 */
import { dec, displayMoney } from "../../billing/money.js";
import { carriedDescription } from "../../billing/payments/carries.js";
import type { CheckoutPreview } from "../../billing/subscriptions/checkout-preview.js";
import type { CheckoutSession } from "../../billing/subscriptions/types.js";
import { type Html, html } from "../html.js";
import { taxLabel } from "../pdf/invoice-pdf.js";
import { lineAmountHtml, lineDescriptionHtml } from "../prices.js";

const negate = (v: string) => (v.startsWith("-") ? v.slice(1) : `-${v}`);

/** A grace period in words, rounded to its largest unit: "1 hour", "30 minutes", "2 days". */
export function durationText(seconds: number): string {
  const units: [number, string][] = [
    [86_400, "day"],
    [3_600, "hour"],
    [60, "minute"],
  ];
  for (const [size, name] of units) {
    const n = Math.round(seconds / size);
    if (seconds >= size && n >= 1) return `${n} ${name}${n === 1 ? "" : "s"}`;
  }
  const n = Math.max(1, Math.round(seconds));
  return `${n} second${n === 1 ? "" : "s"}`;
}

/** The sentence before the amount: due at completion, or when the period's usage is final (a draft's grace period). */
function dueLabel(afterSeconds: number | null | undefined): string {
  if (afterSeconds === null || afterSeconds === undefined || afterSeconds <= 0) return "Due today";
  return `Charged when this period's usage is final, about ${durationText(afterSeconds)} after you complete this checkout (usage reported until then is added)`;
}

/** The lines and booked rows of what the checkout charges, then "Due today" (or when it is charged). */
export function dueTodayHtml(s: CheckoutSession, preview: CheckoutPreview | undefined): Html {
  const due = html`<p>${dueLabel(preview?.chargedAfterSeconds)}: <strong>${displayMoney(preview?.amountDue ?? s.amountDue, s.currency)}</strong></p>`;
  const inv = preview?.invoice;
  if (!inv || inv.lines.length === 0 || dec(preview.amountDue).isZero()) return due;
  const row = (label: Html | string, amount: string, cls: string) => html`<tr class="${cls}"><td>${label}</td><td class="n">${lineAmountHtml(amount, inv.currency)}</td></tr>`;
  const discounts = inv.discounts ?? [];
  const taxes = inv.taxAmounts ?? [];
  const credits = inv.creditsApplied ?? [];
  const carried = inv.carriedIn ?? [];
  const booked = discounts.length > 0 || taxes.length > 0 || credits.length > 0 || carried.length > 0;
  const rows = [
    ...inv.lines.map((l) => row(lineDescriptionHtml(l), l.amount, "line")),
    ...discounts.map((d) => row(`Discount: ${d.name}`, negate(d.amount), "discount")),
    ...(booked ? [row("Subtotal", inv.subtotal ?? inv.total, "subtotal")] : []),
    ...taxes.map((t) => row(taxLabel(t), t.amount, "tax")),
    ...(booked ? [row("Total", inv.total, "total")] : []),
    // What earlier invoices carried (below the minimum charge): outside the total, in the amount due.
    ...carried.map((d) => row(carriedDescription(d), d.amount, "carried-in")),
    ...credits.map((c) => row("Credit applied", negate(c.amount), "credit-applied")),
  ];
  return html`<table class="summary"><tbody>${rows}</tbody></table>
${due}`;
}
