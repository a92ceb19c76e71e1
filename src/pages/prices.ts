/**
 * Prices and invoice lines as the pages show them: every amount through displayMoney (the
 * currency's exponent: JPY 0 decimals, USD 2, KWD 3), tiered prices as a table (Up to / Per unit
 * / Flat fee, "and above" for the last tier), percentage prices as "2.9% + USD 0.30 per event",
 * a usage rate's minimum and maximum per period, an invoice line's kind where it is not a
 * plain charge (minimum, maximum, proration, adjustment, commitment true-up, credit purchase), a
 * negative amount written as such, and the credits an invoice applied with its amount due.
 */
import type { Money, Price, UsageRate } from "../billing/catalog/types.js";
import type { CreditApplication } from "../billing/credits/types.js";
import { displayMoney } from "../billing/money.js";
import { carriedDescription } from "../billing/payments/carries.js";
import type { Invoice, InvoiceLine, InvoiceLineKind } from "../billing/subscriptions/types.js";
import { type Html, type Value, html, join } from "./html.js";

const money = (m: Money) => displayMoney(m.value, m.currency);

const TIERS_MODE: Record<string, string> = {
  graduated: "Graduated: each unit at the price of the tier it falls in",
  volume: "Volume: every unit at the price of the tier the total reaches",
};

/** A tiered price's table: one row per tier, its bound ("and above" for the last), per-unit price and flat fee. */
function tiersHtml(p: Extract<Price, { kind: "tiered" }>): Html {
  const rows = p.tiers.map(
    (t) => html`<tr><td class="n">${t.upTo === null ? "and above" : t.upTo}</td><td class="n">${money(t.unitAmount)}</td><td class="n">${t.flatAmount ? money(t.flatAmount) : "—"}</td></tr>`,
  );
  return html`<table class="tiers"><caption class="muted" style="text-align:left">${TIERS_MODE[p.mode] ?? p.mode} (${p.mode})</caption><thead><tr><th class="n" scope="col">Up to</th><th class="n" scope="col">Per unit</th><th class="n" scope="col">Flat fee</th></tr></thead><tbody>${rows}</tbody></table>`;
}

/** One price: flat, package, tiered (a table) or percentage. */
export function priceHtml(p: Price): Html {
  switch (p.kind) {
    case "flat":
      return html`${money(p.amount)}`;
    case "package":
      return html`${money(p.amount)} per ${p.packageUnits} units (${p.rounding.replace("_", " ")})`;
    case "tiered":
      return tiersHtml(p);
    case "percentage":
      return html`${p.percent}%${p.fixedPerEvent ? ` + ${money(p.fixedPerEvent)} per event` : ""}`;
  }
}

/** A usage rate's price (per cell for a dimensional one) and its minimum and maximum per period. */
export function usageRateHtml(r: UsageRate): Html {
  const price =
    r.type === "simple"
      ? priceHtml(r.price)
      : join(
          r.cells.map(
            (c) =>
              html`<div class="cell">${Object.entries(c.coordinates)
                .map(([k, v]) => `${k}=${v}`)
                .join(", ")}: ${priceHtml(c.price)}</div>`,
          ),
        );
  const limits: Value[] = [];
  if (r.minimumAmount) limits.push(html`<div class="limit">Minimum ${money(r.minimumAmount)} per period</div>`);
  if (r.maximumAmount) limits.push(html`<div class="limit">Maximum ${money(r.maximumAmount)} per period</div>`);
  return html`${price}${limits}`;
}

/**
 * What a line's kind adds to its description, unless the description already says it (the word
 * stem); plain charges (fixed, usage, charge) add nothing.
 */
const KIND_LABELS: Partial<Record<InvoiceLineKind | "commitment_true_up" | "credit_purchase", [stem: string, label: string]>> = {
  minimum: ["minimum", "minimum for the period"],
  maximum: ["maximum", "maximum for the period"],
  proration: ["prorat", "proration"],
  adjustment: ["adjust", "adjustment"],
  commitment_true_up: ["true-up", "true-up"],
  credit_purchase: ["credit", "credit purchase"],
};

/** A line's description, with its kind where it is not a plain charge. */
export function lineDescriptionHtml(l: Pick<InvoiceLine, "description" | "kind">): Html {
  const [stem, label] = KIND_LABELS[l.kind as keyof typeof KIND_LABELS] ?? ["", ""];
  const named = stem === "" || l.description.toLowerCase().includes(stem);
  return html`${l.description}${named ? "" : html` <span class="kind muted">(${label})</span>`}`;
}

/** An amount of the invoice's currency; a negative one (a credit) marked for the eye and for a reader. */
export function lineAmountHtml(value: string, currency: string): Html {
  const text = displayMoney(value, currency);
  return value.trim().startsWith("-") ? html`<span class="credit">${text}</span>` : html`${text}`;
}

/** What the invoice pages read of an invoice's credits (DESIGN §14): what each grant paid, and what is left to pay. */
export interface CreditedInvoice {
  currency: string;
  total: string;
  /** A draft's credits are what would be applied if it finalized now: said so. */
  status?: string;
  creditsApplied?: readonly CreditApplication[];
  amountDue?: string;
  /** Earlier invoices' amounts carried in (payments/carries.ts): after the total, in the amount due. */
  carriedIn?: Invoice["carriedIn"];
}

/**
 * The rows under an invoice's total: one per earlier invoice's balance carried in ("Balance
 * carried from INV-…"), one per grant that paid part of it (its ID, the amount negative) and the
 * amount due; nothing more when neither. `span`: the columns before the amount column.
 */
export function creditRowsHtml(inv: CreditedInvoice, span: number): Html {
  const applied = inv.creditsApplied ?? [];
  const carried = (inv.carriedIn ?? []).map((d) => html`<tr class="carried-in"><td colspan="${span}">${carriedDescription(d)}</td><td class="n">${lineAmountHtml(d.amount, inv.currency)}</td></tr>`);
  if (applied.length === 0 && carried.length === 0 && (inv.amountDue === undefined || inv.amountDue === inv.total)) return html``;
  const rows = applied.map(
    (a) =>
      html`<tr class="credit-applied"><td colspan="${span}">${inv.status === "draft" ? "Credit to apply" : "Credit applied"} <span class="mono">${a.grantId}</span></td><td class="n">${lineAmountHtml(negate(a.amount), inv.currency)}</td></tr>`,
  );
  return html`${carried}${rows}<tr class="total amount-due"><td colspan="${span}">Amount due</td><td class="n"><strong>${displayMoney(inv.amountDue ?? inv.total, inv.currency)}</strong></td></tr>`;
}

/** A positive decimal string written negative (a credit taken off). */
const negate = (v: string) => (v.startsWith("-") ? v.slice(1) : `-${v}`);
