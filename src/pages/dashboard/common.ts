/**
 * What the dashboard's pages share: the services they read and change, a page's context and
 * answer (View), paging, links, the subscription and invoice rows, notices and refusals.
 */
import type { PricingMetricService } from "../../billing/catalog/metrics.js";
import type { Credits } from "../../billing/credits/grants.js";
import type { CreditGrant } from "../../billing/credits/types.js";
import type { RateCardService } from "../../billing/catalog/rate-cards.js";
import type { RateCard } from "../../billing/catalog/types.js";
import { type BillingError, InvalidArgumentError, NotFoundError } from "../../billing/errors.js";
import type { WebhookEndpoints } from "../../billing/events/endpoints.js";
import type { IngestService, SummaryService } from "../../billing/metering/usage.js";
import { displayMoney } from "../../billing/money.js";
import type { SubjectService } from "../../billing/subjects.js";
import type { BillingStates } from "../../billing/subscriptions/billing-state.js";
import type { SubscriptionChanges } from "../../billing/subscriptions/changes.js";
import type { Invoices } from "../../billing/subscriptions/invoices.js";
import type { Subscriptions } from "../../billing/subscriptions/subscribe.js";
import type { TestClocks } from "../../billing/subscriptions/test-clocks.js";
import type { Invoice, Subscription } from "../../billing/subscriptions/types.js";
import type { PageResult } from "../../billing/pagination.js";
import type { InvoiceSettingsService } from "../../billing/taxes/settings.js";
import type { Caller } from "../../billing/tenancy.js";
import { type CreditReads, creditReads } from "../credits.js";
import { type Html, type Value, html } from "../html.js";
import { type DashSession, badge, day } from "./layout.js";

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
  /** The environment's invoice number prefix and seller (DESIGN §15). */
  invoiceSettings: InvoiceSettingsService;
  /** The credit use cases (absent: the subject page shows no credit section). */
  credits?: Credits;
}

/** The credit reads and changes the dashboard makes, on the credit use cases and billing state; undefined without credits. */
export function creditsOf(s: DashboardServices): DashboardCredits | undefined {
  const credits = s.credits;
  if (!credits) return undefined;
  return {
    ...creditReads(credits, s.billingStates),
    grants: (c, subjectId) => credits.list(c, { subjectId, status: "", limit: 100, offset: 0 }),
    async grant(c, input) {
      const amount = { currency: input.currency, value: input.amount };
      const r = await credits.create(c, { subjectId: input.subjectId, amount, category: input.category, priority: input.priority, expiresAt: input.expiresAt, appliesToRateCodes: [], metadata: {} });
      return r.grant;
    },
    async voidGrant(c, subjectId, grantId) {
      const g = await credits.get(c, grantId);
      if (g.subjectId !== subjectId) throw new NotFoundError("CREDIT_GRANT_NOT_FOUND", `credit grant ${JSON.stringify(grantId)} not found`, { credit_grant_id: grantId });
      return credits.void(c, grantId);
    },
  };
}

/** A promotional grant as the dashboard's form asks for it (amount in the smallest unit). */
export interface GrantInput {
  subjectId: string;
  amount: string;
  currency: string;
  category: "promotional";
  priority?: number;
  expiresAt?: Date;
}

/** What the dashboard reads and changes of a subject's credit, through the credit use cases. */
export interface DashboardCredits extends CreditReads {
  /** The subject's grants, oldest first (the first 100). */
  grants(caller: Caller, subjectId: string): Promise<PageResult<CreditGrant>>;
  grant(caller: Caller, input: GrantInput): Promise<CreditGrant>;
  /** Voids one of the subject's grants; another subject's is not found. */
  voidGrant(caller: Caller, subjectId: string, grantId: string): Promise<CreditGrant>;
}

/** A signed-in request to a page: its session, the caller it acts as, the path's captures and the query. */
export interface PageContext {
  open: DashSession;
  caller: Caller;
  services: DashboardServices;
  /** The route's captures (the IDs in the path). */
  params: string[];
  query: URLSearchParams;
}

/** A page's answer, written in the dashboard's shell: `current` is the navigation entry it belongs to. */
export interface View {
  status?: number;
  title: string;
  body: Html;
  current?: string;
}

/** Rows per list page. */
export const PAGE = 20;

export function offsetOf(q: URLSearchParams): number {
  const o = Number(q.get("offset") ?? "0");
  return Number.isInteger(o) && o >= 0 && o <= 1_000_000 ? o : 0;
}

export const money = (i: Invoice) => displayMoney(i.total, i.currency);
export const subjectLink = (id: string) => html`<a class="mono" href="/dashboard/subjects/${id}">${id}</a>`;
export const subLink = (id: string) => html`<a class="mono" href="/dashboard/subscriptions/${id}">${id}</a>`;
export const invLink = (id: string) => html`<a class="mono" href="/dashboard/invoices/${id}">${id}</a>`;

/** An invoice's link by its number (a draft: its ID), and its PDF (the hosted token's: no key needed) once finalized. */
export const invoiceLink = (i: Invoice) =>
  html`<a class="mono" href="/dashboard/invoices/${i.id}" title="${i.id}">${i.number || i.id}</a>${i.status === "draft" ? "" : html` <a href="/hosted/invoices/${i.hostedToken}/pdf" target="_blank" rel="noopener" aria-label="PDF of ${i.number || i.id}">PDF</a>`}`;

/** A subject's link by its name: the invoice's buyer as printed, else `names` (subjectNames), else its ID. */
export const subjectNameLink = (id: string, name: string | null | undefined) => (name ? html`<a href="/dashboard/subjects/${id}" title="${id}">${name}</a>` : subjectLink(id));

/** The names of the subjects of invoices that do not carry one (drafts), looked up once each. */
export async function subjectNames(s: Pick<DashboardServices, "subjects">, c: Caller, items: Invoice[]): Promise<Map<string, string>> {
  const ids = [...new Set(items.filter((i) => !i.customerName).map((i) => i.subjectId))];
  const found = await Promise.all(
    ids.map((id) =>
      s.subjects.get(c, id).then(
        (x) => [id, x.name] as const,
        () => undefined,
      ),
    ),
  );
  return new Map(found.filter((f): f is readonly [string, string] => f !== undefined && typeof f[1] === "string" && f[1] !== ""));
}

export function invoiceRows(items: Invoice[], names: Map<string, string> = new Map()): Value[][] {
  return items.map((i) => [
    invoiceLink(i),
    badge(i.status),
    subjectNameLink(i.subjectId, i.customerName || names.get(i.subjectId)),
    `${day(i.periodStart)} – ${day(i.periodEnd)}`,
    money(i),
    day(i.createdAt),
  ]);
}
export const INVOICE_HEAD = ["Invoice", "Status", "Subject", "Period", "#Total", "Created"];

/** Rows of subscriptions; `names`: rate card names by ID (an ID without one is shown as is). */
export function subscriptionRows(items: Subscription[], names: Map<string, string> = new Map()): Value[][] {
  return items.map((s) => [
    subLink(s.id),
    html`${badge(s.status)}${s.cancelsAtEndOfCycle && s.status === "active" ? html` <span class="muted">ends at period end</span>` : ""}${s.billingFailure ? html` <span class="badge void">set aside</span>` : ""}`,
    subjectLink(s.subjectId),
    names.has(s.rateCardId) ? html`<span title="${s.rateCardId}">${names.get(s.rateCardId) as string}</span>` : html`<span class="mono">${s.rateCardId}</span>`,
    s.status === "active" ? `${day(s.periodStart)} – ${day(s.periodEnd)}` : "",
  ]);
}
export const SUBSCRIPTION_HEAD = ["Subscription", "Status", "Subject", "Rate card", "Current period"];

/** The names of the rate cards of these subscriptions (one read per distinct card, through the catalog use case). */
export async function cardNames(s: DashboardServices, c: Caller, subs: Subscription[]): Promise<Map<string, string>> {
  const ids = [...new Set(subs.map((x) => x.rateCardId))];
  const cards = await Promise.all(ids.map((id) => s.cards.get(c, id).catch(() => undefined)));
  return new Map(cards.filter((x): x is RateCard => x !== undefined).map((x) => [x.id, x.name]));
}

/** Notices shown once after a change (`?done=`): fixed texts, nothing echoed. */
const NOTICES: Record<string, string> = {
  cancelled: "The subscription was cancelled.",
  cancelling: "The subscription will be cancelled at the end of its current period.",
  finalized: "The invoice was finalized.",
  voided: "The invoice was voided.",
  advanced: "The test clock was advanced; everything due up to its new time has run.",
  changed: "The subscription moved to the new rate card; the old card's usage so far was invoiced.",
  credit_granted: "The credit was granted.",
  credit_voided: "The grant was voided: what was left of it left the balance.",
};

export function notice(q: URLSearchParams): Html | "" {
  const done = q.get("done") ?? "";
  return Object.hasOwn(NOTICES, done) ? html`<p class="notice" role="status">${NOTICES[done] as string}</p>` : "";
}

/** A refused change or bad input, said on the page it came from. */
export function refusal(err: BillingError, back: string): View {
  const status = err instanceof InvalidArgumentError ? 400 : 409;
  return { status, title: "Not done", body: html`<h1>Not done</h1><p class="error" role="alert">${err.message}</p><p><a href="${back}">Back</a></p>` };
}
