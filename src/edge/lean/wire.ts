/**
 * The request side of the lean gRPC path: which requests it serves, what their headers say of the
 * wire (compression both ways, the deadline), and their messages decoded from the body with
 * protobuf-es (`fromBinary`). The errors are those connect-node gives for the same bodies
 * (rpc/messages.ts checks them on that path), so both paths answer alike (test/api/lean-parity):
 * a message over the method's bound is resource_exhausted; what the caller's bytes get wrong is
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
import { envelopeLength, incompleteEnvelope, unknownEnvelopeFlags } from "../../rpc/requests.js";

/**
 * Whether the lean path serves a call of `method` with these headers: a unary or client-streaming
 * method, POST, binary gRPC, no request compression or one the server has (gzip, br), and no
 * Origin (a browser's call: its CORS headers are connect-node's). Anything else is connect-node's:
 * server and bidirectional streaming, gRPC-Web, Connect, JSON, an unknown compression.
 */
export function servesLean(method: DescMethod, headers: IncomingHttpHeaders): boolean {
  if (method.methodKind !== "unary" && method.methodKind !== "client_streaming") return false;
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

/**
 * The messages of a client stream's body (gRPC envelopes, in chunks as read), each decompressed
 * with `compression` and decoded as `method`'s input, each within `readMaxBytes`. `ended` is
 * called once the body was read to its end. The envelopes of each chunk are split at once (a
 * length over the bound fails there, before any of them is handed on, as in connect-node).
 */
export async function* streamMessages(body: AsyncIterable<Uint8Array>, method: DescMethod, compression: Compression | undefined, readMaxBytes: number, ended: () => void): AsyncGenerator<Message> {
  // The start of an envelope not yet whole, in the chunks it came in: joined once it is whole
  // (joining at every chunk would copy a large message once per chunk).
  let held: Buffer[] = [];
  let heldBytes = 0;
  for await (const chunk of body) {
    let buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (held.length > 0) {
      held.push(buf);
      heldBytes += buf.length;
      if (heldBytes < 5) continue;
      const length = envelopeLength(held);
      if (length > readMaxBytes) throw tooLarge(length, readMaxBytes);
      if (heldBytes < 5 + length) continue;
      buf = Buffer.concat(held, heldBytes);
      held = [];
      heldBytes = 0;
    }
    let at = 0;
    const envelopes: Buffer[] = [];
    while (buf.length - at >= 5) {
      const length = buf.readUInt32BE(at + 1);
      if (length > readMaxBytes) throw tooLarge(length, readMaxBytes);
      if (buf.length - at - 5 < length) break;
      envelopes.push(buf.subarray(at, at + 5 + length));
      at += 5 + length;
    }
    if (at < buf.length) {
      held = [buf.subarray(at)];
      heldBytes = buf.length - at;
    }
    for (const envelope of envelopes) yield await decode(method, envelope.subarray(5), envelope[0] as number, compression, readMaxBytes);
  }
  if (heldBytes > 0) throw incompleteEnvelope();
  ended();
}

function tooLarge(length: number, readMaxBytes: number): ConnectError {
  return new ConnectError(`message size ${length} is larger than configured readMaxBytes ${readMaxBytes}`, Code.ResourceExhausted);
}
