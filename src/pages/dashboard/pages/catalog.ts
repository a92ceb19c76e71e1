/**
 * GET /dashboard/catalog: the rate cards with their rates and prices (prices.ts: tier tables,
 * percentages, minimum and maximum per period), and the pricing metrics; archived ones marked.
 */
import type { RateCard } from "../../../billing/catalog/types.js";
import { type Html, html } from "../../html.js";
import { priceHtml, usageRateHtml } from "../../prices.js";
import { PAGE, type PageContext, type View, offsetOf } from "../common.js";
import { minute, pager, table } from "../layout.js";

/** "archived" and since when, for an archived card or metric; nothing otherwise. */
const archivedBadge = (at: Date | null) => (at ? html` <span class="badge archived" title="Archived ${minute(at)}">archived</span>` : "");

function cardHtml(card: RateCard): Html {
  const rows = [
    ...card.fixedRates.map((r) => [html`<span class="mono">${r.code}</span>`, r.name, "fixed, in advance", priceHtml(r.price), ""]),
    ...card.usageRates.map((r) => [html`<span class="mono">${r.code}</span>`, r.name, `usage (${r.type}), in arrears`, usageRateHtml(r), r.includedUnits]),
  ];
  return html`<article class="card" aria-label="${card.name}"><h3>${card.name} <span class="muted mono">${card.id}</span>${archivedBadge(card.archivedAt)}</h3><p class="muted">${card.billingInterval}${card.currency ? ` · ${card.currency}` : ""}${card.description ? ` · ${card.description}` : ""}${card.archivedAt ? html` · archived ${minute(card.archivedAt)}: no new subscriptions; those on it continue` : ""}</p>
${table(`Rates of ${card.name}`, ["Code", "Name", "Kind", "Price", "#Included"], rows, "No rates.")}
<p><a href="/dashboard/subscriptions?rate_card_id=${card.id}">Subscriptions on this card</a></p></article>`;
}

export async function catalogPage({ services: s, caller: c, query: q }: PageContext): Promise<View> {
  const offset = offsetOf(q);
  const [cards, metrics] = await Promise.all([s.cards.list(c, PAGE, offset), s.metrics.list(c, 100)]);
  const metricRows = metrics.items.map((m) => [
    html`<span class="mono">${m.id}</span>`,
    html`${m.name}${archivedBadge(m.archivedAt)}`,
    html`<span class="mono">${m.eventName}</span>`,
    `${m.aggregation.type}${m.aggregation.valueField ? ` of ${m.aggregation.valueField}` : ""}`,
    m.unit,
    m.dimensions.join(", "),
  ]);
  const body = html`<h1>Catalog</h1><section aria-labelledby="h-cards"><h2 id="h-cards">Rate cards</h2>${cards.items.length > 0 ? cards.items.map(cardHtml) : html`<p class="muted">No rate cards yet.</p>`}
${pager("/dashboard/catalog", q, offset, PAGE, cards.hasMore)}</section>
<section aria-labelledby="h-metrics"><h2 id="h-metrics">Pricing metrics</h2>${table("Pricing metrics", ["ID", "Name", "Event", "Aggregation", "Unit", "Dimensions"], metricRows, "No pricing metrics yet.")}${metrics.hasMore ? html`<p class="muted">The first 100 are shown.</p>` : ""}</section>`;
  return { title: "Catalog", body, current: "/dashboard/catalog" };
}
