/**
 * The operator dashboard (issue 19), served on the API's port under /dashboard: plain HTML forms
 * that work without JavaScript, on the same use cases the RPC services call (a Caller for the
 * session's environment), never a second data path.
 *
 *   GET  /dashboard/sign-in                    the sign-in form (a secret key of the environment)
 *   POST /dashboard/sign-in                    opens a session: HttpOnly, SameSite=Strict cookie with an expiry; a browser
 *                                              signed in to other environments keeps them (the switcher), this one active;
 *                                              failed sign-ins are throttled per address and per server (429, Retry-After)
 *   POST /dashboard/switch                     environment_id: makes another environment of the browser's the active one
 *   POST /dashboard/sign-out                   ends the browser's sessions (deleted on the server) and clears the cookie
 *   GET  /dashboard                            overview
 *   GET  /dashboard/subjects[?q=]              subjects, searched
 *   GET  /dashboard/subjects/{id}              a subject: billing state, subscriptions, invoices, usage charts
 *   GET  /dashboard/subscriptions[?status=&rate_card_id=]
 *   GET  /dashboard/subscriptions/{id}         with the cancel forms
 *   POST /dashboard/subscriptions/{id}/cancel  when=now | end_of_cycle
 *   GET  /dashboard/subscriptions/{id}/change?rate_card_id=&behavior=   the proration preview (changes nothing)
 *   POST /dashboard/subscriptions/{id}/change  the change, through the API's change-rate-card use case
 *   GET  /dashboard/invoices[?status=]
 *   GET  /dashboard/invoices/{id}              with finalize (draft), void (open) and the hosted page's link
 *   POST /dashboard/invoices/{id}/finalize | /void
 *   GET  /dashboard/events[?show=rejected]     the newest stored usage events, or the newest rejected ones with their reasons
 *   GET  /dashboard/webhooks/{id}[?status=]     a webhook endpoint and its deliveries (linked from the overview's endpoints needing attention)
 *   GET  /dashboard/catalog                    rate cards with their rates and prices; pricing metrics
 *   GET  /dashboard/clocks, /dashboard/clocks/{id}; POST /dashboard/clocks/{id}/advance
 *
 * A GET never changes anything. Every POST carries the session's CSRF token (the sign-in form a
 * token bound to a short-lived pre-session cookie), compared in constant time; without it: 403.
 * The cookie holds one session token per environment the browser signed in to (at most
 * MAX_BROWSER_SESSIONS), the active one first; a request acts for the active environment only
 * (its caller, its CSRF token): another environment's IDs are 404, as on the API, even one the
 * browser is signed in to, until it is switched to. A changing POST answers 303 back to its page.
 */
import type { PricingMetricService } from "../../billing/catalog/metrics.js";
import type { RateCardService } from "../../billing/catalog/rate-cards.js";
import type { WebhookEndpoints } from "../../billing/events/endpoints.js";
import type { Price, RateCard, UsageRate } from "../../billing/catalog/types.js";
import { BillingError, InvalidArgumentError, NotFoundError } from "../../billing/errors.js";
import { randomBase62 } from "../../billing/ids.js";
import { type IngestService, REJECTED_KEPT, type SummaryService } from "../../billing/metering/usage.js";
import { displayMoney } from "../../billing/money.js";
import { MAX_BROWSER_SESSIONS, type OpenOperatorSession, OperatorSessions, sameToken } from "../../billing/operator-sessions.js";
import type { SubjectService } from "../../billing/subjects.js";
import type { BillingStates } from "../../billing/subscriptions/billing-state.js";
import type { SubscriptionChanges } from "../../billing/subscriptions/changes.js";
import { INVOICE_STATUSES, type Invoices } from "../../billing/subscriptions/invoices.js";
import type { Subscriptions } from "../../billing/subscriptions/subscribe.js";
import type { TestClocks } from "../../billing/subscriptions/test-clocks.js";
import type { Invoice, Subscription } from "../../billing/subscriptions/types.js";
import type { Caller } from "../../billing/tenancy.js";
import type { Logger } from "../../log.js";
import { type Req, type Res, esc, readForm, servePages } from "../pages.js";
import { SignInThrottle } from "./sign-in-throttle.js";
import { type DashSession, badge, barChart, csrfField, dashPage, day, minute, pager, table } from "./layout.js";

export interface DashboardServices {
  subjects: SubjectService;
  subscriptions: Subscriptions;
  changes: SubscriptionChanges;
  invoices: Invoices;
  billingStates: BillingStates;
  clocks: TestClocks;
  cards: RateCardService;
  metrics: PricingMetricService;
  summaries: SummaryService;
  ingest: IngestService;
  webhookEndpoints: WebhookEndpoints;
}

export const SESSION_COOKIE = "billing_dashboard";
const LOGIN_COOKIE = "billing_dashboard_login";
const PAGE = 20;
const ID = "([0-9A-Za-z_]{1,64})";

/** Notices shown once after a change (`?done=`): fixed texts, nothing echoed. */
const NOTICES: Record<string, string> = {
  cancelled: "The subscription was cancelled.",
  cancelling: "The subscription will be cancelled at the end of its current period.",
  finalized: "The invoice was finalized.",
  voided: "The invoice was voided.",
  advanced: "The test clock was advanced; everything due up to its new time has run.",
  changed: "The subscription moved to the new rate card; the old card's usage so far was invoiced.",
};

function cookies(req: Req): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of (req.headers.cookie ?? "").split(";")) {
    const i = part.indexOf("=");
    if (i > 0) out.set(part.slice(0, i).trim(), part.slice(i + 1).trim());
  }
  return out;
}

function query(req: Req): URLSearchParams {
  return new URLSearchParams((req.url ?? "").split("?")[1] ?? "");
}

function offsetOf(q: URLSearchParams): number {
  const o = Number(q.get("offset") ?? "0");
  return Number.isInteger(o) && o >= 0 && o <= 1_000_000 ? o : 0;
}

function redirect(res: Res, location: string, headers: Record<string, string | string[]> = {}): void {
  res.writeHead(303, { location, "cache-control": "no-store", ...headers });
  res.end();
}

const priceText = (p: Price) =>
  p.kind === "flat"
    ? esc(displayMoney(p.amount.value, p.amount.currency))
    : `${esc(displayMoney(p.amount.value, p.amount.currency))} per ${esc(p.packageUnits)} units (${esc(p.rounding.replace("_", " "))})`;

function usageRateText(r: UsageRate): string {
  if (r.type === "simple") return priceText(r.price);
  return r.cells
    .map(
      (c) =>
        `${esc(
          Object.entries(c.coordinates)
            .map(([k, v]) => `${k}=${v}`)
            .join(", "),
        )}: ${priceText(c.price)}`,
    )
    .join("<br>");
}

const money = (i: Invoice) => esc(displayMoney(i.total, i.currency));
const subjectLink = (id: string) => `<a class="mono" href="/dashboard/subjects/${esc(id)}">${esc(id)}</a>`;
const subLink = (id: string) => `<a class="mono" href="/dashboard/subscriptions/${esc(id)}">${esc(id)}</a>`;
const invLink = (id: string) => `<a class="mono" href="/dashboard/invoices/${esc(id)}">${esc(id)}</a>`;

function invoiceRows(items: Invoice[]): string[][] {
  return items.map((i) => [invLink(i.id), badge(i.status), subjectLink(i.subjectId), `${day(i.periodStart)} – ${day(i.periodEnd)}`, money(i), day(i.createdAt)]);
}
const INVOICE_HEAD = ["Invoice", "Status", "Subject", "Period", "#Total", "Created"];

/** Rows of subscriptions; `names`: rate card names by ID (an ID without one is shown as is). */
function subscriptionRows(items: Subscription[], names: Map<string, string> = new Map()): string[][] {
  return items.map((s) => [
    subLink(s.id),
    `${badge(s.status)}${s.cancelsAtEndOfCycle && s.status === "active" ? ' <span class="muted">ends at period end</span>' : ""}${s.billingFailure ? ' <span class="badge void">set aside</span>' : ""}`,
    subjectLink(s.subjectId),
    names.has(s.rateCardId) ? `<span title="${esc(s.rateCardId)}">${esc(names.get(s.rateCardId) as string)}</span>` : `<span class="mono">${esc(s.rateCardId)}</span>`,
    s.status === "active" ? `${day(s.periodStart)} – ${day(s.periodEnd)}` : "",
  ]);
}
const SUBSCRIPTION_HEAD = ["Subscription", "Status", "Subject", "Rate card", "Current period"];

function notice(q: URLSearchParams): string {
  const done = q.get("done") ?? "";
  return Object.hasOwn(NOTICES, done) ? `<p class="notice" role="status">${esc(NOTICES[done] as string)}</p>` : "";
}

/** A refused change or bad input, said on the page it came from. */
function refusalPage(res: Res, open: OpenOperatorSession, err: BillingError, back: string): void {
  const status = err instanceof InvalidArgumentError ? 400 : 409;
  dashPage(res, status, "Not done", `<h1>Not done</h1><p class="error" role="alert">${esc(err.message)}</p><p><a href="${esc(back)}">Back</a></p>`, open);
}

export interface DashboardOptions {
  /** Adds `Secure` to the cookies (the public URL is https). */
  secureCookies: boolean;
  /** The session's lifetime (the cookie's Max-Age), seconds. */
  sessionSeconds: number;
  /** Failed sign-ins' throttle (default: SIGN_IN_PER_ADDRESS and SIGN_IN_GLOBAL on real time). */
  throttle?: SignInThrottle;
}

export function createDashboard(sessions: OperatorSessions, s: DashboardServices, opts: DashboardOptions, log: Logger) {
  const secure = opts.secureCookies ? "; Secure" : "";
  const throttle = opts.throttle ?? new SignInThrottle();
  const sessionCookie = (token: string) => `${SESSION_COOKIE}=${token}; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=${opts.sessionSeconds}${secure}`;
  const clearSession = `${SESSION_COOKIE}=; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=0${secure}`;
  const loginCookie = (token: string) => `${LOGIN_COOKIE}=${token}; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=3600${secure}`;

  /** The names of the rate cards of these subscriptions (one read per distinct card, through the catalog use case). */
  async function cardNames(c: Caller, subs: Subscription[]): Promise<Map<string, string>> {
    const ids = [...new Set(subs.map((x) => x.rateCardId))];
    const cards = await Promise.all(ids.map((id) => s.cards.get(c, id).catch(() => undefined)));
    return new Map(cards.filter((x): x is RateCard => x !== undefined).map((x) => [x.id, x.name]));
  }

  function signInPage(res: Res, status: number, error?: string, headers: Record<string, string> = {}): void {
    const token = randomBase62(32);
    dashPage(
      res,
      status,
      "Sign in",
      `<div class="signin card"><h1>Billing dashboard</h1>
<p>Sign in with a <strong>secret API key</strong> of the environment you operate. The dashboard shows one environment at a time; signing in with a key of another environment adds it to the switcher at the top.</p>
${error ? `<p class="error" role="alert">${esc(error)}</p>` : ""}
<form method="post" action="/dashboard/sign-in">${csrfField(token)}
<label for="api_key">Secret API key</label>
<input id="api_key" name="api_key" type="password" autocomplete="current-password" required spellcheck="false">
<button type="submit">Sign in</button></form>
<p class="muted">The session lasts ${Math.round(opts.sessionSeconds / 60)} minutes, or until you sign out.</p></div>`,
      undefined,
      "",
      { ...headers, "set-cookie": loginCookie(token) },
    );
  }

  async function overview(res: Res, open: OpenOperatorSession, c: Caller): Promise<void> {
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
    const more = (r: { hasMore: boolean }, href: string) => (r.hasMore ? `<p><a href="${href}">All…</a></p>` : "");
    const revenueCards = revenue
      .map(
        (r, i) =>
          `<div class="card" aria-labelledby="rev-${i}"><h2 id="rev-${i}" style="margin-top:0">Invoiced ${i === 0 ? "this month" : "last month"} <span class="muted">(${r.month})</span></h2>${
            r.totals.length === 0
              ? '<p class="muted">Nothing invoiced.</p>'
              : `<ul>${r.totals.map((x) => `<li><strong>${esc(displayMoney(x.total, x.currency))}</strong> <span class="muted">on ${x.count} invoice${x.count === 1 ? "" : "s"}</span></li>`).join("")}</ul>`
          }</div>`,
      )
      .join("");
    const failingRows = failing.items.map((x) => [
      subLink(x.id),
      subjectLink(x.subjectId),
      `<span class="err">${esc(x.billingFailure?.message ?? "")}</span>`,
      String(x.billingFailure?.attempts ?? 0),
      x.billingFailure ? minute(x.billingFailure.retryAt) : "",
    ]);
    const endpointRows = endpoints.map((x) => [
      `<a class="mono" href="/dashboard/webhooks/${esc(x.endpoint.id)}">${esc(x.endpoint.url)}</a>`,
      `${badge(x.endpoint.status)}${x.endpoint.failingSince ? ' <span class="badge void">failing</span>' : ""}`,
      x.endpoint.failingSince ? minute(x.endpoint.failingSince) : "",
      String(x.retrying),
      String(x.failedRecently),
      x.lastError
        ? `<span class="err">${esc(x.lastError.error ?? (x.lastError.statusCode !== null ? `HTTP ${x.lastError.statusCode}` : "failed"))}</span> <span class="muted">${minute(x.lastError.at)}</span>`
        : "",
    ]);
    dashPage(
      res,
      200,
      "Overview",
      `<h1>Overview</h1>
<div class="grid">${revenueCards}</div>
<p class="muted">Revenue: invoices finalized in the month (UTC), void ones left out.</p>
<section aria-labelledby="h-ingest" class="card"><h2 id="h-ingest" style="margin-top:0">Events ingested per hour, last 7 days <span class="muted">(${ingested} accepted, UTC)</span></h2>${chart}</section>
<section aria-labelledby="h-failing"><h2 id="h-failing">Subscriptions needing attention</h2>${table("Subscriptions whose billing cycle could not be closed", ["Subscription", "Subject", "Error", "#Attempts", "Next retry"], failingRows, "None: every billing cycle closed.")}${more(failing, "/dashboard/subscriptions")}</section>
<section aria-labelledby="h-webhooks"><h2 id="h-webhooks">Webhook endpoints needing attention</h2>${table("Webhook endpoints failing, retrying deliveries, or with deliveries failed in the last 24 hours", ["Endpoint", "Status", "Failing since", "#Retrying", "#Failed (24 h)", "Last error"], endpointRows, "None: every webhook endpoint is delivering.")}</section>
<section aria-labelledby="h-active"><h2 id="h-active">Active subscriptions (newest)</h2>${table("Active subscriptions", SUBSCRIPTION_HEAD, subscriptionRows(active.items, await cardNames(c, active.items)), "No active subscriptions.")}${more(active, "/dashboard/subscriptions?status=active")}</section>
<section aria-labelledby="h-drafts"><h2 id="h-drafts">Draft invoices</h2>${table("Draft invoices", INVOICE_HEAD, invoiceRows(drafts.items), "No drafts waiting.")}${more(drafts, "/dashboard/invoices?status=draft")}</section>
<section aria-labelledby="h-open"><h2 id="h-open">Open invoices (unpaid)</h2>${table("Open invoices", INVOICE_HEAD, invoiceRows(unpaid.items), "No open invoices.")}${more(unpaid, "/dashboard/invoices?status=open")}</section>`,
      open,
      "/dashboard",
    );
  }

  async function subjectsPage(res: Res, open: OpenOperatorSession, c: Caller, q: URLSearchParams): Promise<void> {
    const term = (q.get("q") ?? "").trim();
    const offset = offsetOf(q);
    const result = term ? await s.subjects.search(c, term, PAGE, offset) : await s.subjects.list(c, PAGE, offset);
    const rows = result.items.map((x) => [subjectLink(x.id), esc(x.name ?? ""), esc(x.email ?? ""), `<span class="mono">${esc(x.externalId ?? "")}</span>`, day(x.createdAt)]);
    dashPage(
      res,
      200,
      "Subjects",
      `<h1>Subjects</h1>
<form method="get" action="/dashboard/subjects" class="filters" role="search"><div><label for="q">Search</label><input id="q" name="q" value="${esc(term)}" placeholder="name, email or external ID"></div><div><button type="submit">Search</button></div></form>
${table(term ? `Subjects matching ${term}` : "Subjects, oldest first", ["Subject", "Name", "Email", "External ID", "Created"], rows, term ? "No subject matches." : "No subjects yet.")}
${pager("/dashboard/subjects", q, offset, PAGE, result.hasMore)}`,
      open,
      "/dashboard/subjects",
    );
  }

  /** Per pricing metric of the subject's active subscriptions: its usage over the chosen period, bucketed by the summary API. */
  async function usageCharts(c: Caller, subjectId: string, metricIds: string[], q: URLSearchParams, clockNow: Date): Promise<string> {
    const days = [1, 7, 30, 90].includes(Number(q.get("days"))) ? Number(q.get("days")) : 7;
    const granularity = days <= 1 ? "hour" : days <= 30 ? "day" : "week";
    // To the end of the current hour (the subject's clock): usage of this hour is shown.
    const end = new Date((Math.floor(clockNow.getTime() / 3_600_000) + 1) * 3_600_000);
    const start = new Date(end.getTime() - days * 86_400_000);
    const choose = [1, 7, 30, 90].map((d) => (d === days ? `<strong>${d} d</strong>` : `<a href="/dashboard/subjects/${esc(subjectId)}?days=${d}#usage">${d} d</a>`)).join(" · ");
    const charts: string[] = [];
    for (const id of metricIds) {
      const metric = await s.metrics.get(c, id);
      const summaries = await s.summaries.summarize(c, id, { subjectId, dimensions: [], granularity, period: { start, end } });
      const bars = summaries.map((x) => ({ label: new Date(x.period.start).toISOString().slice(granularity === "hour" ? 11 : 5, granularity === "hour" ? 16 : 10), value: Number(x.value ?? "0") }));
      charts.push(
        `<div class="card"><h3>${esc(metric.name)} <span class="muted">(${esc(metric.aggregation.type)} per ${granularity}, ${esc(metric.unit)})</span></h3>${barChart(`${metric.name} per ${granularity}`, bars)}</div>`,
      );
    }
    return `<section aria-labelledby="usage"><h2 id="usage">Usage</h2><p>Period: ${choose} <span class="muted">(${minute(start)} – ${minute(end)})</span></p>${charts.join("") || '<p class="muted">No usage-based rates on active subscriptions.</p>'}</section>`;
  }

  /** The subject page's invoice pages (its own offset, so the usage period choice stays apart). */
  function invoicePager(subjectId: string, offset: number, hasMore: boolean): string {
    const link = (o: number, label: string, rel: string) => `<a rel="${rel}" href="/dashboard/subjects/${esc(subjectId)}${o > 0 ? `?invoices_offset=${o}` : ""}#h-invs">${label}</a>`;
    const prev = offset > 0 ? link(Math.max(0, offset - PAGE), "← Previous invoices", "prev") : "";
    const next = hasMore ? link(offset + PAGE, "Next invoices →", "next") : "";
    return prev || next ? `<p class="pager">${prev}${next}</p>` : "";
  }

  async function subjectPage(res: Res, open: OpenOperatorSession, c: Caller, id: string, q: URLSearchParams): Promise<void> {
    const subject = await s.subjects.get(c, id);
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
      state.usage.map((u) => [esc(u.rateName), esc(u.usedUnits), esc(u.includedUnits)]),
      "No usage-based rates on active subscriptions.",
    );
    const metricIds = [...new Set(state.usage.map((u) => u.pricingMetricId))];
    dashPage(
      res,
      200,
      subject.name ?? subject.id,
      `<h1>${esc(subject.name ?? subject.id)}</h1>
<div class="grid"><div class="card"><dl><dt>ID</dt><dd class="mono">${esc(subject.id)}</dd><dt>Email</dt><dd>${esc(subject.email ?? "—")}</dd><dt>External ID</dt><dd class="mono">${esc(subject.externalId ?? "—")}</dd>
<dt>Payment method</dt><dd>${subject.hasPaymentMethod ? "on file" : "none"}</dd><dt>Created</dt><dd>${minute(subject.createdAt)}</dd>${clock ? `<dt>Test clock</dt><dd><a href="/dashboard/clocks/${esc(clock.id)}">${esc(clock.name || clock.id)}</a> at ${minute(clock.frozenTime)}</dd>` : ""}</dl></div>
<div class="card" aria-labelledby="h-state"><h2 id="h-state" style="margin-top:0">Billing state</h2><p>${state.hasActiveSubscription ? "Has an active subscription" : "No active subscription"}${state.paused.length ? `; ${state.paused.length} paused` : ""}${state.hasOverage ? ' · <strong class="error">over an included amount</strong>' : ""}</p>${usage}</div></div>
<section aria-labelledby="h-subs"><h2 id="h-subs">Subscriptions</h2>${table("Subscriptions", SUBSCRIPTION_HEAD, subscriptionRows(subs.items, await cardNames(c, subs.items)), "No subscriptions.")}${subs.hasMore ? '<p class="muted">The first 100 are shown.</p>' : ""}</section>
<section aria-labelledby="h-invs"><h2 id="h-invs">Invoices</h2>${table("Invoices, oldest first", INVOICE_HEAD, invoiceRows(invs.items), "No invoices.")}${invoicePager(subject.id, invoiceOffset, invs.hasMore)}</section>
${await usageCharts(c, subject.id, metricIds, q, clock?.frozenTime ?? new Date())}`,
      open,
      "/dashboard/subjects",
    );
  }

  async function subscriptionsPage(res: Res, open: OpenOperatorSession, c: Caller, q: URLSearchParams): Promise<void> {
    const status = q.get("status") ?? "";
    const rateCardId = (q.get("rate_card_id") ?? "").trim();
    const offset = offsetOf(q);
    const result = await s.subscriptions.listAll(c, { status, rateCardId }, PAGE, offset);
    const options = ["", "active", "paused", "cancelled"].map((x) => `<option value="${x}"${x === status ? " selected" : ""}>${x || "any"}</option>`).join("");
    dashPage(
      res,
      200,
      "Subscriptions",
      `<h1>Subscriptions</h1>
<form method="get" action="/dashboard/subscriptions" class="filters"><div><label for="status">Status</label><select id="status" name="status">${options}</select></div>
<div><label for="rate_card_id">Rate card ID</label><input id="rate_card_id" name="rate_card_id" value="${esc(rateCardId)}"></div><div><button type="submit">Filter</button></div></form>
${table("Subscriptions, newest first", SUBSCRIPTION_HEAD, subscriptionRows(result.items, await cardNames(c, result.items)), "No subscriptions match.")}
${pager("/dashboard/subscriptions", q, offset, PAGE, result.hasMore)}`,
      open,
      "/dashboard/subscriptions",
    );
  }

  async function subscriptionPage(res: Res, open: OpenOperatorSession, c: Caller, id: string, q: URLSearchParams): Promise<void> {
    const sub = await s.subscriptions.get(c, id);
    const card = await s.cards.get(c, sub.rateCardId).catch(() => undefined);
    const offset = offsetOf(q);
    const mine = await s.invoices.listAll(c, "", PAGE, offset, sub.id);
    const csrf = csrfField(open.session.csrfToken);
    const canCancel = sub.status === "active" || sub.status === "paused";
    const forms = canCancel
      ? `<section aria-labelledby="h-cancel" class="card"><h2 id="h-cancel" style="margin-top:0">Cancel</h2>
${sub.status === "active" && !sub.cancelsAtEndOfCycle ? `<form method="post" action="/dashboard/subscriptions/${esc(sub.id)}/cancel" class="inline">${csrf}<input type="hidden" name="when" value="end_of_cycle"><button type="submit">Cancel at end of period (${day(sub.periodEnd)})</button></form> ` : ""}
<form method="post" action="/dashboard/subscriptions/${esc(sub.id)}/cancel" class="inline">${csrf}<input type="hidden" name="when" value="now"><button type="submit" class="danger">Cancel now</button></form>
<p class="muted">Cancelling now bills the usage so far on a final invoice and charges no new fixed fees.</p></section>`
      : "";
    const cards = sub.status === "active" ? await s.cards.list(c, 100) : undefined;
    const changeForm =
      cards && cards.items.length > 1
        ? `<section aria-labelledby="h-change" class="card"><h2 id="h-change" style="margin-top:0">Change rate card</h2>
<form method="get" action="/dashboard/subscriptions/${esc(sub.id)}/change" class="filters"><div><label for="rate_card_id">New rate card</label><select id="rate_card_id" name="rate_card_id">${cards.items
            .filter((x) => x.id !== sub.rateCardId)
            .map((x) => `<option value="${esc(x.id)}">${esc(x.name)} (${esc(x.billingInterval)}${x.currency ? `, ${esc(x.currency)}` : ""})</option>`)
            .join("")}</select></div>
<div><label for="behavior">Upgrade charge</label><select id="behavior" name="behavior"><option value="prorate">prorated for the rest of the period</option><option value="rate_difference">the full difference</option></select></div>
<div><button type="submit">Preview the change</button></div></form><p class="muted">The preview changes nothing; you confirm on the next page.</p></section>`
        : "";
    const rates = card
      ? `<p>${esc(card.name)} <span class="muted">(${esc(card.billingInterval)})</span></p>${table(
          "Fixed quantities",
          ["Rate", "#Quantity"],
          Object.entries(sub.fixedRateQuantities).map(([k, v]) => [esc(k), esc(v)]),
          "No fixed rates.",
        )}`
      : "";
    dashPage(
      res,
      200,
      `Subscription ${sub.id}`,
      `<h1>Subscription <span class="mono">${esc(sub.id)}</span></h1>${notice(q)}
<div class="grid"><div class="card"><dl><dt>Status</dt><dd>${badge(sub.status)}${sub.cancelsAtEndOfCycle && sub.status === "active" ? " (ends at period end)" : ""}</dd><dt>Subject</dt><dd>${subjectLink(sub.subjectId)}</dd>
<dt>Rate card</dt><dd class="mono">${esc(sub.rateCardId)}</dd><dt>Current period</dt><dd>${minute(sub.periodStart)} – ${minute(sub.periodEnd)}</dd>${sub.cancelledAt ? `<dt>Cancelled</dt><dd>${minute(sub.cancelledAt)}</dd>` : ""}
${sub.billingFailure ? `<dt>Billing failure</dt><dd class="error">${esc(sub.billingFailure.message)} (attempts: ${sub.billingFailure.attempts})</dd>` : ""}</dl></div><div class="card">${rates}</div></div>
${changeForm}${forms}
<section aria-labelledby="h-invs"><h2 id="h-invs">Invoices</h2>${table("Invoices of this subscription, newest first", INVOICE_HEAD, invoiceRows(mine.items), "No invoices yet.")}${pager(`/dashboard/subscriptions/${sub.id}`, q, offset, PAGE, mine.hasMore)}</section>`,
      open,
      "/dashboard/subscriptions",
    );
  }

  async function changePreviewPage(res: Res, open: OpenOperatorSession, c: Caller, id: string, q: URLSearchParams): Promise<void> {
    const rateCardId = q.get("rate_card_id") ?? "";
    const behavior = q.get("behavior") ?? "prorate";
    let p: Awaited<ReturnType<SubscriptionChanges["previewChange"]>>;
    try {
      p = await s.changes.previewChange(c, id, { rateCardId, behavior });
    } catch (err) {
      if (err instanceof BillingError && !(err instanceof NotFoundError)) return refusalPage(res, open, err, `/dashboard/subscriptions/${id}`);
      throw err;
    }
    const m = (v: string) => (p.currency ? esc(displayMoney(v, p.currency)) : esc(v));
    const lines = table(
      "What the change invoices now",
      ["Description", "#Quantity", "#Unit price", "#Amount"],
      p.lines.map((l) => [esc(l.description), esc(l.quantity), m(l.unitAmount), m(l.amount)]),
      "Nothing: no usage so far and no upgrade charge.",
    );
    dashPage(
      res,
      200,
      "Preview: change rate card",
      `<h1>Change ${subLink(id)} from ${esc(p.from.name)} to ${esc(p.to.name)}?</h1>
<div class="card"><p>At ${minute(p.at)} (the subject's time), this change invoices the old card's usage so far${p.upgrade !== "0" ? ` and an upgrade charge of <strong>${m(p.upgrade)}</strong>` : ""}; the new card applies from then, in the same cycle.${p.upgrade === "0" ? " A downgrade or an equal price charges nothing for the fixed rates." : ""}</p>
${lines}<p>Total now: <strong>${m(p.total)}</strong></p>
${p.needsCheckout ? '<p class="error">The subject has no card on file: the change waits for a checkout, whose link the next page shows.</p>' : ""}
<form method="post" action="/dashboard/subscriptions/${esc(id)}/change">${csrfField(open.session.csrfToken)}<input type="hidden" name="rate_card_id" value="${esc(p.to.id)}"><input type="hidden" name="behavior" value="${esc(behavior)}">
<button type="submit">Change to ${esc(p.to.name)}</button></form><p><a href="/dashboard/subscriptions/${esc(id)}">Keep ${esc(p.from.name)}</a></p></div>`,
      open,
      "/dashboard/subscriptions",
    );
  }

  async function invoicesPage(res: Res, open: OpenOperatorSession, c: Caller, q: URLSearchParams): Promise<void> {
    const status = q.get("status") ?? "";
    const offset = offsetOf(q);
    const result = await s.invoices.listAll(c, status, PAGE, offset);
    const options = ["", ...INVOICE_STATUSES].map((x) => `<option value="${x}"${x === status ? " selected" : ""}>${x || "any"}</option>`).join("");
    dashPage(
      res,
      200,
      "Invoices",
      `<h1>Invoices</h1>
<form method="get" action="/dashboard/invoices" class="filters"><div><label for="status">Status</label><select id="status" name="status">${options}</select></div><div><button type="submit">Filter</button></div></form>
${table("Invoices, newest first", INVOICE_HEAD, invoiceRows(result.items), "No invoices match.")}
${pager("/dashboard/invoices", q, offset, PAGE, result.hasMore)}`,
      open,
      "/dashboard/invoices",
    );
  }

  async function invoicePage(res: Res, open: OpenOperatorSession, c: Caller, id: string, q: URLSearchParams): Promise<void> {
    const inv = await s.invoices.invoice(c, id);
    const csrf = csrfField(open.session.csrfToken);
    const m = (v: string) => esc(displayMoney(v, inv.currency));
    const lines = table(
      "Lines",
      ["Description", "#Quantity", "#Unit price", "#Amount"],
      inv.lines.map((l) => [esc(l.description), esc(l.quantity), m(l.unitAmount), m(l.amount)]),
      "No charges.",
    );
    const actions = [
      inv.status === "draft" ? `<form method="post" action="/dashboard/invoices/${esc(inv.id)}/finalize" class="inline">${csrf}<button type="submit">Finalize now</button></form>` : "",
      inv.status === "open" ? `<form method="post" action="/dashboard/invoices/${esc(inv.id)}/void" class="inline">${csrf}<button type="submit" class="danger">Void</button></form>` : "",
      `<a href="/hosted/invoices/${esc(inv.hostedToken)}" target="_blank" rel="noopener">Open the hosted page</a>`,
    ].join(" ");
    dashPage(
      res,
      200,
      `Invoice ${inv.id}`,
      `<h1>Invoice <span class="mono">${esc(inv.id)}</span></h1>${notice(q)}
<div class="card"><dl><dt>Status</dt><dd>${badge(inv.status)}</dd><dt>Subject</dt><dd>${subjectLink(inv.subjectId)}</dd><dt>Subscription</dt><dd>${subLink(inv.subscriptionId)}</dd>
<dt>Period</dt><dd>${minute(inv.periodStart)} – ${minute(inv.periodEnd)}</dd><dt>Total</dt><dd><strong>${m(inv.total)}</strong></dd>${inv.status === "draft" && inv.finalizesAt ? `<dt>Finalizes</dt><dd>${minute(inv.finalizesAt)}</dd>` : ""}</dl></div>
${lines}
<p>${actions}</p>`,
      open,
      "/dashboard/invoices",
    );
  }

  async function catalogPage(res: Res, open: OpenOperatorSession, c: Caller, q: URLSearchParams): Promise<void> {
    const offset = offsetOf(q);
    const [cards, metrics] = await Promise.all([s.cards.list(c, PAGE, offset), s.metrics.list(c, 100)]);
    const cardHtml = (card: RateCard) => {
      const rows = [
        ...card.fixedRates.map((r) => [`<span class="mono">${esc(r.code)}</span>`, esc(r.name), "fixed, in advance", priceText(r.price), ""]),
        ...card.usageRates.map((r) => [`<span class="mono">${esc(r.code)}</span>`, esc(r.name), `usage (${r.type}), in arrears`, usageRateText(r), esc(r.includedUnits)]),
      ];
      return `<article class="card" aria-label="${esc(card.name)}"><h3>${esc(card.name)} <span class="muted mono">${esc(card.id)}</span></h3><p class="muted">${esc(card.billingInterval)}${card.currency ? ` · ${esc(card.currency)}` : ""}${card.description ? ` · ${esc(card.description)}` : ""}</p>
${table(`Rates of ${card.name}`, ["Code", "Name", "Kind", "Price", "#Included"], rows, "No rates.")}
<p><a href="/dashboard/subscriptions?rate_card_id=${esc(card.id)}">Subscriptions on this card</a></p></article>`;
    };
    const metricRows = metrics.items.map((m) => [
      `<span class="mono">${esc(m.id)}</span>`,
      esc(m.name),
      `<span class="mono">${esc(m.eventName)}</span>`,
      `${esc(m.aggregation.type)}${m.aggregation.valueField ? ` of ${esc(m.aggregation.valueField)}` : ""}`,
      esc(m.unit),
      esc(m.dimensions.join(", ")),
    ]);
    dashPage(
      res,
      200,
      "Catalog",
      `<h1>Catalog</h1><section aria-labelledby="h-cards"><h2 id="h-cards">Rate cards</h2>${cards.items.map(cardHtml).join("") || '<p class="muted">No rate cards yet.</p>'}
${pager("/dashboard/catalog", q, offset, PAGE, cards.hasMore)}</section>
<section aria-labelledby="h-metrics"><h2 id="h-metrics">Pricing metrics</h2>${table("Pricing metrics", ["ID", "Name", "Event", "Aggregation", "Unit", "Dimensions"], metricRows, "No pricing metrics yet.")}${metrics.hasMore ? '<p class="muted">The first 100 are shown.</p>' : ""}</section>`,
      open,
      "/dashboard/catalog",
    );
  }

  async function eventsPage(res: Res, open: OpenOperatorSession, c: Caller, q: URLSearchParams): Promise<void> {
    const offset = offsetOf(q);
    const rejectedTab = q.get("show") === "rejected";
    const tabs = `<nav aria-label="Which events" class="filters"><a href="/dashboard/events"${rejectedTab ? "" : ' aria-current="page"'}>Accepted</a><a href="/dashboard/events?show=rejected"${rejectedTab ? ' aria-current="page"' : ""}>Rejected</a></nav>`;
    if (rejectedTab) {
      const result = await s.ingest.rejectedEvents(c, PAGE, offset);
      const rows = result.items.map((e) => [
        minute(e.receivedAt),
        `<span class="mono">${esc(e.reason)}</span>`,
        `<span class="err">${esc(e.message)}</span>`,
        `<span class="mono">${esc(e.field ?? "")}</span>`,
        `<span class="mono">${esc(e.subjectId)}</span>`,
        `<span class="mono">${esc(e.eventName)}</span>`,
        `<span class="mono">${esc(e.idempotencyKey)}</span>`,
        e.timestamp ? `<span class="mono">${esc(e.timestamp)}</span>` : '<span class="muted">none</span>',
      ]);
      return dashPage(
        res,
        200,
        "Rejected events",
        `<h1>Usage events</h1>${tabs}${table("Rejected usage events, newest first", ["Received", "Reason", "Message", "Field", "Subject (as sent)", "Name", "Idempotency key", "Timestamp"], rows, "No rejected events.")}
${pager("/dashboard/events", q, offset, PAGE, result.hasMore)}
<p class="muted">Events an ingest call refused, with the reason it answered; nothing of them was stored as usage. The fields are as sent, cut to 255 characters; the environment keeps its newest ${REJECTED_KEPT.toLocaleString("en-US")}.</p>`,
        open,
        "/dashboard/events",
      );
    }
    const result = await s.ingest.recentEvents(c, PAGE, offset);
    const rows = result.items.map((e) => {
      const data = JSON.stringify(e.data);
      return [
        `<span class="mono">${esc(e.id)}</span>`,
        minute(e.occurredAt),
        subjectLink(e.subjectId),
        `<span class="mono">${esc(e.eventName)}</span>`,
        `<span class="mono">${esc(e.idempotencyKey)}</span>`,
        `<span class="mono">${esc(data.length > 160 ? `${data.slice(0, 160)}…` : data)}</span>`,
        minute(e.createdAt),
      ];
    });
    dashPage(
      res,
      200,
      "Events",
      `<h1>Usage events</h1>${tabs}${table("Stored usage events, newest first", ["Event", "Occurred", "Subject", "Name", "Idempotency key", "Data", "Received"], rows, "No events yet.")}
${pager("/dashboard/events", q, offset, PAGE, result.hasMore)}
<p class="muted">Accepted events. The ones an ingest call refused are under <a href="/dashboard/events?show=rejected">Rejected</a>, with their reasons.</p>`,
      open,
      "/dashboard/events",
    );
  }

  async function webhookPage(res: Res, open: OpenOperatorSession, c: Caller, id: string, q: URLSearchParams): Promise<void> {
    const offset = offsetOf(q);
    const status = q.get("status") ?? "";
    const e = await s.webhookEndpoints.get(c, id);
    const deliveries = await s.webhookEndpoints.deliveries(c, e.id, { status, eventId: "" }, PAGE, offset);
    const rows = deliveries.items.map((d) => [
      `<span class="mono">${esc(d.id)}</span>`,
      `<span class="mono">${esc(d.eventType)}</span> <span class="muted mono">${esc(d.eventId)}</span>`,
      badge(d.status),
      String(d.attempts),
      d.lastAttemptAt ? minute(d.lastAttemptAt) : "",
      d.lastError || d.lastStatusCode !== null ? `<span class="err">${esc(d.lastError ?? `HTTP ${d.lastStatusCode}`)}</span>` : "",
      d.status === "pending" && d.nextAttemptAt ? minute(d.nextAttemptAt) : "",
    ]);
    const options = ["", "pending", "succeeded", "failed"].map((x) => `<option value="${x}"${x === status ? " selected" : ""}>${x || "any"}</option>`).join("");
    dashPage(
      res,
      200,
      "Webhook endpoint",
      `<h1>Webhook endpoint</h1>
<div class="card"><dl><dt>URL</dt><dd class="mono">${esc(e.url)}</dd><dt>ID</dt><dd class="mono">${esc(e.id)}</dd><dt>Status</dt><dd>${badge(e.status)}</dd>
<dt>Failing since</dt><dd>${e.failingSince ? `<span class="error">${minute(e.failingSince)}</span>` : "not failing"}</dd>
<dt>Events</dt><dd class="mono">${esc(e.eventTypes.join(", ") || "every type")}</dd>${e.description ? `<dt>Description</dt><dd>${esc(e.description)}</dd>` : ""}</dl></div>
<form method="get" action="/dashboard/webhooks/${esc(e.id)}" class="filters"><div><label for="status">Delivery status</label><select id="status" name="status">${options}</select></div><div><button type="submit">Filter</button></div></form>
${table("Deliveries, newest first", ["Delivery", "Event", "Status", "#Attempts", "Last attempt", "Last error", "Next attempt"], rows, "No deliveries.")}
${pager(`/dashboard/webhooks/${e.id}`, q, offset, PAGE, deliveries.hasMore)}`,
      open,
      "/dashboard",
    );
  }

  async function clocksPage(res: Res, open: OpenOperatorSession, c: Caller, q: URLSearchParams): Promise<void> {
    if (open.environment.mode !== "test") {
      return dashPage(res, 200, "Test clocks", "<h1>Test clocks</h1><p>Test clocks exist only in test environments; this is a live environment.</p>", open, "/dashboard/clocks");
    }
    const offset = offsetOf(q);
    const result = await s.clocks.listClocks(c, PAGE, offset);
    const rows = result.items.map((k) => [`<a class="mono" href="/dashboard/clocks/${esc(k.id)}">${esc(k.id)}</a>`, esc(k.name), minute(k.frozenTime)]);
    dashPage(
      res,
      200,
      "Test clocks",
      `<h1>Test clocks</h1>${table("Test clocks, newest first", ["Clock", "Name", "Frozen at"], rows, "No test clocks yet.")}${pager("/dashboard/clocks", q, offset, PAGE, result.hasMore)}`,
      open,
      "/dashboard/clocks",
    );
  }

  async function clockPage(res: Res, open: OpenOperatorSession, c: Caller, id: string, q: URLSearchParams): Promise<void> {
    const clock = await s.clocks.clock(c, id);
    const from = q.get("from");
    const moved =
      from && /^\d{4}-\d\d-\d\dT[\d:.]+Z$/.test(from)
        ? `<p class="notice" role="status">Advanced from ${esc(minute(new Date(from)))} to ${esc(minute(clock.frozenTime))}. Every cycle close, cancellation and timeline transition due by then has run.</p>`
        : notice(q);
    const value = clock.frozenTime.toISOString().slice(0, 16);
    dashPage(
      res,
      200,
      `Test clock ${clock.name}`,
      `<h1>Test clock ${esc(clock.name)}</h1>${moved}
<div class="card"><dl><dt>ID</dt><dd class="mono">${esc(clock.id)}</dd><dt>Frozen at</dt><dd><strong id="frozen">${minute(clock.frozenTime)}</strong></dd></dl></div>
<form method="post" action="/dashboard/clocks/${esc(clock.id)}/advance" class="card">${csrfField(open.session.csrfToken)}
<label for="frozen_time">Advance to (UTC)</label><input id="frozen_time" name="frozen_time" type="datetime-local" value="${esc(value)}" min="${esc(value)}" required>
<button type="submit">Advance</button><p class="muted">Clocks only move forward. Advancing runs everything due on the subjects of this clock up to the new time.</p></form>`,
      open,
      "/dashboard/clocks",
    );
  }

  /** A POST of a signed-in form: runs `change` after the CSRF check, then 303 to `to`. */
  async function post(req: Req, res: Res, open: OpenOperatorSession, back: string, change: (form: URLSearchParams) => Promise<string>, answered?: (to: string) => boolean): Promise<void> {
    const form = await readForm(req);
    if (!sameToken(form.get("csrf") ?? "", open.session.csrfToken)) {
      return dashPage(
        res,
        403,
        "Refused",
        `<h1>Refused</h1><p class="error" role="alert">The form's security token is missing or out of date. Reload the page and try again.</p><p><a href="${esc(back)}">Back</a></p>`,
        open,
      );
    }
    let to: string;
    try {
      to = await change(form);
    } catch (err) {
      if (err instanceof BillingError && !(err instanceof NotFoundError)) return refusalPage(res, open, err, back);
      throw err;
    }
    if (answered?.(to)) return;
    redirect(res, to);
  }

  const routes: [string, RegExp, (req: Req, res: Res, open: OpenOperatorSession, c: Caller, m: string[], q: URLSearchParams) => Promise<void>][] = [
    ["GET", /^\/dashboard\/?$/, (_req, res, open, c) => overview(res, open, c)],
    ["GET", /^\/dashboard\/subjects$/, (_req, res, open, c, _m, q) => subjectsPage(res, open, c, q)],
    ["GET", new RegExp(`^/dashboard/subjects/${ID}$`), (_req, res, open, c, m, q) => subjectPage(res, open, c, m[1] as string, q)],
    ["GET", /^\/dashboard\/subscriptions$/, (_req, res, open, c, _m, q) => subscriptionsPage(res, open, c, q)],
    ["GET", new RegExp(`^/dashboard/subscriptions/${ID}$`), (_req, res, open, c, m, q) => subscriptionPage(res, open, c, m[1] as string, q)],
    [
      "POST",
      new RegExp(`^/dashboard/subscriptions/${ID}/cancel$`),
      (req, res, open, c, m) => {
        const id = m[1] as string;
        const back = `/dashboard/subscriptions/${id}`;
        return post(req, res, open, back, async (form) => {
          const atEnd = form.get("when") === "end_of_cycle";
          await s.changes.cancel(c, id, { ...(atEnd ? { atEndOfCycle: true } : {}), reason: "cancelled from the dashboard" });
          return `${back}?done=${atEnd ? "cancelling" : "cancelled"}`;
        });
      },
    ],
    ["GET", new RegExp(`^/dashboard/subscriptions/${ID}/change$`), (_req, res, open, c, m, q) => changePreviewPage(res, open, c, m[1] as string, q)],
    [
      "POST",
      new RegExp(`^/dashboard/subscriptions/${ID}/change$`),
      async (req, res, open, c, m) => {
        const id = m[1] as string;
        const back = `/dashboard/subscriptions/${id}`;
        let checkoutUrl: string | undefined;
        await post(
          req,
          res,
          open,
          back,
          async (form) => {
            const r = await s.changes.changeRateCard(c, id, { rateCardId: form.get("rate_card_id") ?? "", behavior: form.get("behavior") ?? "" });
            if (r.kind === "requires_action") checkoutUrl = r.checkoutUrl;
            return `${back}?done=changed`;
          },
          (to) => {
            if (checkoutUrl === undefined) return false;
            dashPage(
              res,
              200,
              "Checkout needed",
              `<h1>The change waits for a payment</h1><p>The subject has no card on file. Send them this checkout; the change happens when it is paid:</p><p><a href="${esc(checkoutUrl)}">${esc(checkoutUrl)}</a></p><p><a href="${esc(to.split("?")[0] as string)}">Back to the subscription</a></p>`,
              open,
            );
            return true;
          },
        );
      },
    ],
    ["GET", /^\/dashboard\/invoices$/, (_req, res, open, c, _m, q) => invoicesPage(res, open, c, q)],
    ["GET", new RegExp(`^/dashboard/invoices/${ID}$`), (_req, res, open, c, m, q) => invoicePage(res, open, c, m[1] as string, q)],
    [
      "POST",
      new RegExp(`^/dashboard/invoices/${ID}/(finalize|void)$`),
      (req, res, open, c, m) => {
        const id = m[1] as string;
        const back = `/dashboard/invoices/${id}`;
        return post(req, res, open, back, async () => {
          if (m[2] === "finalize") await s.invoices.finalize(c, id);
          else await s.invoices.setInvoiceStatus(c, id, "void");
          return `${back}?done=${m[2] === "finalize" ? "finalized" : "voided"}`;
        });
      },
    ],
    ["GET", /^\/dashboard\/catalog$/, (_req, res, open, c, _m, q) => catalogPage(res, open, c, q)],
    ["GET", /^\/dashboard\/events$/, (_req, res, open, c, _m, q) => eventsPage(res, open, c, q)],
    ["GET", new RegExp(`^/dashboard/webhooks/${ID}$`), (_req, res, open, c, m, q) => webhookPage(res, open, c, m[1] as string, q)],
    ["GET", /^\/dashboard\/clocks$/, (_req, res, open, c, _m, q) => clocksPage(res, open, c, q)],
    ["GET", new RegExp(`^/dashboard/clocks/${ID}$`), (_req, res, open, c, m, q) => clockPage(res, open, c, m[1] as string, q)],
    [
      "POST",
      new RegExp(`^/dashboard/clocks/${ID}/advance$`),
      (req, res, open, c, m) => {
        const id = m[1] as string;
        const back = `/dashboard/clocks/${id}`;
        return post(req, res, open, back, async (form) => {
          const raw = (form.get("frozen_time") ?? "").trim();
          // datetime-local sends 2026-02-15T00:00 (minutes; seconds when given): read as UTC.
          const to = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d{1,3})?)?$/.test(raw) ? new Date(`${raw}Z`) : undefined;
          if (!to || Number.isNaN(to.getTime())) throw new InvalidArgumentError([{ field: "frozen_time", description: "must be a date and time, as 2026-02-15T00:00 (UTC)" }]);
          const before = await s.clocks.clock(c, id);
          await s.clocks.advanceClock(c, id, to);
          return `${back}?from=${encodeURIComponent(before.frozenTime.toISOString())}`;
        });
      },
    ],
  ];

  const handle = async (req: Req, res: Res, path: string): Promise<void> => {
    const jar = cookies(req);
    // The browser's sign-ins, one per environment, the active one first (`token.token…`).
    const tokens = (jar.get(SESSION_COOKIE) ?? "")
      .split(".")
      .filter((x) => x !== "")
      .slice(0, 2 * MAX_BROWSER_SESSIONS);
    if (path === "/dashboard/sign-in") {
      if (req.method === "GET") return signInPage(res, 200);
      if (req.method !== "POST") return dashPage(res, 405, "Not allowed", "<h1>Method not allowed</h1>", undefined, "", { allow: "GET, POST" });
      const form = await readForm(req);
      const expected = jar.get(LOGIN_COOKIE) ?? "";
      if (expected === "" || !sameToken(form.get("csrf") ?? "", expected)) return signInPage(res, 403, "The sign-in form expired or came from elsewhere. Try again.");
      // Failed sign-ins are throttled per client address and for the server (sign-in-throttle.ts):
      // while throttled, no key is looked at.
      const address = req.socket?.remoteAddress;
      const wait = throttle.refusal(address);
      if (wait !== undefined) return signInPage(res, 429, `Too many failed sign-ins. Try again in ${wait} s.`, { "retry-after": String(wait) });
      const result = await sessions.signIn(form.get("api_key") ?? "");
      if (!result.ok) {
        throttle.failed(address);
        return signInPage(res, 401, result.message);
      }
      // A sign-in adds its environment to the browser's session and makes it the active one; an
      // earlier sign-in to the same environment is replaced (ended on the server), and so are the
      // oldest beyond MAX_BROWSER_SESSIONS and any that no longer open.
      const held = await sessions.openAll(tokens);
      const others = held.filter((h) => h.open.environment.id !== result.open.environment.id);
      const kept = others.slice(0, MAX_BROWSER_SESSIONS - 1).map((h) => h.token);
      for (const t of tokens) if (!kept.includes(t)) await sessions.signOut(t);
      return redirect(res, "/dashboard", {
        "set-cookie": [sessionCookie([result.token, ...kept].join(".")), `${LOGIN_COOKIE}=; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=0${secure}`],
      });
    }
    const held = tokens.length > 0 ? await sessions.openAll(tokens) : [];
    const active = held[0];
    if (path === "/dashboard/sign-out") {
      if (req.method !== "POST") return dashPage(res, 405, "Not allowed", "<h1>Method not allowed</h1>", undefined, "", { allow: "POST" });
      if (active) {
        const form = await readForm(req);
        if (!sameToken(form.get("csrf") ?? "", active.open.session.csrfToken))
          return dashPage(res, 403, "Refused", '<h1>Refused</h1><p class="error" role="alert">The form\'s security token is missing or out of date.</p>', active.open);
        // Every environment's sign-in ends.
        for (const t of tokens) await sessions.signOut(t);
      }
      return redirect(res, "/dashboard/sign-in", { "set-cookie": clearSession });
    }
    if (!active) {
      if (req.method === "GET") return redirect(res, "/dashboard/sign-in", tokens.length > 0 ? { "set-cookie": clearSession } : {});
      return dashPage(res, 401, "Signed out", '<h1>Your session has ended</h1><p><a href="/dashboard/sign-in">Sign in again</a></p>');
    }
    // A sign-in that no longer opens (expired, its key revoked) drops out of the browser's list.
    if (held.length !== tokens.length && req.method === "GET") return redirect(res, req.url ?? "/dashboard", { "set-cookie": sessionCookie(held.map((h) => h.token).join(".")) });
    const open: DashSession = { ...active.open, environments: held.map((h) => h.open.environment) };
    if (path === "/dashboard/switch") {
      if (req.method !== "POST") return dashPage(res, 405, "Not allowed", "<h1>Method not allowed</h1>", open, "", { allow: "POST" });
      const form = await readForm(req);
      if (!sameToken(form.get("csrf") ?? "", open.session.csrfToken))
        return dashPage(res, 403, "Refused", '<h1>Refused</h1><p class="error" role="alert">The form\'s security token is missing or out of date. Reload the page and try again.</p>', open);
      const to = held.find((h) => h.open.environment.id === form.get("environment_id"));
      if (!to) return dashPage(res, 404, "Not found", "<h1>Not found</h1><p>This browser is not signed in to that environment.</p>", open);
      return redirect(res, "/dashboard", { "set-cookie": sessionCookie([to.token, ...held.filter((h) => h !== to).map((h) => h.token)].join(".")) });
    }
    const c = OperatorSessions.callerOf(open);
    for (const [method, re, fn] of routes) {
      const m = re.exec(path);
      if (!m) continue;
      if (req.method !== method) {
        if (req.method === "GET" || req.method === "HEAD" || req.method === "POST") {
          const other = routes.some(([m2, re2]) => m2 !== method && re2.test(path));
          if (other) continue;
        }
        return dashPage(res, 405, "Not allowed", "<h1>Method not allowed</h1>", open, "", { allow: method });
      }
      try {
        return await fn(req, res, open, c, [...m], query(req));
      } catch (err) {
        if (err instanceof NotFoundError) return dashPage(res, 404, "Not found", `<h1>Not found</h1><p>${esc(err.message)}</p>`, open);
        if (err instanceof InvalidArgumentError && req.method === "GET") return dashPage(res, 400, "Bad request", `<h1>Bad request</h1><p class="error" role="alert">${esc(err.message)}</p>`, open);
        throw err;
      }
    }
    return dashPage(res, 404, "Not found", "<h1>Not found</h1>", open);
  };

  const serve = servePages("/dashboard", handle, log);
  return (req: Req, res: Res): boolean => {
    const path = (req.url ?? "/").split("?", 1)[0] ?? "/";
    if (path !== "/dashboard" && !path.startsWith("/dashboard/")) return false;
    return serve(req, res);
  };
}
