/**
 * The REST client: openapi-fetch over the types openapi-typescript made of the service's OpenAPI
 * document (openapi/openapi.json), so paths, parameters, bodies and answers are typed.
 */
import createClient, { type Client, type ClientOptions } from "openapi-fetch";
import type { paths } from "./openapi/schema.js";

export type { components, operations, paths } from "./openapi/schema.js";

export type RestClient = Client<paths>;

/**
 * A REST client of the service at `baseUrl` (e.g. "http://localhost:8080") that sends `apiKey` as
 * `X-API-Key`. `options` are openapi-fetch's (a custom `fetch`, more headers...).
 */
export function createRestClient(baseUrl: string, apiKey: string, options: Omit<ClientOptions, "baseUrl"> = {}): RestClient {
  const headers = new Headers(options.headers as HeadersInit | undefined);
  headers.set("X-API-Key", apiKey);
  return createClient<paths>({ ...options, baseUrl, headers });
}
