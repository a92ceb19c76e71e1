/**
 * Takes from Stripe's published OpenAPI document (github.com/stripe/openapi, `openapi/spec3.json`
 * or `.yaml`) only what the fake Stripe serves: each operation's request schema (the form body of
 * a POST, the query parameters of a GET) and its answers' schemas, with the component schemas
 * they reference, recursively; descriptions dropped. Writes test/stripe/openapi-subset.json, which
 * the fake validates every request and answer against (test/stripe/schema-check.ts).
 *
 *   npx tsx test/stripe/extract-schemas.ts SPEC_FILE "stripe/openapi@<commit> openapi/spec3.yaml (<date>)"
 *   npx biome format --write test/stripe/openapi-subset.json
 *
 * The committed subset came from stripe/openapi commit 63a674638635c68de26b9f3add13e58198f4df44
 * (2023-09-12, API version 2023-08-16): the newest `spec3` of that repository whose file is under
 * the 4 MiB the offline mirror keeps (later ones are larger and absent from it).
 * With a clone of github.com/stripe/openapi:
 *   git -C openapi show 63a674638635c68de26b9f3add13e58198f4df44:openapi/spec3.yaml > /tmp/spec3.yaml
 * A newer spec3.json/.yaml works the same (name its commit as the source).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";

/** The operations the fake Stripe serves, "METHOD path" as in Stripe's document. */
export const OPERATIONS = [
  "POST /v1/customers",
  "GET /v1/customers",
  "GET /v1/customers/{customer}",
  "POST /v1/customers/{customer}",
  "GET /v1/customers/{customer}/payment_methods",
  "POST /v1/checkout/sessions",
  "GET /v1/checkout/sessions",
  "GET /v1/checkout/sessions/{session}",
  "POST /v1/checkout/sessions/{session}/expire",
  "GET /v1/setup_intents/{intent}",
  "GET /v1/payment_methods/{payment_method}",
  "POST /v1/payment_methods/{payment_method}/attach",
  "POST /v1/payment_methods/{payment_method}/detach",
  "POST /v1/payment_intents",
  "GET /v1/payment_intents",
  "GET /v1/payment_intents/{intent}",
  "POST /v1/payment_intents/{intent}/cancel",
  "GET /v1/refunds",
  "POST /v1/refunds",
] as const;

/** Components the answers and webhook events need besides those the operations reference. */
const EXTRA = ["event", "error"];

/**
 * The API objects the fake serves. An expandable field (`anyOf: [id string, $ref]`) that refers to
 * any other object (a charge, an invoice, an account …) keeps its id form and an open object in
 * place of the $ref: the fake never expands those, and the subset stays small.
 */
const SERVED = new Set(["customer", "checkout.session", "setup_intent", "payment_method", "payment_intent", "refund", "event", "error", "api_errors"]);

// biome-ignore lint/suspicious/noExplicitAny: the OpenAPI document is JSON
type J = any;

const DROP = new Set([
  "description",
  "x-expandableFields",
  "x-resourceId",
  "x-stripeResource",
  "x-stripeOperations",
  "x-stripeBypassValidation",
  "title",
  "x-stripeMostCommon",
  "x-expansionResources",
]);

function strip(v: J, names = false): J {
  if (Array.isArray(v)) return v.map((x) => strip(x));
  if (v && typeof v === "object" && Array.isArray(v.anyOf) && v.anyOf.some((a: J) => a.type === "string")) {
    const anyOf = v.anyOf.map((a: J) => {
      const name = typeof a.$ref === "string" ? a.$ref.replace("#/components/schemas/", "") : undefined;
      return name && !SERVED.has(name) ? { type: "object", "x-not-extracted": name } : a;
    });
    v = { ...v, anyOf };
  }
  if (!v || typeof v !== "object") return v;
  // Under `properties` the keys are field names (`description` is one): kept, their schemas stripped.
  if (names) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, strip(x)]));
  return Object.fromEntries(
    Object.entries(v)
      .filter(([k]) => !DROP.has(k))
      .map(([k, x]) => [k, strip(x, k === "properties")]),
  );
}

function refs(v: J, out: Set<string>) {
  if (Array.isArray(v)) for (const x of v) refs(x, out);
  else if (v && typeof v === "object") {
    if (typeof v.$ref === "string") out.add(v.$ref.replace("#/components/schemas/", ""));
    for (const x of Object.values(v)) refs(x, out);
  }
}

export function extract(spec: J, source: string): J {
  const operations: Record<string, J> = {};
  for (const op of OPERATIONS) {
    const [method, path] = op.split(" ") as [string, string];
    const o = spec.paths[path]?.[method.toLowerCase()];
    if (!o) throw new Error(`${op} is not in the document`);
    let request: J;
    if (method === "POST") request = o.requestBody?.content?.["application/x-www-form-urlencoded"]?.schema ?? { type: "object", additionalProperties: false, properties: {} };
    else {
      const query = (o.parameters ?? []).filter((p: J) => p.in === "query");
      request = {
        type: "object",
        additionalProperties: false,
        properties: Object.fromEntries(query.map((p: J) => [p.name, p.schema])),
        required: query.filter((p: J) => p.required).map((p: J) => p.name),
      };
    }
    const responses = Object.fromEntries(Object.entries(o.responses).map(([status, r]: [string, J]) => [status, r.content?.["application/json"]?.schema]));
    operations[op] = strip({ request, responses });
  }
  const need = new Set<string>(EXTRA);
  refs(operations, need);
  const schemas: Record<string, J> = {};
  const queue = [...need];
  while (queue.length > 0) {
    const name = queue.pop() as string;
    if (schemas[name]) continue;
    const s = spec.components.schemas[name];
    if (!s) throw new Error(`component ${name} is not in the document`);
    schemas[name] = strip(s);
    const more = new Set<string>();
    refs(schemas[name], more);
    for (const m of more) if (!schemas[m]) queue.push(m);
  }
  const sorted = Object.fromEntries(Object.entries(schemas).sort(([a], [b]) => a.localeCompare(b)));
  return {
    info: {
      about: "Extracted by test/stripe/extract-schemas.ts: only what the fake Stripe (test/stripe/fake-stripe.ts) serves. Do not edit by hand.",
      source,
      openapi: spec.openapi,
      api_version: spec.info?.version,
    },
    operations,
    components: { schemas: sorted },
  };
}

function main() {
  const [file, source] = process.argv.slice(2);
  if (!file || !source) throw new Error('usage: tsx test/stripe/extract-schemas.ts SPEC_FILE "stripe/openapi@<commit> <path> (<date>)"');
  const text = readFileSync(file, "utf8");
  const yaml = createRequire(import.meta.url)("js-yaml") as { load(s: string): unknown };
  const spec = file.endsWith(".json") ? JSON.parse(text) : yaml.load(text);
  const subset = extract(spec, source);
  const out = new URL("./openapi-subset.json", import.meta.url);
  writeFileSync(out, `${JSON.stringify(subset, null, 1)}\n`);
  console.log(`${Object.keys(subset.operations).length} operations, ${Object.keys(subset.components.schemas).length} schemas → ${out.pathname}`);
}

if (process.argv[1] && import.meta.url === new URL(process.argv[1], "file://").href) main();
