/**
 * The OpenAPI 3.1 document of the REST bridge, built from the same route table the bridge serves
 * (rest/gateway.ts buildRoutes over the contract's google.api.http annotations) and from the
 * message descriptors, so that it says what the server does (DESIGN §4):
 * - proto field names (snake_case); every output field is always present (`required`);
 * - a field with explicit presence (proto3 `optional`, a message, a oneof member) is nullable:
 *   absent is written as JSON null; except, in responses, one marked `(billing.v1.always_set)`,
 *   which every response sets (the writer, rpc/json-out.ts, never writes it as null);
 * - `(billing.v1.decimal)` fields and 64-bit integers are strings; Timestamps RFC 3339 strings;
 *   maps are objects; enums their value names (schemas.ts);
 * - `response_body: "x"` answers field x alone (a bare array for a repeated field);
 * - a request body is the request message (less the path parameters) for `body: "*"`, or the
 *   named field; the other fields of a request without a body are query parameters, converted by
 *   their type as the bridge converts them (rpc/json.ts fromText) (operations.ts);
 * - errors are the Connect error JSON with the HTTP statuses of Connect's code table (errors.ts);
 * - the REST-only GETs (the PDFs, no RPC of their own) and the keyless POSTs a payment provider
 *   calls (Stripe's webhooks) are listed apart (rest-only.ts).
 * Inputs are described as the JSON reader takes them: null means absent, and numbers may come
 * as strings (decimals as JSON numbers).
 * Descriptions come from the .proto comments when given (the generated code keeps none:
 * scripts/openapi.ts reads them from `buf build`'s image, comments.ts).
 */
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { buildRoutes } from "../rest/gateway.js";
import { ERROR_SCHEMA, errorResponses } from "./errors.js";
import { type Build, describe, operation } from "./operations.js";
import { REST_ONLY, REST_ONLY_CALLBACKS, restOnlyCallbackOperation, restOnlyOperation } from "./rest-only.js";
import { Schemas } from "./schemas.js";
import type { Comments, OpenApiDocument, Operation } from "./types.js";

/** The security scheme's name in the document. */
export const API_KEY_SCHEME = "ApiKey";

export interface BuildOptions {
  version: string;
  /** The SPDX identifier of the project's license (package.json `license`); Apache-2.0 when not given. */
  license?: string;
  comments?: Comments;
}

const DESCRIPTION =
  "The REST-style JSON paths, transcoded from the google.api.http annotations of the Protobuf contract onto the same handlers as gRPC and Connect. " +
  "JSON uses proto field names and always has every field: a value that is absent is null, a list [], a map {}. Decimals (amounts, quantities) are strings; " +
  "times are RFC 3339 UTC. Every call carries X-API-Key, except the ones marked as needing none. Generated from proto/ by scripts/openapi.ts.";

/** The document for the REST routes of `services` (rpc/routes.ts restServices). */
export function buildOpenApi(services: DescService[], options: BuildOptions): OpenApiDocument {
  const comments: Comments = options.comments ?? (() => undefined);
  const b: Build = { schemas: new Schemas(comments), comments, operationIds: new Set(), usedStatuses: new Set() };
  const routes = buildRoutes(services);
  // Documented in the contract's order (service, then method), not the matching order.
  const order = new Map<DescMethod, number>();
  for (const s of services) for (const m of s.methods) order.set(m, order.size);
  routes.sort((x, y) => (order.get(x.method) ?? 0) - (order.get(y.method) ?? 0));

  const paths: OpenApiDocument["paths"] = {};
  for (const route of routes) {
    const op = operation(route, b);
    paths[route.template] ??= {};
    (paths[route.template] as Record<string, Operation>)[route.httpMethod.toLowerCase()] = op;
  }
  // The REST-only GETs (the PDFs), listed apart: no RPC of their own (rest-only.ts).
  for (const extra of REST_ONLY) {
    paths[extra.template] ??= {};
    (paths[extra.template] as Record<string, Operation>).get = restOnlyOperation(extra, b);
  }
  // The keyless POSTs a payment provider calls (Stripe's webhooks), with their own answers (rest-only.ts).
  for (const extra of REST_ONLY_CALLBACKS) {
    paths[extra.template] ??= {};
    (paths[extra.template] as Record<string, Operation>).post = restOnlyCallbackOperation(extra, b);
  }
  const responses = errorResponses(b.usedStatuses);
  const tags = services.map((s) => ({ name: s.name, ...describe(comments(s.typeName)) }));
  const license = options.license ?? "Apache-2.0";
  return {
    openapi: "3.1.0",
    info: { title: "Usage billing REST API", version: options.version, description: DESCRIPTION, license: { name: license, identifier: license } },
    servers: [{ url: "/" }],
    tags,
    paths,
    components: {
      schemas: { ...sortedKeys(b.schemas.components), Error: ERROR_SCHEMA },
      responses,
      securitySchemes: {
        [API_KEY_SCHEME]: {
          type: "apiKey",
          in: "header",
          name: "X-API-Key",
          description: "A secret key (sk_…) of the environment; a publishable key (pk_…) only reads billing state.",
        },
      },
    },
    security: [{ [API_KEY_SCHEME]: [] }],
  };
}

function sortedKeys<T>(o: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
