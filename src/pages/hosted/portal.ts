/**
 * The customer portal's pages, on the hosted pages' shell (shell.ts): plain HTML that works
 * without JavaScript, readable on a phone and printable. Reached through the session's
 * unguessable token, without an API key:
 *
 *   GET  /hosted/portal/{token}                                   the portal
 *   GET  /hosted/portal/{token}/card                              the card form
 *   POST /hosted/portal/{token}/card                              replaces the saved card
 *   GET  /hosted/portal/{token}/subscriptions/{id}/cancel         asks to confirm
 *   POST /hosted/portal/{token}/subscriptions/{id}/cancel         cancels at the end of the cycle
 *
 * With the credit use cases wired in, the portal also shows the subject's credit balance per
 * currency and its ledger, newest first (`?ledger_offset=` pages it).
 *
 * A GET never changes anything (links are prefetched and followed by scanners): every change is
 * the POST of a form, and a successful one redirects (303) back to the portal. An unknown token
 * is 404; an expired session, or one whose subject was deleted, is 410.
 */
import { AbortedError, BillingError, NotFoundError } from "../../billing/errors.js";
import type { CustomerPortal, OpenPortal, PortalSubscription, PortalView } from "../../billing/subscriptions/portal.js";
import { displayMoney } from "../../billing/money.js";
import { isInternal } from "../../billing/subscriptions/types.js";
import type { Logger } from "../../log.js";
import type { Caller } from "../../billing/tenancy.js";
import { type CreditReads, LEDGER_PAGE, balancesHtml, ledgerHtml, ledgerOffsetOf, ledgerPager } from "../credits.js";
import { type Html, html, join } from "../html.js";
import { type Req, type Res, STRIPE_CHECKOUT_ORIGIN, messagePage, notAllowed, page, readForm, servePages } from "../shell.js";

const day = (d: Date) => d.toISOString().slice(0, 10);

/** A date that never breaks across lines (2026-01-15 is one word to a reader). */
const dateHtml = (d: Date) => html`<span class="nowrap">${day(d)}</span>`;

const brand = (b: string) => (b === "" ? "Card" : `${b.charAt(0).toUpperCase()}${b.slice(1)}`);

/** The host a return link names ("Return to app.example"). */
function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return "the application";
  }
}

/** Notices shown once after a change (the redirect's `?done=`); fixed texts, nothing echoed. */
const NOTICES: Record<string, string> = {
  card: "Your card was saved. Future charges go to it.",
  cancel: "Your subscription will end at the end of its current period.",
};

const portalBase = (token: string) => html`/hosted/portal/${token}`;
const backLink = (base: Html) => html`<p><a href="${base}">Back to billing</a></p>`;

function statusText(p: PortalSubscription): Html | string {
  const s = p.subscription;
  if (s.status === "cancelled") return html`Cancelled${s.cancelledAt ? html` on ${dateHtml(s.cancelledAt)}` : ""}`;
  if (s.status === "paused") return "Paused";
  return s.cancelsAtEndOfCycle ? html`Active, ends on ${dateHtml(s.periodEnd)} (cancelled at the end of the period)` : "Active, renews automatically";
}

function subscriptionHtml(base: Html, p: PortalSubscription): Html {
  const s = p.subscription;
  const rows = p.usage.map((u) => html`<tr><td>${u.rateName}</td><td class="n${u.over ? " over" : ""}">${u.usedUnits}</td><td class="n">${u.includedUnits}</td></tr>`);
  const usage = p.usage.length === 0 ? "" : html`<table><thead><tr><th>Usage this period</th><th class="n">Used</th><th class="n">Included</th></tr></thead><tbody>${rows}</tbody></table>`;
  const period = s.status === "active" ? html`<p>Current period: ${dateHtml(s.periodStart)} – ${dateHtml(s.periodEnd)}</p>` : "";
  const cancel = p.canCancel ? html`<p class="noprint"><a class="button" href="${base}/subscriptions/${s.id}/cancel">Cancel at the end of the period…</a></p>` : "";
  return html`<article class="box" aria-label="${p.rateCardName}"><h3>${p.rateCardName}</h3>
<p>Status: <strong>${statusText(p)}</strong></p>
${period}${usage}${cancel}</article>`;
}

/** The subject's invoices by number, each with its page and its PDF; an empty internal one is not shown (DESIGN §15). */
function invoicesHtml(v: PortalView): Html {
  const shown = v.invoices.filter((i) => !isInternal(i));
  if (shown.length === 0) return html`<p>No invoices yet.</p>`;
  const rows = shown.map(
    (i) =>
      html`<tr><td class="nowrap"><span class="number">${i.number || "Draft"}</span><br><span class="muted">${day(i.createdAt)}</span></td><td>${i.status}</td><td class="n">${displayMoney(i.total, i.currency)}</td><td><a href="/hosted/invoices/${i.hostedToken}" aria-label="View invoice of ${day(i.createdAt)} (${i.number || i.id})">View</a>${i.status === "draft" ? "" : html`<br><a class="noprint" href="/hosted/invoices/${i.hostedToken}/pdf" aria-label="PDF of invoice ${i.number || i.id}">PDF</a>`}</td></tr>`,
  );
  return html`<table><thead><tr><th>Invoice</th><th>Status</th><th class="n">Total</th><th><span class="noprint">Open</span></th></tr></thead><tbody>${rows}</tbody></table>`;
}

/** The subject's credit: balance per currency and the ledger, newest first, a page of it. */
async function creditHtml(credits: CreditReads, caller: Caller, v: PortalView, q: URLSearchParams): Promise<Html> {
  const offset = ledgerOffsetOf(q);
  const [balances, ledger] = await Promise.all([credits.balances(caller, v.subjectId), credits.ledger(caller, v.subjectId, { limit: LEDGER_PAGE, offset })]);
  const base = portalBase(v.session.token).text;
  // An application's invoice links to its hosted page when the portal lists it.
  const hosted = new Map(v.invoices.map((i) => [i.id, `/hosted/invoices/${i.hostedToken}`]));
  return html`<section aria-labelledby="credit"><h2 id="credit">Credit</h2>
${balancesHtml(balances)}
${balances.length > 0 || ledger.items.length > 0 || offset > 0 ? html`${ledgerHtml(ledger.items, (id) => hosted.get(id))}\n${ledgerPager(base, offset, ledger.hasMore, "credit")}` : ""}
</section>`;
}

function portalHtml(v: PortalView, notice: string | undefined, credit: Html | ""): Html {
  const base = portalBase(v.session.token);
  const who = v.profile.name ?? v.profile.email;
  const subs =
    v.subscriptions.length === 0
      ? html`<p>You have no subscriptions.</p>`
      : join(
          v.subscriptions.map((p) => subscriptionHtml(base, p)),
          "\n",
        );
  const card = v.paymentMethod ? html`${brand(v.paymentMethod.brand)} ending in ${v.paymentMethod.last4}` : "No card on file.";
  const cardAction = v.canReplaceCard ? html`<p class="noprint"><a class="button" href="${base}/card">${v.paymentMethod ? "Replace card" : "Add a card"}</a></p>` : "";
  return html`<main>
<p class="muted">Billing portal</p>
<h1>${who ? who : "Your billing"}</h1>
${v.profile.name && v.profile.email ? html`<p class="muted">${v.profile.email}</p>` : ""}
<p class="noprint"><a href="${v.session.returnUrl}">← Return to ${hostOf(v.session.returnUrl)}</a></p>
${notice ? html`<p class="notice" role="status">${notice}</p>` : ""}
<section aria-labelledby="subscriptions"><h2 id="subscriptions">Subscriptions</h2>
${subs}
</section>
<section aria-labelledby="payment"><h2 id="payment">Payment method</h2>
<p>${card}</p>
${cardAction}
</section>
<section aria-labelledby="invoices"><h2 id="invoices">Invoices</h2>
${invoicesHtml(v)}
</section>
${credit}
<p class="muted">This page works until ${v.session.expiresAt.toISOString().slice(0, 16).replace("T", " ")} UTC.</p>
</main>`;
}

/** The card form; without a payment provider (a live environment) no field at all, only why. */
function cardPage(res: Res, status: number, v: PortalView, error?: string): void {
  const base = portalBase(v.session.token);
  const hint = v.cardHint;
  const current = v.paymentMethod ? html`<p>Current card: ${brand(v.paymentMethod.brand)} ending in ${v.paymentMethod.last4}</p>` : html`<p>No card on file yet.</p>`;
  const form =
    v.canReplaceCard && v.cardOnProviderPage
      ? html`<form method="post" action="${base}/card"><button type="submit">Continue to card entry</button></form>`
      : v.canReplaceCard
        ? html`<form method="post" action="${base}/card">
<label for="card_number">Card number</label>
<input id="card_number" name="card_number" inputmode="numeric" autocomplete="cc-number" required${hint ? html` aria-describedby="cards"` : ""}${error ? html` aria-invalid="true"` : ""}>
${hint ? html`<p class="muted" id="cards">${hint}</p>` : ""}
<button type="submit">Save card</button>
</form>`
        : "";
  const body = html`<main><h1>${v.paymentMethod ? "Replace your card" : "Add a card"}</h1>
${current}
${error ? html`<p class="error" role="alert" id="error">${error}</p>` : ""}
${form}
${backLink(base)}</main>`;
  // A provider's own card page (Stripe Checkout): the form's POST is answered with a 303 there, which form-action must allow.
  page(res, status, "Replace your card", body, v.canReplaceCard && v.cardOnProviderPage ? [STRIPE_CHECKOUT_ORIGIN] : []);
}

function confirmCancelPage(res: Res, p: OpenPortal, s: PortalSubscription): void {
  const base = portalBase(p.session.token);
  const sub = s.subscription;
  if (!s.canCancel) {
    const why = sub.status === "active" ? `It already ends on ${day(sub.periodEnd)}.` : `It is ${sub.status}.`;
    page(res, 409, "Cannot cancel", html`<main><h1>${s.rateCardName} cannot be cancelled</h1><p>${why}</p>${backLink(base)}</main>`);
    return;
  }
  const body = html`<main><h1>Cancel ${s.rateCardName}?</h1>
<p>Your subscription stays active until the end of the current period, <strong>${dateHtml(sub.periodEnd)}</strong>, and then ends. Usage until then is billed on a final invoice; nothing renews after it.</p>
<form method="post" action="${base}/subscriptions/${sub.id}/cancel"><button type="submit">Yes, cancel at the end of the period</button></form>
<p><a href="${base}">No, keep my subscription</a></p></main>`;
  page(res, 200, `Cancel ${s.rateCardName}?`, body);
}

/** What a customer is told when a cancellation is refused (not active, already cancelling, a race that kept losing). */
function refusal(err: BillingError): string {
  if (err instanceof AbortedError) return "The subscription changed while you were cancelling it. Go back and try again.";
  if (err.reason === "SUBSCRIPTION_ALREADY_CANCELLING") return "This subscription already ends at the end of its period.";
  if (err.reason === "SUBSCRIPTION_NOT_ACTIVE") return "This subscription is no longer active.";
  return err.message;
}

function notFound(res: Res, what: string): void {
  messagePage(res, 404, "Not found", `${what} not found`, "Check the link, or open the billing portal again from the application.");
}

function gonePage(res: Res, session: { returnUrl: string }, expired: boolean): void {
  const body = html`<main><h1>${expired ? "This billing portal link has expired" : "This billing portal is no longer available"}</h1>
<p>${expired ? "Portal links work for a limited time. " : ""}Open the billing portal again from the application.</p>
<p><a href="${session.returnUrl}">Return to ${hostOf(session.returnUrl)}</a></p></main>`;
  page(res, 410, "Portal link expired", body);
}

/** Sends the browser back to the portal after a change, with a notice (303: the browser GETs it). */
function backToPortal(res: Res, token: string, done: keyof typeof NOTICES): void {
  res.writeHead(303, { location: `/hosted/portal/${token}?done=${done}`, "cache-control": "no-store" });
  res.end();
}

/** GET: the card form; POST: replaces the card. */
async function card(req: Req, res: Res, portal: CustomerPortal, p: OpenPortal, token: string): Promise<void> {
  if (req.method === "GET") {
    const v = await portal.view(p);
    return cardPage(res, v.canReplaceCard ? 200 : 409, v);
  }
  // A provider with its own card page (Stripe Checkout): the customer saves the card there.
  const setupUrl = await portal.startCardSetup(p);
  if (setupUrl) {
    res.writeHead(303, { location: setupUrl, "cache-control": "no-store" });
    res.end();
    return;
  }
  const form = await readForm(req);
  const result = await portal.replaceCard(p, form.get("card_number") ?? "");
  if (result.ok) return backToPortal(res, token, "card");
  return cardPage(res, result.noProvider ? 409 : 402, await portal.view(p), result.message);
}

/** GET: asks to confirm; POST: cancels at the end of the cycle. */
async function cancel(req: Req, res: Res, portal: CustomerPortal, p: OpenPortal, token: string, subscriptionId: string): Promise<void> {
  let s: PortalSubscription;
  try {
    s = await portal.subscription(p, subscriptionId);
  } catch (err) {
    if (err instanceof NotFoundError) return notFound(res, "Subscription");
    throw err;
  }
  if (req.method === "GET") return confirmCancelPage(res, p, s);
  try {
    await portal.cancelAtEndOfCycle(p, subscriptionId);
  } catch (err) {
    if (!(err instanceof BillingError) || err instanceof NotFoundError) throw err;
    const body = html`<main><h1>The subscription was not cancelled</h1><p class="error" role="alert">${refusal(err)}</p>${backLink(portalBase(token))}</main>`;
    return page(res, 409, "Cannot cancel", body);
  }
  return backToPortal(res, token, "cancel");
}

const PORTAL_PATH = /^\/hosted\/portal\/([0-9A-Za-z]{16,64})(?:\/(card)|\/subscriptions\/([0-9A-Za-z_]{1,64})\/cancel)?$/;

/** `credits`: the subject's balance and ledger (absent: the portal shows no credit section). */
export function createPortalPages(portal: CustomerPortal, log: Logger, credits?: CreditReads) {
  const handle = async (req: Req, res: Res, path: string): Promise<void> => {
    const m = PORTAL_PATH.exec(path);
    if (!m) return notFound(res, "Page");
    const [, token, cardPath, subscriptionId] = m as unknown as [string, string, string | undefined, string | undefined];
    if (req.method !== "GET" && req.method !== "POST") return notAllowed(res);
    const access = await portal.access(token);
    if (!access) return notFound(res, "Billing portal");
    if (access.state !== "open") return gonePage(res, access.session, access.state === "expired");
    if (cardPath) return card(req, res, portal, access.portal, token);
    if (subscriptionId !== undefined) return cancel(req, res, portal, access.portal, token, subscriptionId);
    if (req.method !== "GET") {
      res.setHeader("allow", "GET");
      return messagePage(res, 405, "Not allowed", "Method not allowed");
    }
    const query = new URLSearchParams((req.url ?? "").split("?")[1] ?? "");
    const done = query.get("done") ?? "";
    const v = await portal.view(access.portal);
    const credit = credits ? await creditHtml(credits, access.portal.caller, v, query) : "";
    page(res, 200, "Billing", portalHtml(v, Object.hasOwn(NOTICES, done) ? NOTICES[done] : undefined, credit));
  };
  return servePages("/hosted/portal/", handle, log);
}
