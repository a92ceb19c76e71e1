/**
 * Checks REST answers against the committed OpenAPI document (openapi/openapi.json): each body
 * is validated (ajv, JSON Schema 2020-12) against the schema of its operation and status, and
 * every operation and status seen is counted, so a test can ask what it has not yet exercised.
 * A REST-only operation's 200 that is a file (a PDF) is checked by its content type and magic.
 */
import Ajv2020Module, { type ValidateFunction } from "ajv/dist/2020.js";
import { loadOpenApi } from "../../src/pages/docs.js";
import { buildRoutes } from "../../src/rest/gateway.js";
import { REST_ONLY, REST_ONLY_CALLBACKS, restOnlyCallbackRoute, restOnlyRoute } from "../../src/openapi/rest-only.js";
import type { OpenApiDocument } from "../../src/openapi/types.js";
import { restServices } from "../../src/rpc/routes.js";

// ajv is CommonJS: under NodeNext its default export is the module object, whose `default` is the class.
const Ajv2020 = Ajv2020Module.default;

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;

/** A JSON pointer segment. */
const seg = (s: string) => s.replace(/~/g, "~0").replace(/\//g, "~1");

/** A checker of REST answers against `doc`. */
export function responseValidator(doc: OpenApiDocument = loadOpenApi()) {
  const copy = structuredClone(doc) as OpenApiDocument;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addFormat("date-time", { type: "string", validate: (v: string) => RFC3339.test(v) && !Number.isNaN(Date.parse(v)) });
  for (const f of ["int32", "uint32", "int64", "double"]) ajv.addFormat(f, true);
  ajv.addSchema(copy as object, "openapi.json");
  const routes: { httpMethod: string; template: string; regex: RegExp }[] = [...REST_ONLY.map(restOnlyRoute), ...REST_ONLY_CALLBACKS.map(restOnlyCallbackRoute), ...buildRoutes(restServices)];
  const compiled = new Map<string, ValidateFunction>();
  const seen = new Set<string>();

  /** The schema pointer of an answer: the operation's own 200, or its error response's. */
  function pointer(template: string, method: string, status: number): string | undefined {
    const op = copy.paths[template]?.[method.toLowerCase()];
    const resp = op?.responses[String(status)];
    if (!resp) return undefined;
    if (resp.$ref) return `openapi.json${resp.$ref}/content/application~1json/schema`;
    return `openapi.json#/paths/${seg(template)}/${method.toLowerCase()}/responses/${status}/content/application~1json/schema`;
  }

  return {
    /**
     * Problems with the answer (none: it matches the document), and the operation it was. A
     * documented application/pdf answer: its `contentType` must say so and its body start with `%PDF-`.
     */
    check(method: string, path: string, status: number, body: unknown, contentType?: string | null): { operation: string; problems: string[] } {
      const url = new URL(path, "http://localhost");
      const route = routes.find((r) => r.httpMethod === method && r.regex.test(url.pathname));
      if (!route) return { operation: `${method} ${url.pathname}`, problems: ["no route"] };
      const operation = `${method} ${route.template}`;
      const ptr = pointer(route.template, method, status);
      if (!ptr) return { operation, problems: [`status ${status} is not documented for ${operation}`] };
      seen.add(`${operation} ${status}`);
      if (copy.paths[route.template]?.[method.toLowerCase()]?.responses[String(status)]?.content?.["application/pdf"]) {
        const problems: string[] = [];
        if (!/^application\/pdf(;|$)/.test(contentType ?? "")) problems.push(`content-type ${JSON.stringify(contentType)}, not application/pdf`);
        const head = typeof body === "string" ? body.slice(0, 5) : Buffer.isBuffer(body) ? body.subarray(0, 5).toString("latin1") : "";
        if (head !== "%PDF-") problems.push(`the body does not start with %PDF- (${JSON.stringify(head)})`);
        return { operation, problems };
      }
      const validate = compiled.get(ptr) ?? ajv.compile({ $ref: ptr });
      compiled.set(ptr, validate);
      if (validate(body)) return { operation, problems: [] };
      return { operation, problems: (validate.errors ?? []).map((e) => `${e.instancePath || "(body)"} ${e.message}${e.params ? ` ${JSON.stringify(e.params)}` : ""}`) };
    },
    /** "METHOD /template status" of every answer checked so far. */
    seen,
    /** Every documented "METHOD /template". */
    operations(): string[] {
      return Object.entries(copy.paths).flatMap(([p, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${p}`));
    },
  };
}
