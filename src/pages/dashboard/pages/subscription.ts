/** GET /dashboard/subscriptions/{id}: a subscription with its rates, invoices, and the forms to change its rate card or cancel it. */
import type { RateCard } from "../../../billing/catalog/types.js";
import type { Subscription } from "../../../billing/subscriptions/types.js";
import { type Html, html } from "../../html.js";
import { INVOICE_HEAD, PAGE, type PageContext, type View, invoiceRows, notice, offsetOf, subjectLink } from "../common.js";
import { badge, csrfField, day, minute, pager, table } from "../layout.js";

/** The cancel forms of an active or paused subscription (at the end of the period: only an active one not already ending). */
function cancelForms(sub: Subscription, csrf: Html): Html | "" {
  if (sub.status !== "active" && sub.status !== "paused") return "";
  const atEnd =
    sub.status === "active" && !sub.cancelsAtEndOfCycle
      ? html`<form method="post" action="/dashboard/subscriptions/${sub.id}/cancel" class="inline">${csrf}<input type="hidden" name="when" value="end_of_cycle"><button type="submit">Cancel at end of period (${day(sub.periodEnd)})</button></form> `
      : "";
  return html`<section aria-labelledby="h-cancel" class="card"><h2 id="h-cancel" style="margin-top:0">Cancel</h2>
${atEnd}
<form method="post" action="/dashboard/subscriptions/${sub.id}/cancel" class="inline">${csrf}<input type="hidden" name="when" value="now"><button type="submit" class="danger">Cancel now</button></form>
<p class="muted">Cancelling now bills the usage so far on a final invoice and charges no new fixed fees.</p></section>`;
}

/** The change form (a GET to the preview) when there is another rate card to move to. */
function changeForm(sub: Subscription, cards: RateCard[] | undefined): Html | "" {
  if (!cards || cards.length <= 1) return "";
  const options = cards.filter((x) => x.id !== sub.rateCardId).map((x) => html`<option value="${x.id}">${x.name} (${x.billingInterval}${x.currency ? `, ${x.currency}` : ""})</option>`);
  return html`<section aria-labelledby="h-change" class="card"><h2 id="h-change" style="margin-top:0">Change rate card</h2>
<form method="get" action="/dashboard/subscriptions/${sub.id}/change" class="filters"><div><label for="rate_card_id">New rate card</label><select id="rate_card_id" name="rate_card_id">${options}</select></div>
<div><label for="behavior">Upgrade charge</label><select id="behavior" name="behavior"><option value="prorate">prorated for the rest of the period</option><option value="rate_difference">the full difference</option></select></div>
<div><button type="submit">Preview the change</button></div></form><p class="muted">The preview changes nothing; you confirm on the next page.</p></section>`;
}

function ratesHtml(sub: Subscription, card: RateCard | undefined): Html | "" {
  if (!card) return "";
  const rows = Object.entries(sub.fixedRateQuantities).map(([k, v]) => [k, v]);
  return html`<p>${card.name} <span class="muted">(${card.billingInterval})</span></p>${table("Fixed quantities", ["Rate", "#Quantity"], rows, "No fixed rates.")}`;
}

export async function subscriptionPage({ services: s, caller: c, open, params: [id], query: q }: PageContext): Promise<View> {
  const sub = await s.subscriptions.get(c, id as string);
  const card = await s.cards.get(c, sub.rateCardId).catch(() => undefined);
  const offset = offsetOf(q);
  const mine = await s.invoices.listAll(c, "", PAGE, offset, sub.id);
  const csrf = csrfField(open.session.csrfToken);
  const forms = cancelForms(sub, csrf);
  const cards = sub.status === "active" ? await s.cards.list(c, 100) : undefined;
  const body = html`<h1>Subscription <span class="mono">${sub.id}</span></h1>${notice(q)}
<div class="grid"><div class="card"><dl><dt>Status</dt><dd>${badge(sub.status)}${sub.cancelsAtEndOfCycle && sub.status === "active" ? " (ends at period end)" : ""}</dd><dt>Subject</dt><dd>${subjectLink(sub.subjectId)}</dd>
<dt>Rate card</dt><dd class="mono">${sub.rateCardId}</dd><dt>Current period</dt><dd>${minute(sub.periodStart)} – ${minute(sub.periodEnd)}</dd>${sub.cancelledAt ? html`<dt>Cancelled</dt><dd>${minute(sub.cancelledAt)}</dd>` : ""}
${sub.billingFailure ? html`<dt>Billing failure</dt><dd class="error">${sub.billingFailure.message} (attempts: ${sub.billingFailure.attempts})</dd>` : ""}</dl></div><div class="card">${ratesHtml(sub, card)}</div></div>
${changeForm(sub, cards?.items)}${forms}
<section aria-labelledby="h-invs"><h2 id="h-invs">Invoices</h2>${table("Invoices of this subscription, newest first", INVOICE_HEAD, invoiceRows(mine.items), "No invoices yet.")}${pager(`/dashboard/subscriptions/${sub.id}`, q, offset, PAGE, mine.hasMore)}</section>`;
  return { title: `Subscription ${sub.id}`, body, current: "/dashboard/subscriptions" };
}
