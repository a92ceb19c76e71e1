/** GET /dashboard: revenue, ingestion, what needs attention (billing cycles, webhook endpoints), the newest subscriptions and open invoices. */
import { displayMoney } from "../../../billing/money.js";
import { type Html, html } from "../../html.js";
import { INVOICE_HEAD, type PageContext, SUBSCRIPTION_HEAD, type View, cardNames, invoiceRows, subLink, subjectLink, subscriptionRows } from "../common.js";
import { badge, barChart, minute, table } from "../layout.js";

type Revenue = Awaited<ReturnType<PageContext["services"]["invoices"]["revenueByMonth"]>>;
type Endpoints = Awaited<ReturnType<PageContext["services"]["webhookEndpoints"]["needingAttention"]>>;
type Failing = Awaited<ReturnType<PageContext["services"]["subscriptions"]["listFailing"]>>;

const more = (r: { hasMore: boolean }, href: string) => (r.hasMore ? html`<p><a href="${href}">All…</a></p>` : "");

function revenueCards(revenue: Revenue): Html[] {
  return revenue.map(
    (r, i) =>
      html`<div class="card" aria-labelledby="rev-${i}"><h2 id="rev-${i}" style="margin-top:0">Invoiced ${i === 0 ? "this month" : "last month"} <span class="muted">(${r.month})</span></h2>${
        r.totals.length === 0
          ? html`<p class="muted">Nothing invoiced.</p>`
          : html`<ul>${r.totals.map((x) => html`<li><strong>${displayMoney(x.total, x.currency)}</strong> <span class="muted">on ${x.count} invoice${x.count === 1 ? "" : "s"}</span></li>`)}</ul>`
      }</div>`,
  );
}

function failingTable(failing: Failing): Html {
  const rows = failing.items.map((x) => [
    subLink(x.id),
    subjectLink(x.subjectId),
    html`<span class="err">${x.billingFailure?.message ?? ""}</span>`,
    String(x.billingFailure?.attempts ?? 0),
    x.billingFailure ? minute(x.billingFailure.retryAt) : "",
  ]);
  return table("Subscriptions whose billing cycle could not be closed", ["Subscription", "Subject", "Error", "#Attempts", "Next retry"], rows, "None: every billing cycle closed.");
}

function endpointsTable(endpoints: Endpoints): Html {
  const rows = endpoints.map((x) => [
    html`<a class="mono" href="/dashboard/webhooks/${x.endpoint.id}">${x.endpoint.url}</a>`,
    html`${badge(x.endpoint.status)}${x.endpoint.failingSince ? html` <span class="badge void">failing</span>` : ""}`,
    x.endpoint.failingSince ? minute(x.endpoint.failingSince) : "",
    String(x.retrying),
    String(x.failedRecently),
    x.lastError
      ? html`<span class="err">${x.lastError.error ?? (x.lastError.statusCode !== null ? `HTTP ${x.lastError.statusCode}` : "failed")}</span> <span class="muted">${minute(x.lastError.at)}</span>`
      : "",
  ]);
  return table(
    "Webhook endpoints failing, retrying deliveries, or with deliveries failed in the last 24 hours",
    ["Endpoint", "Status", "Failing since", "#Retrying", "#Failed (24 h)", "Last error"],
    rows,
    "None: every webhook endpoint is delivering.",
  );
}

export async function overview({ services: s, caller: c }: PageContext): Promise<View> {
  const [active, drafts, unpaid, failing, revenue, endpoints] = await Promise.all([
    s.subscriptions.listAll(c, { status: "active", rateCardId: "" }, 10),
    s.invoices.listAll(c, "draft", 10),
    s.invoices.listAll(c, "open", 10),
    s.subscriptions.listFailing(c, 10),
    s.invoices.revenueByMonth(c, new Date()),
    s.webhookEndpoints.needingAttention(c, 24),
  ]);
  const hours = await s.ingest.ingestedPerHour(c, 7 * 24);
  const ingested = hours.reduce((n, h) => n + h.accepted, 0);
  const chart = barChart(
    "Events ingested per hour, last 7 days",
    hours.map((h) => ({ label: `${h.hour.toISOString().slice(5, 13).replace("T", " ")}h`, value: h.accepted, tick: h.hour.getUTCHours() === 0 ? h.hour.toISOString().slice(5, 10) : null })),
  );
  const names = await cardNames(s, c, active.items);
  const body = html`<h1>Overview</h1>
<div class="grid">${revenueCards(revenue)}</div>
<p class="muted">Revenue: invoices finalized in the month (UTC), void ones left out.</p>
<section aria-labelledby="h-ingest" class="card"><h2 id="h-ingest" style="margin-top:0">Events ingested per hour, last 7 days <span class="muted">(${ingested} accepted, UTC)</span></h2>${chart}</section>
<section aria-labelledby="h-failing"><h2 id="h-failing">Subscriptions needing attention</h2>${failingTable(failing)}${more(failing, "/dashboard/subscriptions")}</section>
<section aria-labelledby="h-webhooks"><h2 id="h-webhooks">Webhook endpoints needing attention</h2>${endpointsTable(endpoints)}</section>
<section aria-labelledby="h-active"><h2 id="h-active">Active subscriptions (newest)</h2>${table("Active subscriptions", SUBSCRIPTION_HEAD, subscriptionRows(active.items, names), "No active subscriptions.")}${more(active, "/dashboard/subscriptions?status=active")}</section>
<section aria-labelledby="h-drafts"><h2 id="h-drafts">Draft invoices</h2>${table("Draft invoices", INVOICE_HEAD, invoiceRows(drafts.items), "No drafts waiting.")}${more(drafts, "/dashboard/invoices?status=draft")}</section>
<section aria-labelledby="h-open"><h2 id="h-open">Open invoices (unpaid)</h2>${table("Open invoices", INVOICE_HEAD, invoiceRows(unpaid.items), "No open invoices.")}${more(unpaid, "/dashboard/invoices?status=open")}</section>`;
  return { title: "Overview", body, current: "/dashboard" };
}
