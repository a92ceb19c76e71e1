/**
 * The operator dashboard's shell: a wider page than the hosted pages' (tables of many columns),
 * with the navigation, the environment it acts on and the sign-out form; and the parts its pages
 * share (tables, pager, badges, bar charts). Everything is written with html.ts's template, which
 * escapes what it is given; charts are inline SVG (no script, no external asset).
 */
import type { OpenOperatorSession } from "../../billing/operator-sessions.js";
import type { EnvironmentMode } from "../../billing/tenancy.js";
import { type Html, type Value, html, raw } from "../html.js";
import { type Res, pageHeaders } from "../shell.js";

const STYLE = `*{box-sizing:border-box}body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#111;background:#f6f7f9}
header{background:#17212b;color:#fff;padding:.5rem 1rem;display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:center}
header a{color:#fff}header .badge{color:#111}header .env{font-size:.9rem;opacity:.9}header form{margin:0 0 0 auto}header form.switch{display:inline;margin:0}header select{font-size:.9rem;padding:.15rem .3rem}.sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}header button{margin:0;font-size:.9rem;padding:.25rem .75rem}
nav ul{list-style:none;margin:0;padding:0;display:flex;flex-wrap:wrap;gap:.25rem .9rem}nav a{text-decoration:none}nav a[aria-current=page]{text-decoration:underline;font-weight:600}
main{max-width:72rem;margin:0 auto;padding:1rem}h1{font-size:1.4rem;margin:.5rem 0 1rem}h2{font-size:1.15rem;margin:1.5rem 0 .5rem}
.card{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:.75rem 1rem;margin:0 0 1rem}
.scroll{overflow-x:auto}table{border-collapse:collapse;width:100%;background:#fff}th,td{text-align:left;padding:.4rem .5rem;border-bottom:1px solid #e3e6ea;vertical-align:top}
th{font-size:.85rem;color:#444}td.n,th.n{text-align:right}.mono{font-family:ui-monospace,monospace;font-size:.85rem;overflow-wrap:anywhere}
form.inline{display:inline}label{font-weight:600;display:block;margin:.25rem 0}input,select{font-size:1rem;padding:.35rem .5rem;max-width:100%}
button{font-size:1rem;padding:.4rem .9rem;cursor:pointer}.danger{color:#fff;background:#a40000;border:1px solid #700}
.filters{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:end;margin-bottom:.75rem}.filters div{min-width:10rem}
.error{color:#a00;background:#fee;border:1px solid #a00;padding:.5rem;border-radius:4px}.notice{background:#efe;border:1px solid #070;padding:.5rem;border-radius:4px}
.muted{color:#555;font-size:.9rem}.err{color:#a00}.pager{display:flex;gap:1rem;margin:.75rem 0}.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(15rem,1fr));gap:1rem}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem;margin:0}dt{font-weight:600}dd{margin:0;overflow-wrap:anywhere}
.badge{display:inline-block;padding:0 .4rem;border-radius:3px;background:#e8eaed;font-size:.85rem}.badge.active,.badge.paid{background:#dff3e4}.badge.draft,.badge.paused{background:#fff4d6}.badge.open{background:#e0ecff}.badge.void,.badge.cancelled,.badge.uncollectible{background:#f3e0e0}.badge.archived{background:#ececec;color:#555;font-weight:normal}
table.tiers{width:auto;margin:.15rem 0;background:transparent}table.tiers th,table.tiers td{padding:.1rem .5rem;border-bottom:1px solid #eef0f2}.limit{font-size:.9rem;color:#444}.credit{color:#1f6b35}
svg.chart{width:100%;height:auto;max-height:16rem;background:#fff}svg.chart text{font-size:11px;fill:#333}svg.chart rect.bar{fill:#3b6ea8}
.signin{max-width:26rem;margin:4rem auto}.signin input{width:100%}
@media (max-width:40rem){main{padding:.5rem}th,td{padding:.3rem .4rem;white-space:nowrap}.scroll .mono{overflow-wrap:normal}header form{margin:0}}`;

export const NAV: [string, string][] = [
  ["/dashboard", "Overview"],
  ["/dashboard/subjects", "Subjects"],
  ["/dashboard/subscriptions", "Subscriptions"],
  ["/dashboard/invoices", "Invoices"],
  ["/dashboard/events", "Events"],
  ["/dashboard/catalog", "Catalog"],
  ["/dashboard/clocks", "Test clocks"],
];

/** The hidden CSRF field every form of a session carries. */
export const csrfField = (token: string) => html`<input type="hidden" name="csrf" value="${token}">`;

/** A signed-in page's session, with the environments the browser is signed in to (the switcher's, the active one first). */
export type DashSession = OpenOperatorSession & { environments?: { id: string; name: string; mode: EnvironmentMode }[] };

/** The environment switcher: a form posting the chosen environment (with the session's CSRF token). */
function switcherHtml(open: DashSession): Html {
  const envs = open.environments ?? [];
  const add = html`<a href="/dashboard/sign-in">add an environment</a>`;
  if (envs.length < 2) return add;
  const options = envs.map((e) => html`<option value="${e.id}"${e.id === open.environment.id ? html` selected` : ""}>${e.name} (${e.mode})</option>`);
  return html`<form method="post" action="/dashboard/switch" class="switch">${csrfField(open.session.csrfToken)}<label for="environment_id" class="sr">Switch environment</label><select id="environment_id" name="environment_id">${options}</select><button type="submit">Switch</button></form> ${add}`;
}

function headerHtml(open: DashSession, current: string): Html {
  const links = NAV.map(([href, label]) => html`<li><a href="${href}"${href === current ? html` aria-current="page"` : ""}>${label}</a></li>`);
  return html`<header><strong>Billing</strong><span class="env" aria-label="Environment">Environment: ${open.environment.name} <span class="badge">${open.environment.mode}</span> · key ${open.keyPrefix}… · ${switcherHtml(open)}</span>
<nav aria-label="Dashboard"><ul>${links}</ul></nav>
<form method="post" action="/dashboard/sign-out">${csrfField(open.session.csrfToken)}<button type="submit">Sign out</button></form></header>`;
}

/** Writes a dashboard page (signed in: the header with navigation; else none). */
export function dashPage(res: Res, status: number, title: string, body: Html, open?: DashSession, current = "", headers: Record<string, string | string[]> = {}): void {
  const doc = html`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${title} · Billing dashboard</title><style>${raw(STYLE)}</style></head><body>${open ? headerHtml(open, current) : ""}<main>${body}</main></body></html>`;
  // The hosted pages' headers (shell.ts pageHeaders): the same Content-Security-Policy, nosniff, no framing.
  res.writeHead(status, { ...pageHeaders(), ...headers });
  res.end(doc.text);
}

export const day = (d: Date) => d.toISOString().slice(0, 10);
export const minute = (d: Date) => `${d.toISOString().slice(0, 16).replace("T", " ")} UTC`;
export const badge = (status: string) => html`<span class="badge ${status}">${status}</span>`;

/**
 * A table inside a horizontal scroller (phones), with a caption for screen readers. A heading
 * that starts with # is a number column (right-aligned). Cells are escaped unless they are Html.
 */
export function table(caption: string, head: string[], rows: Value[][], empty: string): Html {
  if (rows.length === 0) return html`<p class="muted">${empty}</p>`;
  const th = head.map((h) => (h.startsWith("#") ? html`<th class="n" scope="col">${h.slice(1)}</th>` : html`<th scope="col">${h}</th>`));
  const body = rows.map((r) => html`<tr>${r.map((c, i) => (head[i]?.startsWith("#") ? html`<td class="n">${c}</td>` : html`<td>${c}</td>`))}</tr>`);
  return html`<div class="scroll"><table><caption class="muted" style="text-align:left">${caption}</caption><thead><tr>${th}</tr></thead><tbody>${body}</tbody></table></div>`;
}

/** Previous/next links of a list (offset paging, the API's limit/offset). */
export function pager(base: string, params: URLSearchParams, offset: number, limit: number, hasMore: boolean): Html | "" {
  const link = (o: number, label: string, rel: string) => {
    const p = new URLSearchParams(params);
    if (o > 0) p.set("offset", String(o));
    else p.delete("offset");
    const q = p.toString();
    return html`<a rel="${rel}" href="${base + (q ? `?${q}` : "")}">${label}</a>`;
  };
  const prev = offset > 0 ? link(Math.max(0, offset - limit), "← Previous", "prev") : "";
  const next = hasMore ? link(offset + limit, "Next →", "next") : "";
  return prev || next ? html`<p class="pager">${prev}${next}</p>` : "";
}

/**
 * A bar chart as inline SVG: one bar per bucket, labelled for assistive technology (role img, a
 * title naming what it shows and its largest value); the same numbers follow in a table.
 */
export function barChart(label: string, bars: { label: string; value: number; tick?: string | null }[]): Html {
  const width = 640;
  const height = 180;
  const top = 16;
  const bottom = 28;
  const max = Math.max(0, ...bars.map((b) => b.value));
  const n = Math.max(1, bars.length);
  const step = width / n;
  const barW = Math.max(1, step * 0.8);
  const every = Math.max(1, Math.ceil(n / 8));
  const rects = bars.map((b, i) => {
    const h = max > 0 ? ((height - top - bottom) * b.value) / max : 0;
    const x = i * step + (step - barW) / 2;
    const y = height - bottom - h;
    // A bar's own tick label (null: none), else every few bars' label.
    const text = b.tick !== undefined ? b.tick : i % every === 0 ? b.label : null;
    const tick = text !== null ? html`<text x="${(x + barW / 2).toFixed(1)}" y="${height - 10}" text-anchor="middle">${text}</text>` : "";
    return html`<rect class="bar" x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${barW.toFixed(1)}" height="${h.toFixed(1)}"><title>${b.label}: ${String(b.value)}</title></rect>${tick}`;
  });
  const summary = `${label}: ${bars.length} buckets, largest ${max}`;
  return html`<svg class="chart" viewBox="0 0 ${width} ${height}" role="img" aria-label="${summary}" preserveAspectRatio="xMidYMid meet"><title>${summary}</title>
<line x1="0" y1="${height - bottom}" x2="${width}" y2="${height - bottom}" stroke="#999"/><text x="2" y="11">${String(max)}</text>${rects}</svg>`;
}
