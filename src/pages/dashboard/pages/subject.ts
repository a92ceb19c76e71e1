/**
 * GET /dashboard/subjects/{id}[?days=&invoices_offset=&ledger_offset=]: a subject's details,
 * billing state, credit (balances, grants, ledger, the grant form: credit.ts), subscriptions,
 * invoices and usage charts.
 */
import type { Caller } from "../../../billing/tenancy.js";
import { type Html, html, join } from "../../html.js";
import { type DashboardServices, INVOICE_HEAD, PAGE, type PageContext, SUBSCRIPTION_HEAD, type View, cardNames, creditsOf, invoiceRows, notice, offsetOf, subscriptionRows } from "../common.js";
import { type GrantForm, creditSection } from "./credit.js";
import { billingDetailsCard } from "./billing-details.js";
import { barChart, minute, table } from "../layout.js";

/** Per pricing metric of the subject's active subscriptions: its usage over the chosen period, bucketed by the summary API. */
async function usageCharts(s: DashboardServices, c: Caller, subjectId: string, metricIds: string[], q: URLSearchParams, clockNow: Date): Promise<Html> {
  const days = [1, 7, 30, 90].includes(Number(q.get("days"))) ? Number(q.get("days")) : 7;
  const granularity = days <= 1 ? "hour" : days <= 30 ? "day" : "week";
  // To the end of the current hour (the subject's clock): usage of this hour is shown.
  const end = new Date((Math.floor(clockNow.getTime() / 3_600_000) + 1) * 3_600_000);
  const start = new Date(end.getTime() - days * 86_400_000);
  const choose = join(
    [1, 7, 30, 90].map((d) => (d === days ? html`<strong>${d} d</strong>` : html`<a href="/dashboard/subjects/${subjectId}?days=${d}#usage">${d} d</a>`)),
    " · ",
  );
  const charts: Html[] = [];
  for (const id of metricIds) {
    const metric = await s.metrics.get(c, id);
    const summaries = await s.summaries.summarize(c, id, { subjectId, dimensions: [], granularity, period: { start, end } });
    const bars = summaries.map((x) => ({ label: new Date(x.period.start).toISOString().slice(granularity === "hour" ? 11 : 5, granularity === "hour" ? 16 : 10), value: Number(x.value ?? "0") }));
    charts.push(
      html`<div class="card"><h3>${metric.name} <span class="muted">(${metric.aggregation.type} per ${granularity}, ${metric.unit})</span></h3>${barChart(`${metric.name} per ${granularity}`, bars)}</div>`,
    );
  }
  return html`<section aria-labelledby="usage"><h2 id="usage">Usage</h2><p>Period: ${choose} <span class="muted">(${minute(start)} – ${minute(end)})</span></p>${charts.length > 0 ? charts : html`<p class="muted">No usage-based rates on active subscriptions.</p>`}</section>`;
}

/** The subject page's invoice pages (its own offset, so the usage period choice stays apart). */
function invoicePager(subjectId: string, offset: number, hasMore: boolean): Html | "" {
  const link = (o: number, label: string, rel: string) => html`<a rel="${rel}" href="/dashboard/subjects/${subjectId}${o > 0 ? `?invoices_offset=${o}` : ""}#h-invs">${label}</a>`;
  const prev = offset > 0 ? link(Math.max(0, offset - PAGE), "← Previous invoices", "prev") : "";
  const next = hasMore ? link(offset + PAGE, "Next invoices →", "next") : "";
  return prev || next ? html`<p class="pager">${prev}${next}</p>` : "";
}

export const subjectPage = (ctx: PageContext): Promise<View> => subjectView(ctx);

/** The subject page; `grantForm`: the grant form as posted, with its errors (a 400). */
export async function subjectView({ services: s, caller: c, open, params: [id], query: q }: PageContext, grantForm?: GrantForm): Promise<View> {
  const subject = await s.subjects.get(c, id as string);
  const invoiceOffset = offsetOf(new URLSearchParams({ offset: q.get("invoices_offset") ?? "0" }));
  const [state, subs, invs] = await Promise.all([
    s.billingStates.billingState(c, subject.id),
    s.subscriptions.list(c, { subjectId: subject.id, rateCardId: "" }, 100),
    s.invoices.listInvoices(c, subject.id, PAGE, invoiceOffset),
  ]);
  const clock = subject.testClockId ? await s.clocks.clock(c, subject.testClockId) : undefined;
  const usage = table(
    "Usage this period",
    ["Rate", "#Used", "#Included"],
    state.usage.map((u) => [u.rateName, u.usedUnits, u.includedUnits]),
    "No usage-based rates on active subscriptions.",
  );
  const metricIds = [...new Set(state.usage.map((u) => u.pricingMetricId))];
  const names = await cardNames(s, c, subs.items);
  const charts = await usageCharts(s, c, subject.id, metricIds, q, clock?.frozenTime ?? new Date());
  const credits = creditsOf(s);
  const available = ((state as { availableCredit?: { currencyCode: string; value: string }[] }).availableCredit ?? []).map((a) => ({ currency: a.currencyCode, balance: a.value }));
  const credit = credits ? await creditSection(credits, c, subject.id, open.session.csrfToken, q, available, grantForm) : "";
  const body = html`<h1>${subject.name ?? subject.id}</h1>${grantForm ? "" : notice(q)}
<div class="grid"><div class="card"><dl><dt>ID</dt><dd class="mono">${subject.id}</dd><dt>Email</dt><dd>${subject.email ?? "—"}</dd><dt>External ID</dt><dd class="mono">${subject.externalId ?? "—"}</dd>
<dt>Payment method</dt><dd>${subject.hasPaymentMethod ? "on file" : "none"}</dd><dt>Created</dt><dd>${minute(subject.createdAt)}</dd>${clock ? html`<dt>Test clock</dt><dd><a href="/dashboard/clocks/${clock.id}">${clock.name || clock.id}</a> at ${minute(clock.frozenTime)}</dd>` : ""}</dl></div>
<div class="card" aria-labelledby="h-state"><h2 id="h-state" style="margin-top:0">Billing state</h2><p>${state.hasActiveSubscription ? "Has an active subscription" : "No active subscription"}${state.paused.length ? `; ${state.paused.length} paused` : ""}${state.hasOverage ? html` · <strong class="error">over an included amount</strong>` : ""}</p>${usage}</div></div>
${billingDetailsCard(subject.billingDetails)}
${credit}
<section aria-labelledby="h-subs"><h2 id="h-subs">Subscriptions</h2>${table("Subscriptions", SUBSCRIPTION_HEAD, subscriptionRows(subs.items, names), "No subscriptions.")}${subs.hasMore ? html`<p class="muted">The first 100 are shown.</p>` : ""}</section>
<section aria-labelledby="h-invs"><h2 id="h-invs">Invoices</h2>${table("Invoices, oldest first", INVOICE_HEAD, invoiceRows(invs.items), "No invoices.")}${invoicePager(subject.id, invoiceOffset, invs.hasMore)}</section>
${charts}`;
  return { status: grantForm ? 400 : 200, title: subject.name ?? subject.id, body, current: "/dashboard/subjects" };
}
