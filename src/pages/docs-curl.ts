/** The /docs page's example curl of an operation, with a small example body built from its schema. */
import type { OpenApiDocument, Operation, Schema } from "../openapi/types.js";

const refName = (ref: string) => ref.replace("#/components/schemas/", "");

function resolve(doc: OpenApiDocument, s: Schema): Schema {
  return s.$ref ? (doc.components.schemas[refName(s.$ref)] ?? {}) : s;
}

/** A small example value for a schema (depth-limited), for the curl examples. */
export function example(doc: OpenApiDocument, s: Schema | undefined, depth = 0): unknown {
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

/** The curl of an operation: its path's IDs and the key as shell variables, a JSON body when it takes one. */
export function curl(doc: OpenApiDocument, method: string, path: string, op: Operation): string {
  const url = path.replace(/\{([a-z_]+)\}/g, (_m, name: string) => `$${name.toUpperCase()}`);
  const query = (op.parameters ?? [])
    .filter((p) => p.in === "query")
    .slice(0, 2)
    .map((p) => `${p.name}=${encodeURIComponent(String(example(doc, p.schema.type === "array" ? p.schema.items : p.schema)))}`)
    .join("&");
  const lines = [`curl -X ${method.toUpperCase()} "$BASE_URL${url}${query ? `?${query}` : ""}"`];
  if (!op.security || op.security.length > 0) lines.push(`  -H "X-API-Key: $API_KEY"`);
  // A header that authenticates the caller instead (Stripe-Signature): a shell variable too.
  for (const p of (op.parameters ?? []).filter((q) => q.in === "header")) lines.push(`  -H "${p.name}: $${p.name.toUpperCase().replace(/-/g, "_")}"`);
  const body = op.requestBody?.content["application/json"].schema;
  if (body) {
    lines.push(`  -H "content-type: application/json"`);
    lines.push(`  -d '${JSON.stringify(example(doc, body)).replace(/'/g, "'\\''")}'`);
  }
  // A REST-only answer that is a file (a PDF): saved, not printed.
  if (op.responses["200"]?.content?.["application/pdf"]) lines.push(`  -o ${op.operationId.replace(/^Get|Pdf$/g, "").toLowerCase()}.pdf`);
  return lines.join(" \\\n");
}
