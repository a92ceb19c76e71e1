/** GET /dashboard/catalog: the rate cards with their rates and prices, and the pricing metrics. */
import type { Price, RateCard, UsageRate } from "../../../billing/catalog/types.js";
import { displayMoney } from "../../../billing/money.js";
import { type Html, html, join, raw } from "../../html.js";
import { PAGE, type PageContext, type View, offsetOf } from "../common.js";
import { pager, table } from "../layout.js";

function priceText(p: Price): string {
  switch (p.kind) {
    case "flat":
      return displayMoney(p.amount.value, p.amount.currency);
    case "package":
      return `${displayMoney(p.amount.value, p.amount.currency)} per ${p.packageUnits} units (${p.rounding.replace("_", " ")})`;
    case "tiered":
      return `${p.mode} tiers (${p.tiers.length})`;
    case "percentage":
      return `${p.percent}%${p.fixedPerEvent ? ` + ${displayMoney(p.fixedPerEvent.value, p.fixedPerEvent.currency)} per event` : ""}`;
  }
}

function usageRateText(r: UsageRate): Html | string {
  if (r.type === "simple") return priceText(r.price);
  return join(
    r.cells.map(
      (c) =>
        `${Object.entries(c.coordinates)
          .map(([k, v]) => `${k}=${v}`)
          .join(", ")}: ${priceText(c.price)}`,
    ),
    raw("<br>"),
  );
}

function cardHtml(card: RateCard): Html {
  const rows = [
    ...card.fixedRates.map((r) => [html`<span class="mono">${r.code}</span>`, r.name, "fixed, in advance", priceText(r.price), ""]),
    ...card.usageRates.map((r) => [html`<span class="mono">${r.code}</span>`, r.name, `usage (${r.type}), in arrears`, usageRateText(r), r.includedUnits]),
  ];
  return html`<article class="card" aria-label="${card.name}"><h3>${card.name} <span class="muted mono">${card.id}</span></h3><p class="muted">${card.billingInterval}${card.currency ? ` · ${card.currency}` : ""}${card.description ? ` · ${card.description}` : ""}</p>
${table(`Rates of ${card.name}`, ["Code", "Name", "Kind", "Price", "#Included"], rows, "No rates.")}
<p><a href="/dashboard/subscriptions?rate_card_id=${card.id}">Subscriptions on this card</a></p></article>`;
}

export async function catalogPage({ services: s, caller: c, query: q }: PageContext): Promise<View> {
  const offset = offsetOf(q);
  const [cards, metrics] = await Promise.all([s.cards.list(c, PAGE, offset), s.metrics.list(c, 100)]);
  const metricRows = metrics.items.map((m) => [
    html`<span class="mono">${m.id}</span>`,
    m.name,
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
