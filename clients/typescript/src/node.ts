/**
 * @usage-billing/client/node: the same clients from Node over connect-node, which adds gRPC
 * (HTTP/2; plain-text `http://` URLs use HTTP/2 prior knowledge, as the server accepts).
 */
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { type BillingClient, apiKeyInterceptor, clientsOver } from "./services.js";

export * from "./index.js";

export interface NodeBillingClientOptions {
  /** "connect" (the default), "grpc" or "grpc-web". */
  protocol?: "connect" | "grpc" | "grpc-web";
  /** Binary Protobuf rather than JSON (Connect only; gRPC and gRPC-Web are always binary). */
  binary?: boolean;
  /** "1.1" or "2" for Connect and gRPC-Web (default "2"); gRPC is always HTTP/2. */
  httpVersion?: "1.1" | "2";
}

/** Clients of every billing.v1 service at `baseUrl`, sending `apiKey` as X-API-Key. */
export function createBillingClient(baseUrl: string, apiKey: string, options: NodeBillingClientOptions = {}): BillingClient {
  const interceptors = [apiKeyInterceptor(apiKey)];
  const httpVersion = options.httpVersion ?? "2";
  const protocol = options.protocol ?? "connect";
  if (protocol === "grpc") return clientsOver(createGrpcTransport({ baseUrl, interceptors }));
  if (protocol === "grpc-web") return clientsOver(createGrpcWebTransport({ baseUrl, interceptors, httpVersion }));
  if (protocol === "connect") return clientsOver(createConnectTransport({ baseUrl, interceptors, httpVersion, useBinaryFormat: options.binary ?? false }));
  throw new Error(`createBillingClient: unknown protocol ${String(protocol)} (connect, grpc or grpc-web)`);
}
