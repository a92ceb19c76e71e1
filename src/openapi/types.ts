/** The OpenAPI 3.1 document's shapes, as the builder (build.ts) makes them and the /docs page reads them. */

// biome-ignore lint/suspicious/noExplicitAny: a JSON Schema is an open JSON object
export type Schema = Record<string, any>;

export interface OpenApiDocument {
  openapi: "3.1.0";
  info: { title: string; version: string; description: string; license: { name: string; identifier: string } };
  servers: { url: string }[];
  tags: { name: string; description?: string }[];
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema>; responses: Record<string, Schema>; securitySchemes: Record<string, Schema> };
  security: Record<string, string[]>[];
}

export interface Operation {
  operationId: string;
  tags: string[];
  summary: string;
  description?: string;
  parameters?: Parameter[];
  requestBody?: { required: boolean; content: { "application/json": { schema: Schema } } };
  responses: Record<string, Schema>;
  security?: Record<string, string[]>[];
  /** The RPC this route calls (its Connect/gRPC path); none for a REST-only operation. */
  "x-rpc"?: string;
  /** A REST-only operation (rest-only.ts): no RPC of its own; a PDF's 200 is not JSON. */
  "x-rest-only"?: true;
  /** Who calls a REST-only callback (rest-only.ts REST_ONLY_CALLBACKS), e.g. "Stripe". */
  "x-called-by"?: string;
}

export interface Parameter {
  name: string;
  in: "path" | "query" | "header";
  required: boolean;
  description?: string;
  schema: Schema;
  style?: "form";
  explode?: boolean;
}

/** Comments by full name: `billing.v1.Subject`, `billing.v1.Subject.id`, `billing.v1.SubjectService.CreateSubject`. */
export type Comments = (fullName: string) => string | undefined;
