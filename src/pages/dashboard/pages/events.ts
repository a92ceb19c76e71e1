/** GET /dashboard/events[?show=rejected]: the newest stored usage events, or the newest rejected ones with their reasons. */
import { REJECTED_KEPT } from "../../../billing/metering/usage.js";
import { html } from "../../html.js";
import { PAGE, type PageContext, type View, offsetOf, subjectLink } from "../common.js";
import { minute, pager, table } from "../layout.js";

const mono = (text: string) => html`<span class="mono">${text}</span>`;

function tabs(rejected: boolean) {
  return html`<nav aria-label="Which events" class="filters"><a href="/dashboard/events"${rejected ? "" : html` aria-current="page"`}>Accepted</a><a href="/dashboard/events?show=rejected"${rejected ? html` aria-current="page"` : ""}>Rejected</a></nav>`;
}

async function rejectedEvents({ services: s, caller: c, query: q }: PageContext, offset: number): Promise<View> {
  const result = await s.ingest.rejectedEvents(c, PAGE, offset);
  const rows = result.items.map((e) => [
    minute(e.receivedAt),
    mono(e.reason),
    html`<span class="err">${e.message}</span>`,
    mono(e.field ?? ""),
    mono(e.subjectId),
    mono(e.eventName),
    mono(e.idempotencyKey),
    e.timestamp ? mono(e.timestamp) : html`<span class="muted">none</span>`,
  ]);
  const head = ["Received", "Reason", "Message", "Field", "Subject (as sent)", "Name", "Idempotency key", "Timestamp"];
  const body = html`<h1>Usage events</h1>${tabs(true)}${table("Rejected usage events, newest first", head, rows, "No rejected events.")}
${pager("/dashboard/events", q, offset, PAGE, result.hasMore)}
<p class="muted">Events an ingest call refused, with the reason it answered; nothing of them was stored as usage. The fields are as sent, cut to 255 characters; the environment keeps its newest ${REJECTED_KEPT.toLocaleString("en-US")}.</p>`;
  return { title: "Rejected events", body, current: "/dashboard/events" };
}

export async function eventsPage(ctx: PageContext): Promise<View> {
  const { services: s, caller: c, query: q } = ctx;
  const offset = offsetOf(q);
  if (q.get("show") === "rejected") return rejectedEvents(ctx, offset);
  const result = await s.ingest.recentEvents(c, PAGE, offset);
  const rows = result.items.map((e) => {
    const data = JSON.stringify(e.data);
    return [mono(e.id), minute(e.occurredAt), subjectLink(e.subjectId), mono(e.eventName), mono(e.idempotencyKey), mono(data.length > 160 ? `${data.slice(0, 160)}…` : data), minute(e.createdAt)];
  });
  const body = html`<h1>Usage events</h1>${tabs(false)}${table("Stored usage events, newest first", ["Event", "Occurred", "Subject", "Name", "Idempotency key", "Data", "Received"], rows, "No events yet.")}
${pager("/dashboard/events", q, offset, PAGE, result.hasMore)}
<p class="muted">Accepted events. The ones an ingest call refused are under <a href="/dashboard/events?show=rejected">Rejected</a>, with their reasons.</p>`;
  return { title: "Events", body, current: "/dashboard/events" };
}
