/**
 * The OpenAPI document (openapi/openapi.json) against the route table the bridge serves: every
 * route has its operation and every operation is a route; the committed file is what the
 * generator makes from the contract now; the server serves it at /openapi.json and renders /docs,
 * both without a key.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import test from "ava";
import { loadOpenApi } from "../../src/pages/docs.js";
import { buildRoutes } from "../../src/rest/gateway.js";
import { buildOpenApi } from "../../src/openapi/build.js";
import { REST_ONLY, REST_ONLY_CALLBACKS } from "../../src/openapi/rest-only.js";
import type { Schema } from "../../src/openapi/types.js";
import { restServices } from "../../src/rpc/routes.js";
import { pdfRoutes } from "../../src/pages/pdf/routes.js";
import type { Invoices } from "../../src/billing/subscriptions/invoices.js";
import { startTestServer } from "../helpers/server.js";

const doc = loadOpenApi();
const routes = buildRoutes(restServices);

test("every route of the bridge has its operation in the document, calling the same RPC", (t) => {
  for (const r of routes) {
    const op = doc.paths[r.template]?.[r.httpMethod.toLowerCase()];
    t.truthy(op, `${r.httpMethod} ${r.template}`);
    t.is(op?.["x-rpc"], `/${r.method.parent.typeName}/${r.method.name}`);
  }
  const documented = Object.entries(doc.paths).flatMap(([p, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${p}`));
  const restOnly = [...REST_ONLY.map((o) => `GET ${o.template}`), ...REST_ONLY_CALLBACKS.map((o) => `POST ${o.template}`)];
  t.deepEqual(documented.sort(), [...routes.map((r) => `${r.httpMethod} ${r.template}`), ...restOnly].sort(), "and the document has no other operation than the REST-only ones");
});

test("the REST-only operations are the raw routes the gateway serves (the PDFs), each a GET with a file answer and no RPC", (t) => {
  // pdfRoutes only keeps its arguments for its answers: its table needs none of them.
  const served = pdfRoutes({} as Invoices, { creditNote: () => Promise.reject(new Error("unused")) });
  t.deepEqual(
    REST_ONLY.map((o) => [o.template, o.admittedAs.name]),
    served.map((r) => [r.template, r.method.name]),
  );
  for (const o of REST_ONLY) {
    const op = doc.paths[o.template]?.get;
    t.truthy(op, o.template);
    t.is(op?.["x-rpc"], undefined);
    t.true(op?.["x-rest-only"]);
    t.deepEqual(op?.responses["200"].content, { "application/pdf": { schema: { type: "string", format: "binary" } } });
    t.deepEqual(op?.security, undefined, "the document's X-API-Key");
    t.deepEqual(
      op?.parameters?.map((p) => [p.name, p.in, p.required, p.schema.enum ?? p.schema.type]),
      [
        [o.param.name, "path", true, "string"],
        ["paper", "query", false, ["a4", "letter"]],
      ],
    );
    for (const s of ["400", "401", "404"]) t.truthy(op?.responses[s]?.$ref, `${o.template} ${s}`);
  }
});

test("Stripe's webhook endpoint is documented as a keyless POST called by Stripe, signed by its header, with the route's own answers", (t) => {
  const op = doc.paths["/providers/stripe/webhooks/{environment_id}"]?.post;
  t.truthy(op);
  t.deepEqual(op?.security, [], "no API key");
  t.is(op?.["x-rpc"], undefined);
  t.true(op?.["x-rest-only"]);
  t.is(op?.["x-called-by"], "Stripe");
  t.deepEqual(
    op?.parameters?.map((p) => [p.name, p.in, p.required]),
    [
      ["environment_id", "path", true],
      ["Stripe-Signature", "header", true],
    ],
  );
  t.is(op?.requestBody?.content["application/json"].schema.type, "object");
  t.deepEqual(Object.keys(op?.responses ?? {}).sort(), ["200", "400", "413", "500"]);
  t.deepEqual(op?.responses["200"].content["application/json"].schema.required, ["received"]);
  t.deepEqual(op?.responses["400"].content["application/json"].schema.required, ["error"]);
});

test("operation ids are unique and every $ref resolves", (t) => {
  const ids = Object.values(doc.paths).flatMap((item) => Object.values(item).map((op) => op.operationId));
  t.is(new Set(ids).size, ids.length);
  const refs: string[] = [];
  const walk = (v: unknown) => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        if (k === "$ref" && typeof x === "string") refs.push(x);
        else walk(x);
      }
    }
  };
  walk(doc);
  t.true(refs.length > 50);
  for (const ref of new Set(refs)) {
    const target = ref
      .replace(/^#\//, "")
      .split("/")
      .reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k.replace(/~1/g, "/").replace(/~0/g, "~")], doc);
    t.truthy(target, ref);
  }
});

test("the committed document is what the generator makes from the contract (what comments add aside)", (t) => {
  const strip = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(strip);
    if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).flatMap(([k, x]) => (k === "description" ? [] : [[k, strip(x)]])));
    return v;
  };
  const fresh = buildOpenApi(restServices, { version: doc.info.version });
  // Summaries and some error statuses (`NOT_FOUND (404)`) come from the comments, which only the
  // script reads (from buf's image); the --check test below compares the whole file.
  const committed = structuredClone(doc);
  for (const d of [fresh, committed]) {
    for (const item of Object.values(d.paths)) {
      for (const op of Object.values(item)) {
        op.summary = "";
        op.responses = { "200": op.responses["200"] as Schema };
      }
    }
    d.components.responses = {};
  }
  t.deepEqual(strip(committed), strip(fresh), "run npm run generate and commit openapi/openapi.json");
});

test("scripts/openapi.ts --check passes on the committed file (comments included)", async (t) => {
  const r = await promisify(execFile)(process.execPath, ["--import", "tsx", "scripts/openapi.ts", "--check"]).catch((e) => e as { code: number; stderr: string });
  t.falsy((r as { code?: number }).code, (r as { stderr?: string }).stderr);
});

test("the wire conventions in the schemas: decimals as strings, optional fields nullable, Timestamps date-time, response_body unwrapped", (t) => {
  const s = doc.components.schemas;
  t.deepEqual(s.Amount?.properties.value.type, "string");
  t.is(s.Amount?.properties.value.pattern, "^-?[0-9]+(\\.[0-9]+)?$");
  t.deepEqual(s.AmountInput?.properties.value.type, ["string", "number", "null"]);
  t.deepEqual(s.Price?.properties.package_units.type, ["number", "null"], "proto3 optional: nullable");
  t.deepEqual(s.Price?.required, ["price_type", "amount", "package_units", "rounding_behavior", "tiers_mode", "tiers", "percent", "fixed_amount_per_event"], "every field always present");
  t.deepEqual(s.Subject?.properties.created_at, { type: "string", format: "date-time", description: "When the subject was created (RFC 3339, UTC)." }, "(billing.v1.always_set): never null");
  t.deepEqual(s.Invoice?.properties.finalized_at.type, ["string", "null"], "a Timestamp not always set is nullable");
  t.deepEqual(s.Invoice?.properties.total_amount.$ref, "#/components/schemas/Amount", "an always-set message field is a plain reference, not anyOf with null");
  t.deepEqual(s.PeriodInput?.properties.start.type, ["string", "null"], "requests may still leave an always-set field out (null is absent)");
  t.deepEqual(s.Subject?.properties.metadata.additionalProperties, { type: "string" });
  const items = doc.paths["/subscription-timelines/{subscription_timeline_id}/items"]?.post?.responses["200"].content["application/json"].schema as Schema;
  t.is(items.type, "array", "a bare array");
  t.deepEqual(items.items, { $ref: "#/components/schemas/TimelineItem" });
  t.deepEqual(doc.paths["/subjects/{subject_id}"]?.get?.responses["200"].content["application/json"].schema, { $ref: "#/components/schemas/Subject" });
  const list = doc.paths["/subscriptions"]?.get?.parameters ?? [];
  t.deepEqual(
    list.map((p) => [p.name, p.in, p.schema.type]),
    [
      ["limit", "query", "integer"],
      ["offset", "query", "integer"],
      ["rate_card_id", "query", "string"],
      ["subject_id", "query", "string"],
    ],
  );
  t.deepEqual(doc.paths["/ping"]?.get?.security, [], "liveness needs no key");
  t.deepEqual(doc.components.securitySchemes.ApiKey, {
    type: "apiKey",
    in: "header",
    name: "X-API-Key",
    description: "A secret key (sk_…) of the environment; a publishable key (pk_…) only reads billing state.",
  });
  t.false("403" in (doc.paths["/customer-access/{subject_id}/billing-state"]?.get?.responses ?? {}), "a publishable key may read billing state");
});

test("GET /openapi.json serves the document and GET /docs the reference page, without a key", async (t) => {
  const server = await startTestServer("sqlite");
  try {
    const json = await fetch(`${server.url}/openapi.json`);
    t.is(json.status, 200);
    t.regex(json.headers.get("content-type") ?? "", /^application\/json/);
    t.deepEqual(await json.json(), doc);
    const page = await fetch(`${server.url}/docs`);
    t.is(page.status, 200);
    t.regex(page.headers.get("content-type") ?? "", /^text\/html/);
    const html = await page.text();
    t.false(/<script|https?:\/\/(?!127\.0\.0\.1|localhost)[a-z]/i.test(html.replace(/https:\/\/app\.example[^"' ]*/g, "")), "no script and nothing from another site");
    t.is((await fetch(`${server.url}/openapi.json`, { method: "POST" })).status, 405);
  } finally {
    await server.stop();
  }
});
