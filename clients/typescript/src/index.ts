/**
 * @usage-billing/client: the usage-billing service from TypeScript, in the browser or in Node.
 * `createBillingClient` speaks Connect or gRPC-Web over fetch (@connectrpc/connect-web);
 * `@usage-billing/client/node` adds gRPC (HTTP/2) with connect-node; `createRestClient` calls the
 * REST paths, typed from the OpenAPI document.
 */
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { type BillingClient, apiKeyInterceptor, clientsOver } from "./services.js";

export { createRestClient, type RestClient, type components, type operations, type paths } from "./rest.js";
export { type BillingClient, apiKeyInterceptor, clientsOver, services } from "./services.js";
export * from "./messages.js";

export interface BillingClientOptions {
  /** "connect" (JSON, the default) or "grpc-web"; for gRPC use @usage-billing/client/node. */
  protocol?: "connect" | "grpc-web";
  /** Binary Protobuf rather than JSON on the wire (Connect only; gRPC-Web is always binary). */
  binary?: boolean;
  /** A fetch to use instead of globalThis.fetch. */
  fetch?: typeof globalThis.fetch;
}

/** Clients of every billing.v1 service at `baseUrl`, sending `apiKey` as X-API-Key. */
export function createBillingClient(baseUrl: string, apiKey: string, options: BillingClientOptions = {}): BillingClient {
  const common = { baseUrl, interceptors: [apiKeyInterceptor(apiKey)], ...(options.fetch ? { fetch: options.fetch } : {}) };
  const protocol = options.protocol ?? "connect";
  if (protocol === "grpc-web") return clientsOver(createGrpcWebTransport(common));
  if (protocol === "connect") return clientsOver(createConnectTransport({ ...common, useBinaryFormat: options.binary ?? false }));
  throw new Error(`createBillingClient: unknown protocol ${String(protocol)} (connect or grpc-web; gRPC is in @usage-billing/client/node)`);
}
