/** GET /dashboard/subscriptions[?status=&rate_card_id=]: the subscriptions, filtered. */
import { html } from "../../html.js";
import { PAGE, type PageContext, SUBSCRIPTION_HEAD, type View, cardNames, offsetOf, subscriptionRows } from "../common.js";
import { pager, table } from "../layout.js";

export async function subscriptionsPage({ services: s, caller: c, query: q }: PageContext): Promise<View> {
  const status = q.get("status") ?? "";
  const rateCardId = (q.get("rate_card_id") ?? "").trim();
  const offset = offsetOf(q);
  const result = await s.subscriptions.listAll(c, { status, rateCardId }, PAGE, offset);
  const options = ["", "active", "paused", "cancelled"].map((x) => html`<option value="${x}"${x === status ? html` selected` : ""}>${x || "any"}</option>`);
  const names = await cardNames(s, c, result.items);
  const body = html`<h1>Subscriptions</h1>
<form method="get" action="/dashboard/subscriptions" class="filters"><div><label for="status">Status</label><select id="status" name="status">${options}</select></div>
<div><label for="rate_card_id">Rate card ID</label><input id="rate_card_id" name="rate_card_id" value="${rateCardId}"></div><div><button type="submit">Filter</button></div></form>
${table("Subscriptions, newest first", SUBSCRIPTION_HEAD, subscriptionRows(result.items, names), "No subscriptions match.")}
${pager("/dashboard/subscriptions", q, offset, PAGE, result.hasMore)}`;
  return { title: "Subscriptions", body, current: "/dashboard/subscriptions" };
}
