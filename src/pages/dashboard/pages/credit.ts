/**
 * A subject's credit on its dashboard page (DESIGN §14): the balance and available credit per
 * currency, its grants (each active one with a Void button), the ledger newest first by pages
 * (`?ledger_offset=`), and the form that grants promotional credit. The form's amount is in the
 * currency's major unit (12.50 for USD 12.50), converted to the smallest unit here; a bad input
 * is shown in the form, each message beside its field, and nothing is written.
 */
import type { CreditGrant } from "../../../billing/credits/types.js";
import { currencyExponent, isCurrency } from "../../../billing/currencies.js";
import type { FieldViolation } from "../../../billing/errors.js";
import { dec, displayMoney, formatDecimal, parseDecimal } from "../../../billing/money.js";
import type { Caller } from "../../../billing/tenancy.js";
import { type CreditBalance, LEDGER_PAGE, balancesHtml, categoryLabel, ledgerHtml, ledgerOffsetOf, ledgerPager } from "../../credits.js";
import { type Html, type Value, html } from "../../html.js";
import type { DashboardCredits, GrantInput } from "../common.js";
import { badge, csrfField, minute, table } from "../layout.js";

/** The grant form's fields as typed, and what is wrong with them (by field; "" for the form as a whole). */
export interface GrantForm {
  values: { amount: string; currency: string; expires_at: string; priority: string };
  errors: Map<string, string[]>;
}

const FIELDS = ["amount", "currency", "expires_at", "priority"] as const;
type Field = (typeof FIELDS)[number];

/** Which form field an API field path belongs to ("" when none). */
function fieldOf(path: string): Field | "" {
  if (path === "amount.currency_code" || path === "currency_code" || path === "currency") return "currency";
  if (path === "amount" || path.startsWith("amount.")) return "amount";
  if (path === "expires_at" || path === "effective_at") return "expires_at";
  if (path === "priority") return "priority";
  return "";
}

export function formErrors(form: GrantForm, violations: readonly FieldViolation[]): GrantForm {
  const errors = new Map(form.errors);
  for (const v of violations) {
    const f = fieldOf(v.field);
    errors.set(f, [...(errors.get(f) ?? []), f === "" ? `${v.field}: ${v.description}` : v.description]);
  }
  return { values: form.values, errors };
}

/**
 * Reads the posted form: the amount converted from the major unit to the smallest (whole units
 * only), the currency upper-cased, the expiry (datetime-local) read as UTC. What cannot be read
 * is an error of its field; the rest (a positive amount, priority 1..100, expiry after now) is
 * the grant use case's to judge.
 */
export function readGrantForm(subjectId: string, form: URLSearchParams): { form: GrantForm; input?: GrantInput } {
  const values = { amount: "", currency: "", expires_at: "", priority: "" };
  for (const f of FIELDS) values[f] = (form.get(f) ?? "").trim();
  values.currency = values.currency.toUpperCase();
  const errors = new Map<string, string[]>();
  const fail = (f: Field, message: string) => errors.set(f, [...(errors.get(f) ?? []), message]);
  if (!isCurrency(values.currency)) fail("currency", "must be an active ISO 4217 code, as USD");
  const major = parseDecimal(values.amount.replace(/[\s,]/g, ""));
  let amount: string | undefined;
  if (values.amount === "") fail("amount", "is required");
  else if (!major) fail("amount", "must be a number, as 12.50");
  else if (isCurrency(values.currency)) {
    const exp = currencyExponent(values.currency);
    const minor = major.mul(dec(10).pow(exp));
    if (!minor.isInteger()) fail("amount", `${values.currency} has ${exp === 0 ? "no decimals" : `at most ${exp} decimal${exp === 1 ? "" : "s"}`}`);
    else amount = formatDecimal(minor);
  }
  let priority: number | undefined;
  if (values.priority !== "") {
    priority = Number(values.priority);
    if (!/^-?\d+$/.test(values.priority)) fail("priority", "must be a whole number from 1 to 100");
  }
  let expiresAt: Date | undefined;
  if (values.expires_at !== "") {
    const ok = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d{1,3})?)?$/.test(values.expires_at);
    expiresAt = ok ? new Date(`${values.expires_at}Z`) : undefined;
    if (!expiresAt || Number.isNaN(expiresAt.getTime())) fail("expires_at", "must be a date and time, as 2026-12-31T00:00 (UTC)");
  }
  const out: GrantForm = { values, errors };
  if (errors.size > 0 || amount === undefined) return { form: out };
  return { form: out, input: { subjectId, amount, currency: values.currency, category: "promotional", priority, expiresAt } };
}

/** The form that grants promotional credit; with errors, each beside its field (aria-invalid, aria-describedby). */
export function grantFormHtml(subjectId: string, csrf: string, form: GrantForm | undefined, currency: string): Html {
  const v = form?.values ?? { amount: "", currency, expires_at: "", priority: "50" };
  const errs = form?.errors ?? new Map<string, string[]>();
  const err = (f: Field) => {
    const list = errs.get(f);
    return list ? html`<span class="err" id="grant-${f}-error">${list.join("; ")}</span>` : "";
  };
  const aria = (f: Field) => (errs.has(f) ? html` aria-invalid="true" aria-describedby="grant-${f}-error"` : "");
  // Every error in the order of the form's fields (the form's own first), as one alert.
  const said = ["", ...FIELDS].filter((f) => errs.has(f)).map((f) => `${f === "" ? "" : `${f}: `}${(errs.get(f) ?? []).join("; ")}`);
  const summary = said.length > 0 ? html`<p class="error" role="alert">No credit was granted: ${said.join("; ")}.</p>` : "";
  return html`<form method="post" action="/dashboard/subjects/${subjectId}/credit-grants" class="card" aria-labelledby="h-grant">${csrfField(csrf)}
<h3 id="h-grant" style="margin-top:0">Grant promotional credit</h3>${summary}
<div class="filters"><div><label for="grant-amount">Amount</label><input id="grant-amount" name="amount" inputmode="decimal" required value="${v.amount}"${aria("amount")}> ${err("amount")}</div>
<div><label for="grant-currency">Currency</label><input id="grant-currency" name="currency" required maxlength="3" size="4" value="${v.currency}"${aria("currency")}> ${err("currency")}</div>
<div><label for="grant-expires">Expires (UTC, optional)</label><input id="grant-expires" name="expires_at" type="datetime-local" value="${v.expires_at}"${aria("expires_at")}> ${err("expires_at")}</div>
<div><label for="grant-priority">Priority (1 is spent first)</label><input id="grant-priority" name="priority" type="number" min="1" max="100" value="${v.priority}"${aria("priority")}> ${err("priority")}</div>
<div><button type="submit">Grant credit</button></div></div>
<p class="muted">The amount is in the currency's unit (12.50 for USD 12.50). Promotional credit is active at once; invoices spend it at finalization, lowest priority number first.</p></form>`;
}

function grantRows(subjectId: string, csrf: string, grants: CreditGrant[]): Value[][] {
  return grants.map((g) => [
    html`<span class="mono">${g.id}</span>`,
    categoryLabel(g),
    badge(g.status),
    String(g.priority),
    displayMoney(g.amount, g.currency),
    displayMoney(g.remaining, g.currency),
    g.expiresAt ? minute(g.expiresAt) : "never",
    g.status === "active" || g.status === "depleted"
      ? html`<form method="post" action="/dashboard/subjects/${subjectId}/credit-grants/${g.id}/void" class="inline">${csrfField(csrf)}<button type="submit" class="danger" aria-label="Void grant ${g.id}">Void</button></form>`
      : "",
  ]);
}

/** Balance and available credit in one table, per currency. */
function balanceTable(balances: CreditBalance[], available: CreditBalance[]): Html {
  if (available.length === 0) return balancesHtml(balances);
  const currencies = [...new Set([...balances.map((b) => b.currency), ...available.map((a) => a.currency)])].sort();
  const rows = currencies.map((c) => [c, displayMoney(balances.find((b) => b.currency === c)?.balance ?? "0", c), displayMoney(available.find((a) => a.currency === c)?.balance ?? "0", c)]);
  return table("Credit balance per currency", ["Currency", "#Balance", "#Available (less current usage)"], rows, "No credit.");
}

/** The subject page's credit section. */
export async function creditSection(credits: DashboardCredits, c: Caller, subjectId: string, csrf: string, q: URLSearchParams, available: CreditBalance[], form?: GrantForm): Promise<Html> {
  const offset = ledgerOffsetOf(q);
  const [balances, grants, ledger] = await Promise.all([credits.balances(c, subjectId), credits.grants(c, subjectId), credits.ledger(c, subjectId, { limit: LEDGER_PAGE, offset })]);
  const currency = balances[0]?.currency ?? available[0]?.currency ?? "USD";
  return html`<section aria-labelledby="h-credit"><h2 id="h-credit">Credit</h2>
${balanceTable(balances, available)}
${grantFormHtml(subjectId, csrf, form, currency)}
<h3>Grants</h3>${table("Credit grants, oldest first", ["Grant", "Category", "Status", "#Priority", "#Amount", "#Remaining", "Expires", ""], grantRows(subjectId, csrf, grants.items), "No credit grants.")}${grants.hasMore ? html`<p class="muted">The first 100 are shown.</p>` : ""}
<h3>Ledger</h3>${ledgerHtml(ledger.items, (id) => `/dashboard/invoices/${id}`)}${ledgerPager(`/dashboard/subjects/${subjectId}`, offset, ledger.hasMore, "h-credit")}
</section>`;
}
