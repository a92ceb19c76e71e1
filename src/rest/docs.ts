/**
 * The API reference people read at /docs, and the document machines read at /openapi.json. The
 * page is rendered on the server from the same OpenAPI document (openapi/openapi.json, generated
 * from the contract by scripts/openapi.ts): operations by service, each with its method and path,
 * parameters, request and response fields as tables, its errors and an example curl. It needs no
 * JavaScript and nothing from another site, reads on a phone and prints.
 */
import { readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import type { OpenApiDocument, Operation, Parameter, Schema } from "../openapi/types.js";

type Req = IncomingMessage | Http2ServerRequest;
type Res = ServerResponse | Http2ServerResponse;

/** The committed document (scripts/openapi.ts writes it; CI checks it is current). */
export const OPENAPI_URL = new URL("../../openapi/openapi.json", import.meta.url);

export function loadOpenApi(): OpenApiDocument {
  return JSON.parse(readFileSync(OPENAPI_URL, "utf8")) as OpenApiDocument;
}

function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string);
}

/** Comment text as HTML: paragraphs kept, `code` set as code. */
function prose(text: string | undefined): string {
  if (!text) return "";
  return text
    .split(/\n\s*\n/)
    .map((p) => `<p>${esc(p.replace(/\s*\n\s*/g, " ")).replace(/`([^`]+)`/g, "<code>$1</code>")}</p>`)
    .join("");
}

const refName = (ref: string) => ref.replace("#/components/schemas/", "");
const schemaAnchor = (name: string) => `schema-${name.replace(/[^A-Za-z0-9_-]/g, "-")}`;

/** A schema's type as a short readable phrase, with links to named schemas. */
function typeOf(s: Schema | undefined): string {
  if (!s) return "";
  if (s.$ref) return `<a href="#${schemaAnchor(refName(s.$ref))}">${esc(refName(s.$ref))}</a>`;
  if (s.anyOf) return (s.anyOf as Schema[]).map(typeOf).join(" | ");
  if (s.allOf) return (s.allOf as Schema[]).map(typeOf).join(" & ");
  const types: string[] = Array.isArray(s.type) ? s.type : s.type ? [s.type] : [];
  if (types.length === 0) return "any JSON";
  return types
    .map((t) => {
      if (t === "array") return `array of ${typeOf(s.items) || "any"}`;
      if (t === "object" && s.additionalProperties && typeof s.additionalProperties === "object") return `map of string → ${typeOf(s.additionalProperties)}`;
      if (t === "string" && s.pattern === "^-?[0-9]+(\\.[0-9]+)?$") return "decimal string";
      if (t === "number" && s.pattern === "^-?[0-9]+(\\.[0-9]+)?$") return "number";
      if (t === "string" && s.format === "date-time") return "string (RFC 3339)";
      if (t === "string" && s.enum)
        return `string: ${(s.enum as (string | null)[])
          .filter((v) => v !== null)
          .map((v) => `<code>${esc(String(v))}</code>`)
          .join(", ")}`;
      if ((t === "integer" || t === "number") && s.format) return `${t} (${esc(s.format)})`;
      return esc(t);
    })
    .join(" | ");
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
function fieldsTable(doc: OpenApiDocument, schema: Schema, caption: string): string {
  const s = resolve(doc, schema);
  if (s.type !== "object" || !s.properties) {
    return `<p><strong>${esc(caption)}:</strong> ${typeOf(schema)}</p>${schema.$ref ? "" : prose(s.description)}`;
  }
  const input = s.additionalProperties !== false;
  const rows = Object.entries(s.properties as Record<string, Schema>)
    .map(([name, f]) => `<tr><td><code>${esc(name)}</code></td><td>${typeOf(input ? withoutNull(f) : f)}</td><td>${prose(f.description)}</td></tr>`)
    .join("");
  const via = schema.$ref ? ` (<a href="#${schemaAnchor(refName(schema.$ref))}">${esc(refName(schema.$ref))}</a>)` : "";
  const note = input ? " — any field may be left out or null" : " — every field is always present";
  return `<div class="scroll"><table><caption>${esc(caption)}${via}${note}</caption><thead><tr><th>Field</th><th>Type</th><th>Description</th></tr></thead><tbody>${rows || '<tr><td colspan="3">No fields</td></tr>'}</tbody></table></div>`;
}

/** A small example value for a schema (depth-limited), for the curl examples. */
function example(doc: OpenApiDocument, s: Schema | undefined, depth = 0): unknown {
  if (!s) return null;
  if (s.$ref) return depth > 3 ? {} : example(doc, resolve(doc, s), depth);
  if (s.anyOf)
    return example(
      doc,
      (s.anyOf as Schema[]).find((x) => x.type !== "null"),
      depth,
    );
  const types: string[] = Array.isArray(s.type) ? s.type.filter((t: string) => t !== "null") : s.type ? [s.type] : [];
  const t = types[0];
  if (s.enum) return s.enum.find((v: unknown) => v !== null);
  switch (t) {
    case "string":
      return s.format === "date-time" ? "2026-01-01T00:00:00Z" : s.pattern === "^-?[0-9]+(\\.[0-9]+)?$" ? "10" : "string";
    case "number":
      return s.pattern ? "10" : 1;
    case "integer":
      return 1;
    case "boolean":
      return true;
    case "array":
      return depth > 2 ? [] : [example(doc, s.items, depth + 1)];
    case "object":
      if (s.properties) {
        if (depth > 2) return {};
        return Object.fromEntries(Object.entries(s.properties as Record<string, Schema>).map(([k, v]) => [k, example(doc, v, depth + 1)]));
      }
      if (s.additionalProperties && typeof s.additionalProperties === "object") return { key: example(doc, s.additionalProperties, depth + 1) };
      return {};
    default:
      return null;
  }
}

function curl(doc: OpenApiDocument, method: string, path: string, op: Operation): string {
  const url = path.replace(/\{([a-z_]+)\}/g, (_m, name: string) => `$${name.toUpperCase()}`);
  const query = (op.parameters ?? [])
    .filter((p) => p.in === "query")
    .slice(0, 2)
    .map((p) => `${p.name}=${encodeURIComponent(String(example(doc, p.schema.type === "array" ? p.schema.items : p.schema)))}`)
    .join("&");
  const lines = [`curl -X ${method.toUpperCase()} "$BASE_URL${url}${query ? `?${query}` : ""}"`];
  if (!op.security || op.security.length > 0) lines.push(`  -H "X-API-Key: $API_KEY"`);
  const body = op.requestBody?.content["application/json"].schema;
  if (body) {
    lines.push(`  -H "content-type: application/json"`);
    lines.push(`  -d '${JSON.stringify(example(doc, body)).replace(/'/g, "'\\''")}'`);
  }
  return lines.join(" \\\n");
}

function parametersTable(params: Parameter[]): string {
  if (params.length === 0) return "";
  const rows = params
    .map(
      (p) =>
        `<tr><td><code>${esc(p.name)}</code></td><td>${p.in}${p.required ? ", required" : ""}</td><td>${typeOf(p.schema)}${p.explode ? " (repeat the parameter)" : ""}</td><td>${prose(p.description)}</td></tr>`,
    )
    .join("");
  return `<div class="scroll"><table><caption>Parameters</caption><thead><tr><th>Name</th><th>In</th><th>Type</th><th>Description</th></tr></thead><tbody>${rows}</tbody></table></div>`;
}

function errorsTable(doc: OpenApiDocument, op: Operation): string {
  const rows = Object.entries(op.responses)
    .filter(([status]) => status !== "200")
    .map(([status, r]) => {
      const resp = (r.$ref ? (doc.components.responses[r.$ref.replace("#/components/responses/", "")] ?? {}) : r) as Schema;
      const codes: string[] = resp.content?.["application/json"]?.schema?.properties?.code?.enum ?? [];
      return `<tr><td>${esc(status)}</td><td>${codes.map((c) => `<code>${esc(c)}</code>`).join(" ")}</td><td>${esc(resp.description ?? "")}</td></tr>`;
    })
    .join("");
  return `<div class="scroll"><table><caption>Errors (body: <a href="#${schemaAnchor("Error")}">Error</a>)</caption><thead><tr><th>Status</th><th>code</th><th>When</th></tr></thead><tbody>${rows}</tbody></table></div>`;
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

/** The whole reference page. */
export function renderDocs(doc: OpenApiDocument, baseUrl: string): string {
  const byTag = new Map<string, [string, string, Operation][]>();
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const tag = op.tags[0] ?? "Other";
      byTag.set(tag, [...(byTag.get(tag) ?? []), [method, path, op]]);
    }
  }
  const nav = doc.tags
    .filter((t) => byTag.has(t.name))
    .map(
      (t) =>
        `<li><a href="#tag-${esc(t.name)}">${esc(t.name)}</a><ul>${(byTag.get(t.name) ?? []).map(([m, p, op]) => `<li><a href="#${opAnchor(op)}"><span class="verb">${m.toUpperCase()}</span> <code>${esc(p)}</code></a></li>`).join("")}</ul></li>`,
    )
    .join("");
  const sections = doc.tags
    .filter((t) => byTag.has(t.name))
    .map((t) => {
      const ops = (byTag.get(t.name) ?? [])
        .map(([method, path, op]) => {
          const body = op.requestBody?.content["application/json"].schema;
          const ok = op.responses["200"]?.content?.["application/json"]?.schema as Schema;
          return `<section class="op" id="${opAnchor(op)}">
<h3><span class="verb">${method.toUpperCase()}</span> <code>${esc(path)}</code></h3>
<p class="muted">${esc(op.operationId)} · ${op.security && op.security.length === 0 ? "no API key" : "X-API-Key"} · RPC <code>${esc(op["x-rpc"])}</code></p>
${prose(op.description ?? op.summary)}
${parametersTable(op.parameters ?? [])}
${body ? fieldsTable(doc, body, "Request body (JSON)") : ""}
${fieldsTable(doc, ok, "Response 200 (JSON)")}
${errorsTable(doc, op)}
<pre><code>${esc(curl(doc, method, path, op))}</code></pre>
</section>`;
        })
        .join("\n");
      return `<section id="tag-${esc(t.name)}"><h2>${esc(t.name)}</h2>${prose(t.description)}${ops}</section>`;
    })
    .join("\n");
  const schemas = Object.entries(doc.components.schemas)
    .map(([name, s]) => `<section id="${schemaAnchor(name)}"><h3>${esc(name)}</h3>${prose(s.description)}${s.properties ? fieldsTable(doc, s, `${name} fields`) : `<p>${typeOf(s)}</p>`}</section>`)
    .join("\n");
  const html = `<main>
<h1>${esc(doc.info.title)} <span class="muted">${esc(doc.info.version)}</span></h1>
${prose(doc.info.description)}
<p>Base URL: <code>${esc(baseUrl)}</code>. The machine-readable document: <a href="/openapi.json">/openapi.json</a> (OpenAPI ${esc(doc.openapi)}).
In the examples, set <code>BASE_URL</code>, <code>API_KEY</code> and the path's IDs in your shell first.</p>
<nav aria-label="Operations"><h2>Operations</h2><ul>${nav}<li><a href="#schemas">Schemas</a></li></ul></nav>
${sections}
<section id="schemas"><h2>Schemas</h2>${schemas}</section>
</main>`;
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${esc(doc.info.title)}</title><style>${STYLE}</style></head><body>${html}</body></html>`;
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
