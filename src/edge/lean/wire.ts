/**
 * The request side of the lean gRPC path: which requests it serves, what their headers say of the
 * wire (compression both ways, the deadline), and the message decoded from the body with
 * protobuf-es (`fromBinary`). The errors are those connect-node gives for the same bodies
 * (rpc/messages.ts checks them on that path), so both paths answer alike (test/api/lean-parity):
 * what the caller's bytes get wrong is
 * invalid_argument with a reason where Connect says internal: a message that does not decode
 * (MALFORMED_PROTOBUF), flags other than 0x00 and 0x01, a compressed message without an encoding
 * or a body that ends inside its envelope (MALFORMED_ENVELOPE), bytes that do not decompress
 * (MALFORMED_COMPRESSION).
 *
 * Compression is negotiated as connect-node does (compressionNegotiate): a request in gzip or br
 * (`grpc-encoding`) is decompressed within the method's bound; the answer is compressed with the
 * first encoding of the client's `grpc-accept-encoding` the server has (without that header, the
 * request's).
 */
import type { IncomingHttpHeaders } from "node:http2";
import { type DescMethod, type Message, fromBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Compression } from "@connectrpc/connect/protocol";
import { parseTimeout } from "@connectrpc/connect/protocol-grpc";
import { ACCEPTED_COMPRESSION, compressedWithoutEncoding } from "../../rpc/compression.js";
import { malformed } from "../../rpc/messages.js";
import { incompleteEnvelope, unknownEnvelopeFlags } from "../../rpc/requests.js";

/**
 * Whether the lean path serves a call of `method` with these headers: a unary method, POST,
 * binary gRPC, no request compression or one the server has (gzip, br), and no Origin (a
 * browser's call: its CORS headers are connect-node's). Anything else is connect-node's: every
 * stream (the ingest client stream too: bench/README.md, gRPC, measured it under the 2× rule),
 * gRPC-Web, Connect, JSON, an unknown compression.
 */
export function servesLean(method: DescMethod, headers: IncomingHttpHeaders): boolean {
  if (method.methodKind !== "unary") return false;
  if (headers[":method"] !== "POST" || headers.origin !== undefined) return false;
  const type = String(headers["content-type"]).toLowerCase();
  if (type !== "application/grpc" && type !== "application/grpc+proto") return false;
  const encoding = headers["grpc-encoding"];
  return encoding === undefined || encoding === "identity" || byName.has(encoding as string);
}

const byName = new Map<string, Compression>(ACCEPTED_COMPRESSION.map((c) => [c.name, c]));

/** The request's compression (`grpc-encoding`; undefined: identity). servesLean let only known ones in. */
export function requestCompression(headers: IncomingHttpHeaders): Compression | undefined {
  const encoding = headers["grpc-encoding"];
  return encoding === undefined ? undefined : byName.get(encoding as string);
}

/** The answer's compression: the first of the client's `grpc-accept-encoding` the server has, or without that header the request's own. */
export function responseCompression(headers: IncomingHttpHeaders, request: Compression | undefined): Compression | undefined {
  const accept = headers["grpc-accept-encoding"];
  if (accept === undefined || accept === "") return request;
  for (const name of String(accept).split(",")) {
    const c = byName.get(name.trim());
    if (c) return c;
  }
  return undefined;
}

/** Errors connect-node answers in its own words, without the details the server's own errors carry. */
const protocolErrors = new WeakSet<ConnectError>();

function protocolError(message: string, code: Code): ConnectError {
  const err = new ConnectError(message, code);
  protocolErrors.add(err);
  return err;
}

export const isProtocolError = (err: ConnectError): boolean => protocolErrors.has(err);

/** The call's deadline in ms from the `grpc-timeout` header (undefined: none); throws for a malformed one, as Connect does. */
export function grpcDeadline(headers: IncomingHttpHeaders): number | undefined {
  const raw = headers["grpc-timeout"];
  if (raw === undefined) return undefined;
  const t = parseTimeout(String(raw), Number.MAX_SAFE_INTEGER);
  if (t.error) {
    protocolErrors.add(t.error);
    throw t.error;
  }
  return t.timeoutMs;
}

/**
 * The request message of a unary call's body: exactly one envelope whose message, decompressed
 * with `compression` to at most `readMaxBytes`, decodes as the method's input.
 */
export async function unaryMessage(method: DescMethod, body: Buffer, compression: Compression | undefined, readMaxBytes: number): Promise<Message> {
  if (body.length === 0) throw protocolError("protocol error: missing input message for unary method", Code.Unimplemented);
  if (body.length < 5) throw incompleteEnvelope();
  const flags = body[0] as number;
  const length = body.readUInt32BE(1);
  if (body.length - 5 < length) throw incompleteEnvelope(`promised ${length} bytes in enveloped message, got ${body.length - 5} bytes`);
  if (body.length - 5 > length) throw protocolError("protocol error: received extra input message for unary method", Code.Unimplemented);
  return decode(method, body.subarray(5), flags, compression, readMaxBytes);
}

/** One enveloped message of `method`'s input, decompressed (flags 0x01) within `readMaxBytes`. */
async function decode(method: DescMethod, bytes: Uint8Array, flags: number, compression: Compression | undefined, readMaxBytes: number): Promise<Message> {
  if (flags === 1) {
    if (!compression) throw compressedWithoutEncoding();
    bytes = await compression.decompress(bytes, readMaxBytes);
  } else if (flags !== 0) throw unknownEnvelopeFlags(flags);
  try {
    return fromBinary(method.input, bytes);
  } catch (err) {
    throw malformed(method.input, err);
  }
}
