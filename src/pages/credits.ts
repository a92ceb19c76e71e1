/**
 * A subject's credit (DESIGN §14) as the portal and the dashboard show it: the balance per
 * currency, and the ledger newest first by pages, each amount through displayMoney (the
 * currency's exponent), a negative one marked as a credit taken off. Tables have captions and
 * column headers for screen readers, as the other pages' tables.
 */
import type { Credits } from "../billing/credits/grants.js";
import type { CreditGrant, LedgerEntry, LedgerEntryType } from "../billing/credits/types.js";
import { displayMoney } from "../billing/money.js";
import type { Page, PageResult } from "../billing/pagination.js";
import type { BillingStates } from "../billing/subscriptions/billing-state.js";
import type { Caller } from "../billing/tenancy.js";
import { type Html, html } from "./html.js";
import { lineAmountHtml } from "./prices.js";

/** A balance of one currency: the sum of its ledger. */
export interface CreditBalance {
  currency: string;
  balance: string;
}

/** What the pages read of a subject's credit, through the credit use cases (scoped to the caller's environment). */
export interface CreditReads {
  balances(caller: Caller, subjectId: string): Promise<CreditBalance[]>;
  /** The ledger, newest first. */
  ledger(caller: Caller, subjectId: string, page: Page): Promise<PageResult<LedgerEntry>>;
}

/**
 * CreditReads on the use cases: the balance is billing state's `credit_balance`; the ledger is
 * the credit use case's, newest first, one page at a time.
 */
export function creditReads(credits: Pick<Credits, "ledger">, states: Pick<BillingStates, "billingState">): CreditReads {
  return {
    async balances(caller, subjectId) {
      const state = await states.billingState(caller, subjectId);
      return state.creditBalance.map((a) => ({ currency: a.currencyCode, balance: a.value }));
    },
    ledger(caller, subjectId, page) {
      return credits.ledger(caller, subjectId, { limit: page.limit, offset: page.offset, currency: "", newestFirst: true });
    },
  };
}

/** Ledger rows per page on the portal and the dashboard. */
export const LEDGER_PAGE = 20;

/** What a reader is told each kind of movement is. */
export const ENTRY_LABELS: Record<LedgerEntryType, string> = {
  grant: "Credit granted",
  application: "Applied to an invoice",
  expiry: "Expired",
  void: "Voided",
  proration: "Proration credit",
  credit_note: "Credit note",
  reinstatement: "Given back: invoice voided",
  invoice_credit: "Credit from an invoice below zero",
};

const CATEGORY_LABELS: Record<string, string> = { paid: "Paid", promotional: "Promotional" };

export const categoryLabel = (g: Pick<CreditGrant, "category">) => CATEGORY_LABELS[g.category] ?? g.category;

const day = (d: Date) => d.toISOString().slice(0, 10);

/** The balance per currency as a table; a sentence when the subject never had credit. */
export function balancesHtml(balances: CreditBalance[], caption = "Credit balance per currency"): Html {
  if (balances.length === 0) return html`<p>No credit.</p>`;
  const rows = balances.map((b) => html`<tr><th scope="row">${b.currency}</th><td class="n">${displayMoney(b.balance, b.currency)}</td></tr>`);
  return html`<div class="scroll"><table class="credit-balance"><caption>${caption}</caption><thead><tr><th scope="col">Currency</th><th scope="col" class="n">Balance</th></tr></thead><tbody>${rows}</tbody></table></div>`;
}

/** An entry's description; its invoice linked (the description itself when it names the invoice), or named when it does not. */
function descriptionHtml(e: LedgerEntry, invoiceHref?: (invoiceId: string) => string | undefined): Html {
  if (!e.invoiceId) return html`${e.description}`;
  const href = invoiceHref?.(e.invoiceId);
  const named = e.description.includes(e.invoiceId);
  if (!href) return named ? html`${e.description}` : html`${e.description} <span class="mono">${e.invoiceId}</span>`;
  return named ? html`<a href="${href}">${e.description}</a>` : html`${e.description} (<a href="${href}">invoice ${e.invoiceId}</a>)`;
}

/**
 * The ledger's rows as a table (newest first): date, movement, description, amount (signed).
 * `invoiceHref`: where an entry's invoice is shown (none: its ID alone).
 */
export function ledgerHtml(entries: LedgerEntry[], invoiceHref?: (invoiceId: string) => string | undefined): Html {
  if (entries.length === 0) return html`<p>No credit movements yet.</p>`;
  const rows = entries.map((e) => {
    return html`<tr><td class="nowrap">${day(e.createdAt)}</td><td>${ENTRY_LABELS[e.type] ?? e.type}</td><td>${descriptionHtml(e, invoiceHref)}</td><td class="n">${lineAmountHtml(e.amount, e.currency)}</td></tr>`;
  });
  // In a box of its own that scrolls sideways on a narrow screen (the dashboard's .scroll), never the page.
  return html`<div class="scroll"><table class="credit-ledger"><caption>Credit ledger, newest first</caption><thead><tr><th scope="col">Date</th><th scope="col">Movement</th><th scope="col">Description</th><th scope="col" class="n">Amount</th></tr></thead><tbody>${rows}</tbody></table></div>`;
}

/** Previous/next links of the ledger (`ledger_offset`, kept apart from the page's other lists), to the `anchor` section. */
export function ledgerPager(base: string, offset: number, hasMore: boolean, anchor: string): Html | "" {
  const link = (o: number, label: string, rel: string) => html`<a rel="${rel}" href="${base}${o > 0 ? `?ledger_offset=${o}` : ""}#${anchor}">${label}</a>`;
  const prev = offset > 0 ? link(Math.max(0, offset - LEDGER_PAGE), "← Newer", "prev") : "";
  const next = hasMore ? link(offset + LEDGER_PAGE, "Older →", "next") : "";
  return prev || next ? html`<p class="pager">${prev} ${next}</p>` : "";
}

/** `ledger_offset` of a query: a whole number from 0, else 0. */
export function ledgerOffsetOf(q: URLSearchParams): number {
  const o = Number(q.get("ledger_offset") ?? "0");
  return Number.isInteger(o) && o >= 0 && o <= 1_000_000 ? o : 0;
}
