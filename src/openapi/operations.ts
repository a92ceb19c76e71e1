/**
 * One REST route's operation: its parameters (path, the Idempotency-Key header, query), request
 * body, 200 schema and error responses, from the route and its method's messages.
 */
import type { DescField } from "@bufbuild/protobuf";
import type { RestRoute } from "../rest/gateway.js";
import { needsKey } from "../rpc/auth.js";
import { takesIdempotencyKey } from "../rpc/idempotency.js";
import { errorRefs, errorStatuses } from "./errors.js";
import { type Schemas, queryable, textSchema } from "./schemas.js";
import type { Comments, Operation, Parameter, Schema } from "./types.js";

/** What the operations of one document share: the schemas made so far, the comments, the IDs and statuses used. */
export interface Build {
  schemas: Schemas;
  comments: Comments;
  operationIds: Set<string>;
  usedStatuses: Set<number>;
}

const IDEMPOTENCY_KEY: Parameter = {
  name: "Idempotency-Key",
  in: "header",
  required: false,
  description:
    "1–255 printable ASCII characters. A retry with the same key and request gets the first answer again (with `Idempotent-Replayed: true`) and changes nothing; the same key with another request is a 400 IDEMPOTENCY_KEY_REUSED. Kept 24 hours.",
  schema: { type: "string", minLength: 1, maxLength: 255 },
};

const firstSentence = (text: string) => (/^(.*?\.)(\s|$)/s.exec(text)?.[1] ?? text).replace(/\s+/g, " ").trim();

export function describe(text: string | undefined): { description?: string } {
  return text ? { description: text } : {};
}

function inputField(route: RestRoute, name: string, what: string): DescField {
  const input = route.method.input;
  const field = input.fields.find((f) => f.name === name);
  if (!field) throw new Error(`${route.template}: ${what} is not a field of ${input.typeName}`);
  return field;
}

/** The path parameters, then the Idempotency-Key header when the method takes one. */
function pathParameters(route: RestRoute, b: Build): Parameter[] {
  const input = route.method.input;
  const out: Parameter[] = route.params.map((name) => {
    const field = inputField(route, name, `{${name}}`);
    return { name, in: "path", required: true, schema: textSchema(field, b.schemas), ...describe(b.comments(`${input.typeName}.${name}`)) };
  });
  if (takesIdempotencyKey(route.method)) out.push(IDEMPOTENCY_KEY);
  return out;
}

/** The body: the request less the path parameters (`body: "*"`), or the named field. */
function requestBody(route: RestRoute, b: Build): Operation["requestBody"] {
  const input = route.method.input;
  if (route.body === "*") {
    const omit = new Set(route.params);
    const schema = omit.size === 0 ? b.schemas.message(input, "input") : b.schemas.object(input, "input", omit);
    return { required: false, content: { "application/json": { schema } } };
  }
  if (route.body === "") return undefined;
  const field = inputField(route, route.body, `body "${route.body}"`);
  return { required: false, content: { "application/json": { schema: b.schemas.field(field, "input") } } };
}

/** Without a whole-message body, the other fields the bridge can read from text are query parameters. */
function queryParameters(route: RestRoute, b: Build): Parameter[] {
  if (route.body === "*") return [];
  const input = route.method.input;
  const out: Parameter[] = [];
  for (const field of input.fields) {
    if (route.params.includes(field.name) || field.name === route.body || !queryable(field)) continue;
    const list = field.fieldKind === "list";
    out.push({
      name: field.name,
      in: "query",
      required: false,
      schema: textSchema(field, b.schemas),
      ...(list ? { style: "form" as const, explode: true } : {}),
      ...describe(b.comments(`${input.typeName}.${field.name}`)),
    });
  }
  return out;
}

/** The 200 answer: the response message, or its `response_body` field alone. */
function okSchema(route: RestRoute, b: Build): Schema {
  const output = route.method.output;
  if (route.responseBody === "") return b.schemas.message(output, "output");
  const field = output.fields.find((f) => f.name === route.responseBody);
  if (!field) throw new Error(`${route.template}: response_body "${route.responseBody}" is not a field of ${output.typeName}`);
  const s = b.schemas.field(field, "output");
  // The field alone: a message that is always set (the bridge would write null if it were not).
  return field.fieldKind === "message" && s.anyOf ? { $ref: s.anyOf[0].$ref, ...(s.description ? { description: s.description } : {}) } : s;
}

/** The route's operation; records its ID and error statuses in `b`. */
export function operation(route: RestRoute, b: Build): Operation {
  const { method } = route;
  const comment = b.comments(`${method.parent.typeName}.${method.name}`) ?? "";
  // The schemas are made in this order (path, body, query, 200), which decides which of two messages of one name gets the short name.
  const parameters = pathParameters(route, b);
  const body = requestBody(route, b);
  parameters.push(...queryParameters(route, b));
  const ok = okSchema(route, b);
  const statuses = errorStatuses(route, comment, parameters.length > 0 || body !== undefined);
  for (const s of statuses) b.usedStatuses.add(s);
  const operationId = b.operationIds.has(method.name) ? `${method.parent.name}_${method.name}` : method.name;
  b.operationIds.add(operationId);
  return {
    operationId,
    tags: [method.parent.name],
    summary: comment ? firstSentence(comment) : method.name,
    ...(comment ? { description: comment } : {}),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(body ? { requestBody: body } : {}),
    responses: { "200": { description: "OK", content: { "application/json": { schema: ok } } }, ...errorRefs(statuses) },
    ...(needsKey(method.parent) ? {} : { security: [] }),
    "x-rpc": `/${method.parent.typeName}/${method.name}`,
  };
}
