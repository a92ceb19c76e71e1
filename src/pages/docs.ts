/**
 * The API reference people read at /docs, and the document machines read at /openapi.json. The
 * page is rendered on the server from the same OpenAPI document (openapi/openapi.json, generated
 * from the contract by scripts/openapi.ts): operations by service, each with its method and path,
 * parameters, request and response fields as tables, its errors and an example curl. It needs no
 * JavaScript and nothing from another site, reads on a phone and prints.
 */
import { readFileSync } from "node:fs";
import type { OpenApiDocument, Operation, Parameter, Schema } from "../openapi/types.js";
import { curl } from "./docs-curl.js";
import { type Html, esc, html, join, raw } from "./html.js";
import type { Req, Res } from "./shell.js";

/** The committed document (scripts/openapi.ts writes it; CI checks it is current). */
export const OPENAPI_URL = new URL("../../openapi/openapi.json", import.meta.url);

export function loadOpenApi(): OpenApiDocument {
  return JSON.parse(readFileSync(OPENAPI_URL, "utf8")) as OpenApiDocument;
}

/** Comment text as HTML: paragraphs kept, `code` set as code. */
function prose(text: string | undefined): Html {
  if (!text) return html``;
  return join(text.split(/\n\s*\n/).map((p) => html`<p>${raw(esc(p.replace(/\s*\n\s*/g, " ")).replace(/`([^`]+)`/g, "<code>$1</code>"))}</p>`));
}

const refName = (ref: string) => ref.replace("#/components/schemas/", "");
const schemaAnchor = (name: string) => `schema-${name.replace(/[^A-Za-z0-9_-]/g, "-")}`;
const schemaLink = (ref: string) => html`<a href="#${schemaAnchor(refName(ref))}">${refName(ref)}</a>`;

/** One JSON type of a schema as a short readable phrase. */
function typeName(s: Schema, t: string): Html | string {
  if (t === "array") {
    const item = typeOf(s.items);
    return html`array of ${item.text ? item : "any"}`;
  }
  if (t === "object" && s.additionalProperties && typeof s.additionalProperties === "object") return html`map of string → ${typeOf(s.additionalProperties)}`;
  if (t === "string" && s.pattern === "^-?[0-9]+(\\.[0-9]+)?$") return "decimal string";
  if (t === "number" && s.pattern === "^-?[0-9]+(\\.[0-9]+)?$") return "number";
  if (t === "string" && s.format === "date-time") return "string (RFC 3339)";
  if (t === "string" && s.enum)
    return html`string: ${join(
      (s.enum as (string | null)[]).filter((v) => v !== null).map((v) => html`<code>${String(v)}</code>`),
      ", ",
    )}`;
  if ((t === "integer" || t === "number") && s.format) return `${t} (${s.format})`;
  return t;
}

/** A schema's type as a short readable phrase, with links to named schemas. */
function typeOf(s: Schema | undefined): Html {
  if (!s) return html``;
  if (s.$ref) return schemaLink(s.$ref);
  if (s.anyOf) return join((s.anyOf as Schema[]).map(typeOf), " | ");
  if (s.allOf) return join((s.allOf as Schema[]).map(typeOf), raw(" & "));
  const types: string[] = Array.isArray(s.type) ? s.type : s.type ? [s.type] : [];
  if (types.length === 0) return html`any JSON`;
  return join(
    types.map((t) => typeName(s, t)),
    " | ",
  );
}

function resolve(doc: OpenApiDocument, s: Schema): Schema {
  return s.$ref ? (doc.components.schemas[refName(s.$ref)] ?? {}) : s;
}

/** A schema without its `null` alternative (for input fields, where null is the same as left out). */
function withoutNull(s: Schema): Schema {
  if (s.anyOf) {
    const rest = (s.anyOf as Schema[]).filter((x) => x.type !== "null");
    return rest.length === 1 ? { ...rest[0], description: s.description } : { ...s, anyOf: rest };
  }
  if (Array.isArray(s.type)) {
    const types = s.type.filter((t: string) => t !== "null");
    return { ...s, type: types.length === 1 ? types[0] : types };
  }
  return s;
}

/**
 * An object schema's fields as a table. A schema the server writes (additionalProperties false)
 * always has every field, null where the type says so; one it reads takes any field left out or null.
 */
function fieldsTable(doc: OpenApiDocument, schema: Schema, caption: string): Html {
  const s = resolve(doc, schema);
  if (s.type !== "object" || !s.properties) {
    return html`<p><strong>${caption}:</strong> ${typeOf(schema)}</p>${schema.$ref ? "" : prose(s.description)}`;
  }
  const input = s.additionalProperties !== false;
  const rows = Object.entries(s.properties as Record<string, Schema>).map(
    ([name, f]) => html`<tr><td><code>${name}</code></td><td>${typeOf(input ? withoutNull(f) : f)}</td><td>${prose(f.description)}</td></tr>`,
  );
  const via = schema.$ref ? html` (${schemaLink(schema.$ref)})` : "";
  const note = input ? " — any field may be left out or null" : " — every field is always present";
  return html`<div class="scroll"><table><caption>${caption}${via}${note}</caption><thead><tr><th>Field</th><th>Type</th><th>Description</th></tr></thead><tbody>${rows.length > 0 ? rows : html`<tr><td colspan="3">No fields</td></tr>`}</tbody></table></div>`;
}

function parametersTable(params: Parameter[]): Html | "" {
  if (params.length === 0) return "";
  const rows = params.map(
    (p) =>
      html`<tr><td><code>${p.name}</code></td><td>${p.in}${p.required ? ", required" : ""}</td><td>${typeOf(p.schema)}${p.explode ? " (repeat the parameter)" : ""}</td><td>${prose(p.description)}</td></tr>`,
  );
  return html`<div class="scroll"><table><caption>Parameters</caption><thead><tr><th>Name</th><th>In</th><th>Type</th><th>Description</th></tr></thead><tbody>${rows}</tbody></table></div>`;
}

function errorsTable(doc: OpenApiDocument, op: Operation): Html {
  const rows = Object.entries(op.responses)
    .filter(([status]) => status !== "200")
    .map(([status, r]) => {
      const resp = (r.$ref ? (doc.components.responses[r.$ref.replace("#/components/responses/", "")] ?? {}) : r) as Schema;
      const codes: string[] = resp.content?.["application/json"]?.schema?.properties?.code?.enum ?? [];
      return html`<tr><td>${status}</td><td>${join(
        codes.map((c) => html`<code>${c}</code>`),
        " ",
      )}</td><td>${resp.description ?? ""}</td></tr>`;
    });
  // A callback's own answers (rest-only.ts REST_ONLY_CALLBACKS) are not the API's Error.
  const own = Object.entries(op.responses).some(([status, r]) => status !== "200" && !r.$ref);
  const bodyOf = own ? html`<code>{"error": "…"}</code>` : html`<a href="#${schemaAnchor("Error")}">Error</a>`;
  return html`<div class="scroll"><table><caption>Errors (body: ${bodyOf})</caption><thead><tr><th>Status</th><th>code</th><th>When</th></tr></thead><tbody>${rows}</tbody></table></div>`;
}

const opAnchor = (op: Operation) => `op-${op.operationId}`;

const STYLE = `body{font:16px/1.5 system-ui,sans-serif;max-width:60rem;margin:1rem auto;padding:0 1rem;color:#111}
h1{font-size:1.6rem}h2{font-size:1.35rem;border-bottom:2px solid #111;margin-top:2.5rem}h3{font-size:1.1rem;margin-top:2rem;word-break:break-all}
code,pre{font-family:ui-monospace,monospace;font-size:.9em}p,li,h3{overflow-wrap:anywhere}td{overflow-wrap:break-word}pre{background:#f4f4f4;padding:.6rem;overflow-x:auto;white-space:pre}
.scroll{overflow-x:auto;margin:.5rem 0}table{border-collapse:collapse;width:100%;font-size:.95rem}caption{text-align:left;font-weight:600;padding:.3rem 0;overflow-wrap:anywhere}
th,td{text-align:left;vertical-align:top;padding:.3rem .4rem;border-bottom:1px solid #ddd}td p{margin:0 0 .3rem}
.verb{display:inline-block;min-width:4.4rem;font-weight:700;font-family:ui-monospace,monospace}.muted{color:#555}
nav ul{padding-left:1.2rem}nav li{margin:.15rem 0}section.op{border-top:1px solid #ccc}
@media (max-width:40rem){body{font-size:15px}table,tbody,tr,td,caption{display:block;width:auto}thead{display:none}tr{border-bottom:1px solid #ddd;padding:.3rem 0}td{border:0;padding:.1rem 0;overflow-wrap:anywhere}td:first-child{font-weight:600}}
@media print{nav,.noprint{display:none}body{max-width:none;margin:0}section.op{break-inside:avoid-page}a{color:inherit;text-decoration:none}pre{white-space:pre-wrap}}`;

type Entry = [method: string, path: string, op: Operation];

/** One operation: its method and path, how it is called, its fields, errors and a curl. */
function operationHtml(doc: OpenApiDocument, [method, path, op]: Entry): Html {
  const body = op.requestBody?.content["application/json"].schema;
  const ok = op.responses["200"]?.content?.["application/json"]?.schema as Schema;
  return html`<section class="op" id="${opAnchor(op)}">
<h3><span class="verb">${method.toUpperCase()}</span> <code>${path}</code></h3>
<p class="muted">${op.operationId} · ${op.security && op.security.length === 0 ? "no API key" : "X-API-Key"} · ${op["x-rpc"] ? html`RPC <code>${op["x-rpc"]}</code>` : "REST only"}${op["x-called-by"] ? ` · called by ${op["x-called-by"]}` : ""}</p>
${prose(op.description ?? op.summary)}
${parametersTable(op.parameters ?? [])}
${body ? fieldsTable(doc, body, "Request body (JSON)") : ""}
${ok ? fieldsTable(doc, ok, "Response 200 (JSON)") : html`<p>Response 200: <code>${Object.keys(op.responses["200"]?.content ?? {}).join(", ")}</code>: ${op.responses["200"]?.description ?? ""}</p>`}
${errorsTable(doc, op)}
<pre><code>${curl(doc, method, path, op)}</code></pre>
</section>`;
}

/** The whole reference page. */
export function renderDocs(doc: OpenApiDocument, baseUrl: string): string {
  const byTag = new Map<string, Entry[]>();
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const tag = op.tags[0] ?? "Other";
      byTag.set(tag, [...(byTag.get(tag) ?? []), [method, path, op]]);
    }
  }
  const tags = doc.tags.filter((t) => byTag.has(t.name));
  const nav = tags.map(
    (t) =>
      html`<li><a href="#tag-${t.name}">${t.name}</a><ul>${(byTag.get(t.name) ?? []).map(([m, p, op]) => html`<li><a href="#${opAnchor(op)}"><span class="verb">${m.toUpperCase()}</span> <code>${p}</code></a></li>`)}</ul></li>`,
  );
  const sections = tags.map(
    (t) =>
      html`<section id="tag-${t.name}"><h2>${t.name}</h2>${prose(t.description)}${join(
        (byTag.get(t.name) ?? []).map((e) => operationHtml(doc, e)),
        "\n",
      )}</section>`,
  );
  const schemas = Object.entries(doc.components.schemas).map(
    ([name, s]) => html`<section id="${schemaAnchor(name)}"><h3>${name}</h3>${prose(s.description)}${s.properties ? fieldsTable(doc, s, `${name} fields`) : html`<p>${typeOf(s)}</p>`}</section>`,
  );
  const main = html`<main>
<h1>${doc.info.title} <span class="muted">${doc.info.version}</span></h1>
${prose(doc.info.description)}
<p>Base URL: <code>${baseUrl}</code>. The machine-readable document: <a href="/openapi.json">/openapi.json</a> (OpenAPI ${doc.openapi}).
In the examples, set <code>BASE_URL</code>, <code>API_KEY</code> and the path's IDs in your shell first.</p>
<nav aria-label="Operations"><h2>Operations</h2><ul>${nav}<li><a href="#schemas">Schemas</a></li></ul></nav>
${join(sections, "\n")}
<section id="schemas"><h2>Schemas</h2>${join(schemas, "\n")}</section>
</main>`;
  return html`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${doc.info.title}</title><style>${raw(STYLE)}</style></head><body>${main}</body></html>`
    .text;
}

/**
 * GET /openapi.json and GET /docs (no API key). The page is rendered once, on first request, for
 * the server's public base URL. Returns whether the request was one of them.
 */
export function createApiDocs(doc: OpenApiDocument, baseUrl: () => string) {
  const json = JSON.stringify(doc);
  let page: string | undefined;
  return (req: Req, res: Res): boolean => {
    const path = (req.url ?? "/").split("?", 1)[0];
    if (path !== "/openapi.json" && path !== "/docs") return false;
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { allow: "GET, HEAD", "content-type": "text/plain; charset=utf-8" });
      res.end("method not allowed\n");
      return true;
    }
    const [type, text] = path === "/docs" ? ["text/html; charset=utf-8", (page ??= renderDocs(doc, baseUrl()))] : ["application/json", json];
    res.writeHead(200, { "content-type": type, "content-length": Buffer.byteLength(text), "cache-control": "no-cache" });
    if (req.method === "HEAD") res.end();
    else res.end(text);
    return true;
  };
}
