/** GET /dashboard/webhooks/{id}[?status=]: a webhook endpoint and its deliveries (linked from the overview's endpoints needing attention). */
import { html } from "../../html.js";
import { PAGE, type PageContext, type View, offsetOf } from "../common.js";
import { badge, minute, pager, table } from "../layout.js";

export async function webhookPage({ services: s, caller: c, params: [id], query: q }: PageContext): Promise<View> {
  const offset = offsetOf(q);
  const status = q.get("status") ?? "";
  const e = await s.webhookEndpoints.get(c, id as string);
  const deliveries = await s.webhookEndpoints.deliveries(c, e.id, { status, eventId: "" }, PAGE, offset);
  const rows = deliveries.items.map((d) => [
    html`<span class="mono">${d.id}</span>`,
    html`<span class="mono">${d.eventType}</span> <span class="muted mono">${d.eventId}</span>`,
    badge(d.status),
    String(d.attempts),
    d.lastAttemptAt ? minute(d.lastAttemptAt) : "",
    d.lastError || d.lastStatusCode !== null ? html`<span class="err">${d.lastError ?? `HTTP ${d.lastStatusCode}`}</span>` : "",
    d.status === "pending" && d.nextAttemptAt ? minute(d.nextAttemptAt) : "",
  ]);
  const options = ["", "pending", "succeeded", "failed"].map((x) => html`<option value="${x}"${x === status ? html` selected` : ""}>${x || "any"}</option>`);
  const body = html`<h1>Webhook endpoint</h1>
<div class="card"><dl><dt>URL</dt><dd class="mono">${e.url}</dd><dt>ID</dt><dd class="mono">${e.id}</dd><dt>Status</dt><dd>${badge(e.status)}</dd>
<dt>Failing since</dt><dd>${e.failingSince ? html`<span class="error">${minute(e.failingSince)}</span>` : "not failing"}</dd>
<dt>Events</dt><dd class="mono">${e.eventTypes.join(", ") || "every type"}</dd>${e.description ? html`<dt>Description</dt><dd>${e.description}</dd>` : ""}</dl></div>
<form method="get" action="/dashboard/webhooks/${e.id}" class="filters"><div><label for="status">Delivery status</label><select id="status" name="status">${options}</select></div><div><button type="submit">Filter</button></div></form>
${table("Deliveries, newest first", ["Delivery", "Event", "Status", "#Attempts", "Last attempt", "Last error", "Next attempt"], rows, "No deliveries.")}
${pager(`/dashboard/webhooks/${e.id}`, q, offset, PAGE, deliveries.hasMore)}`;
  return { title: "Webhook endpoint", body, current: "/dashboard" };
}
