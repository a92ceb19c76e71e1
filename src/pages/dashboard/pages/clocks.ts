/** GET /dashboard/clocks and GET /dashboard/clocks/{id}[?from=] (with the form that advances it). */
import { html } from "../../html.js";
import { PAGE, type PageContext, type View, notice, offsetOf } from "../common.js";
import { csrfField, minute, pager, table } from "../layout.js";

export async function clocksPage({ services: s, caller: c, open, query: q }: PageContext): Promise<View> {
  if (open.environment.mode !== "test") {
    return { title: "Test clocks", body: html`<h1>Test clocks</h1><p>Test clocks exist only in test environments; this is a live environment.</p>`, current: "/dashboard/clocks" };
  }
  const offset = offsetOf(q);
  const result = await s.clocks.listClocks(c, PAGE, offset);
  const rows = result.items.map((k) => [html`<a class="mono" href="/dashboard/clocks/${k.id}">${k.id}</a>`, k.name, minute(k.frozenTime)]);
  const body = html`<h1>Test clocks</h1>${table("Test clocks, newest first", ["Clock", "Name", "Frozen at"], rows, "No test clocks yet.")}${pager("/dashboard/clocks", q, offset, PAGE, result.hasMore)}`;
  return { title: "Test clocks", body, current: "/dashboard/clocks" };
}

export async function clockPage({ services: s, caller: c, open, params: [id], query: q }: PageContext): Promise<View> {
  const clock = await s.clocks.clock(c, id as string);
  const from = q.get("from");
  const moved =
    from && /^\d{4}-\d\d-\d\dT[\d:.]+Z$/.test(from)
      ? html`<p class="notice" role="status">Advanced from ${minute(new Date(from))} to ${minute(clock.frozenTime)}. Every cycle close, cancellation and timeline transition due by then has run.</p>`
      : notice(q);
  const value = clock.frozenTime.toISOString().slice(0, 16);
  const body = html`<h1>Test clock ${clock.name}</h1>${moved}
<div class="card"><dl><dt>ID</dt><dd class="mono">${clock.id}</dd><dt>Frozen at</dt><dd><strong id="frozen">${minute(clock.frozenTime)}</strong></dd></dl></div>
<form method="post" action="/dashboard/clocks/${clock.id}/advance" class="card">${csrfField(open.session.csrfToken)}
<label for="frozen_time">Advance to (UTC)</label><input id="frozen_time" name="frozen_time" type="datetime-local" value="${value}" min="${value}" required>
<button type="submit">Advance</button><p class="muted">Clocks only move forward. Advancing runs everything due on the subjects of this clock up to the new time.</p></form>`;
  return { title: `Test clock ${clock.name}`, body, current: "/dashboard/clocks" };
}
