/** What the server's detours (src/edge, the lean gRPC path, the message checks, gRPC-Web) read and write of an RPC request before Connect does. */
import type { IncomingHttpHeaders } from "node:http2";
import type { DescMethod } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import type { UniversalServerRequest } from "@connectrpc/connect/protocol";
import { malformedRequest } from "./errors.js";

/** The request's media type, lower-cased, without parameters (`application/grpc+proto`). */
export const contentType = (req: UniversalServerRequest): string => (req.header.get("content-type") ?? "").split(";", 1)[0]?.trim().toLowerCase() ?? "";

/** Whether the client sends a stream of messages (client or bidi streaming), not one. */
export const isStreamingRequest = (method: DescMethod): boolean => method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming";

/** One enveloped message (Connect streaming, gRPC, gRPC-Web): a flags byte, the big-endian length, the data. */
export { encodeEnvelope as envelope } from "@connectrpc/connect/protocol";

/** The reason of an envelope (gRPC, gRPC-Web, Connect streaming) no request may send, or one cut short. */
export const MALFORMED_ENVELOPE = "MALFORMED_ENVELOPE";

/** The refusal of an envelope whose flags are neither 0x00 (a message) nor 0x01 (a compressed message): nothing else is a request's. */
export function unknownEnvelopeFlags(flags: number): ConnectError {
  const hex = `0x${flags.toString(16).padStart(2, "0")}`;
  return malformedRequest(`protocol error: envelope flags ${hex} are not valid in a request (0x00: a message, 0x01: a compressed message)`, MALFORMED_ENVELOPE, { flags: hex });
}

/** The refusal of a body that ends inside an envelope (Connect's words; `detail` says how far). */
export function incompleteEnvelope(detail?: string): ConnectError {
  return malformedRequest(detail === undefined ? "protocol error: incomplete envelope" : `protocol error: ${detail}`, MALFORMED_ENVELOPE);
}

/** A request's Node headers as a fetch Headers, HTTP/2's pseudo-headers left out (for the interceptors and implementations that read them). */
export function headersOf(headers: IncomingHttpHeaders): Headers {
  const h = new Headers();
  for (const [k, v] of Object.entries(headers)) {
    if (k.startsWith(":") || v === undefined) continue;
    if (Array.isArray(v)) for (const x of v) h.append(k, x);
    else h.set(k, String(v));
  }
  return h;
}
