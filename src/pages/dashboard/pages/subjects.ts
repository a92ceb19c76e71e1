/** GET /dashboard/subjects[?q=]: the subjects, searched by name, email or external ID. */
import { html } from "../../html.js";
import { PAGE, type PageContext, type View, offsetOf, subjectLink } from "../common.js";
import { day, pager, table } from "../layout.js";

export async function subjectsPage({ services: s, caller: c, query: q }: PageContext): Promise<View> {
  const term = (q.get("q") ?? "").trim();
  const offset = offsetOf(q);
  const result = term ? await s.subjects.search(c, term, PAGE, offset) : await s.subjects.list(c, PAGE, offset);
  const rows = result.items.map((x) => [subjectLink(x.id), x.name ?? "", x.email ?? "", html`<span class="mono">${x.externalId ?? ""}</span>`, day(x.createdAt)]);
  const body = html`<h1>Subjects</h1>
<form method="get" action="/dashboard/subjects" class="filters" role="search"><div><label for="q">Search</label><input id="q" name="q" value="${term}" placeholder="name, email or external ID"></div><div><button type="submit">Search</button></div></form>
${table(term ? `Subjects matching ${term}` : "Subjects, oldest first", ["Subject", "Name", "Email", "External ID", "Created"], rows, term ? "No subject matches." : "No subjects yet.")}
${pager("/dashboard/subjects", q, offset, PAGE, result.hasMore)}`;
  return { title: "Subjects", body, current: "/dashboard/subjects" };
}
