/** Clients for the three protocols, each a real network client against the server's port. */
import type { DescService } from "@bufbuild/protobuf";
import { type Client, type Interceptor, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";

export type Protocol = "grpc" | "connect" | "grpcweb";
export const PROTOCOLS: Protocol[] = ["grpc", "connect", "grpcweb"];

export function rpcClient<S extends DescService>(service: S, baseUrl: string, protocol: Protocol, apiKey?: string): Client<S> {
  const withKey: Interceptor = (next) => async (req) => {
    if (apiKey !== undefined) req.header.set("x-api-key", apiKey);
    return next(req);
  };
  const interceptors = [withKey];
  const transport =
    protocol === "grpc"
      ? createGrpcTransport({ baseUrl, interceptors })
      : protocol === "connect"
        ? createConnectTransport({ baseUrl, httpVersion: "1.1", interceptors })
        : createGrpcWebTransport({ baseUrl, httpVersion: "1.1", interceptors });
  return createClient(service, transport);
}

export interface RestResponse {
  status: number;
  // biome-ignore lint: test helper returns loosely typed JSON
  body: any;
  headers: Headers;
}

/** A REST call with fetch; `body` may be an object (sent as JSON) or raw text. */
export async function rest(baseUrl: string, method: string, path: string, apiKey?: string, body?: unknown): Promise<RestResponse> {
  const headers: Record<string, string> = {};
  if (apiKey !== undefined) headers["x-api-key"] = apiKey;
  let payload: string | undefined;
  if (body !== undefined) {
    headers["content-type"] = "application/json";
    payload = typeof body === "string" ? body : JSON.stringify(body);
  }
  const res = await fetch(`${baseUrl}${path}`, { method, headers, body: payload });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

/** The google.rpc.BadRequest field paths of a REST error body. */
export function violatedFields(body: { details?: { type: string; debug?: { field_violations?: { field?: string }[] } }[] }): string[] {
  const br = body.details?.find((d) => d.type === "google.rpc.BadRequest");
  return (br?.debug?.field_violations ?? []).map((v) => v.field ?? "");
}

/** The google.rpc.ErrorInfo reason of a REST error body. */
export function reasonOf(body: { details?: { type: string; debug?: { reason?: string } }[] }): string | undefined {
  return body.details?.find((d) => d.type === "google.rpc.ErrorInfo")?.debug?.reason;
}

/** A REST call that must succeed: its JSON body, or an error naming the call and the answer. */
// biome-ignore lint: JSON results are loosely typed in tests
export async function ok(target: { url: string }, key: string, method: string, path: string, body?: unknown): Promise<any> {
  const r = await rest(target.url, method, path, key, body);
  if (r.status !== 200) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}
