/**
 * Malformed binary protobuf is bad input. Connect's handlers decode a binary request before any
 * interceptor runs and report a decode failure as `internal` ("parse binary: premature EOF"),
 * which is a 500 on Connect and grpc-status 13 on gRPC and gRPC-Web. A request the service cannot
 * read is the caller's mistake: `invalid_argument` with reason MALFORMED_PROTOBUF, naming the
 * message type.
 *
 * Each RPC handler is wrapped so that the request body is checked on its way into Connect: every
 * binary message (Connect unary `application/proto`: the whole body; Connect streaming, gRPC and
 * gRPC-Web: each uncompressed envelope) is decoded once with the same reader Connect uses, and one
 * that does not decode makes the body's iterator throw that ConnectError, which Connect answers as
 * it is, in the caller's protocol. Nothing is read earlier than Connect reads it (a stream's
 * messages are checked one at a time, as they arrive), and what passes is handed on unchanged.
 * Bodies beyond the size bound, compressed ones and JSON are left to Connect.
 */
import { type DescMessage, fromBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerRequest } from "@connectrpc/connect/protocol";
import { ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { contentType } from "./requests.js";

/** The reason of a request whose binary protobuf does not decode. */
export const MALFORMED_PROTOBUF = "MALFORMED_PROTOBUF";

/** Content types whose body is one binary message (Connect unary). */
const WHOLE = new Set(["application/proto"]);
/** Content types whose body is binary messages in envelopes (5 bytes: flags, big-endian length). */
const ENVELOPED = new Set(["application/connect+proto", "application/grpc", "application/grpc+proto", "application/grpc-web", "application/grpc-web+proto"]);

export function malformed(desc: DescMessage, err: unknown): ConnectError {
  const why = err instanceof Error ? err.message : String(err);
  return new ConnectError(`the request is not a valid ${desc.typeName} in the protobuf binary format: ${why}`, Code.InvalidArgument, undefined, [
    { desc: ErrorInfoSchema, value: { reason: MALFORMED_PROTOBUF, domain: "billing.v1", metadata: { message_type: desc.typeName } } },
  ]);
}

/** Throws malformed() unless `bytes` decode as `desc` (the way Connect will decode them). */
function check(desc: DescMessage, bytes: Uint8Array): void {
  try {
    fromBinary(desc, bytes);
  } catch (err) {
    throw malformed(desc, err);
  }
}

function concat(chunks: Uint8Array[], size: number): Uint8Array {
  if (chunks.length === 1) return chunks[0] as Uint8Array;
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/** Connect unary: the whole body is the message. Over `maxBytes` it is handed on for Connect to refuse. */
async function* wholeChecked(body: AsyncIterable<Uint8Array>, desc: DescMessage, maxBytes: number): AsyncIterable<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  const it = body[Symbol.asyncIterator]();
  for (let r = await it.next(); !r.done; r = await it.next()) {
    chunks.push(r.value);
    size += r.value.byteLength;
    if (size > maxBytes) {
      yield* chunks;
      for (let rest = await it.next(); !rest.done; rest = await it.next()) yield rest.value;
      return;
    }
  }
  const bytes = concat(chunks, size);
  check(desc, bytes);
  yield bytes;
}

/**
 * Enveloped messages: each complete envelope is checked (uncompressed data ones, flags 0) and
 * yielded as soon as it is whole. An envelope announced beyond `maxBytes` ends the checking: the
 * rest goes on unread for Connect to refuse.
 */
async function* envelopesChecked(body: AsyncIterable<Uint8Array>, desc: DescMessage, maxBytes: number): AsyncIterable<Uint8Array> {
  let pending: Uint8Array[] = [];
  let size = 0;
  let passThrough = false;
  for await (const chunk of body) {
    if (passThrough) {
      yield chunk;
      continue;
    }
    pending.push(chunk);
    size += chunk.byteLength;
    if (size < 5) continue;
    let buf = concat(pending, size);
    let at = 0;
    while (buf.byteLength - at >= 5) {
      const flags = buf[at] as number;
      const length = new DataView(buf.buffer, buf.byteOffset + at + 1, 4).getUint32(0);
      if (length > maxBytes) {
        passThrough = true;
        break;
      }
      if (buf.byteLength - at < 5 + length) break;
      if (flags === 0) check(desc, buf.subarray(at + 5, at + 5 + length));
      at += 5 + length;
    }
    if (at > 0) yield buf.subarray(0, at);
    buf = buf.subarray(at);
    if (passThrough) {
      if (buf.byteLength > 0) yield buf;
      pending = [];
      size = 0;
    } else {
      pending = buf.byteLength > 0 ? [buf] : [];
      size = buf.byteLength;
    }
  }
  if (size > 0) yield concat(pending, size); // an incomplete envelope: Connect's to refuse
}

/** The handler, with its binary request messages checked as they reach it (see above). */
export function strictBinary(handler: UniversalHandler, maxBytes: number): UniversalHandler {
  const desc = handler.method.input;
  const wrapped = (req: UniversalServerRequest) => {
    const body = req.body;
    if (req.method !== "POST" || body === null || typeof body !== "object" || !(Symbol.asyncIterator in body)) return handler(req);
    const type = contentType(req);
    const encoding = (req.header.get("content-encoding") ?? "identity").toLowerCase();
    if (WHOLE.has(type) && encoding === "identity") return handler({ ...req, body: wholeChecked(body as AsyncIterable<Uint8Array>, desc, maxBytes) });
    if (ENVELOPED.has(type)) return handler({ ...req, body: envelopesChecked(body as AsyncIterable<Uint8Array>, desc, maxBytes) });
    return handler(req);
  };
  return Object.assign(wrapped, handler) as UniversalHandler;
}

/** Wraps every handler of the router with strictBinary (in place: the server reads router.handlers). */
export function checkBinaryRequests(router: ConnectRouter, maxBytes: number): void {
  const wrapped = router.handlers.map((h) => strictBinary(h, maxBytes));
  router.handlers.splice(0, router.handlers.length, ...wrapped);
}
