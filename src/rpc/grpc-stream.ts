/**
 * The lean path for client-streaming gRPC (StreamUsageEvents): binary gRPC requests to a
 * client-streaming method, uncompressed or in gzip or brotli, are read here instead of by
 * connect-node, into the same implementation and interceptors (invoke.ts), and answered by
 * grpc-unary.ts's GrpcReply. The server (server.ts) has done what it does for every call before
 * the body (admission, the key and its rate limit, a bulk slot) and hands over the body as it is
 * read, with its bytes counted; this module splits it into messages.
 *
 * connect-node reads a stream through a pipeline of async generators (split the envelopes,
 * decompress, check, parse), several promises per message; a streamed event cost the server about
 * 60 µs against 31–47 for a batched one, a fifth of it in that pipeline (bench/README.md). Here
 * the envelopes of each chunk the body yields are split and decoded at once, and the method reads
 * them through one async generator; a usage event plainly encoded is read by
 * usage-event-wire.ts's reader rather than protobuf-es's. The answers are those of the
 * connect-node path (rpc/messages.ts): the same errors for a message over the method's bound
 * (resource_exhausted), a message that does not decode (invalid_argument MALFORMED_PROTOBUF),
 * envelope flags other than 0x00 and 0x01, a compressed message without `grpc-encoding` or an
 * envelope cut short at the end (invalid_argument MALFORMED_ENVELOPE), and bytes that do not
 * decompress (invalid_argument MALFORMED_COMPRESSION).
 */
import type { IncomingHttpHeaders } from "node:http2";
import type { DescMethod, Message } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Compression } from "@connectrpc/connect/protocol";
import { compressedWithoutEncoding } from "./compression.js";
import { leanGrpcRequest, parse } from "./grpc-unary.js";
import { envelopeLength, incompleteEnvelope, unknownEnvelopeFlags } from "./requests.js";
import { readPlainUsageEventInput } from "./usage-event-wire.js";
import { UsageEventInputSchema } from "../gen/billing/v1/usage_event_pb.js";

/** Whether the lean stream path serves a request with these headers: a client-streaming method, and a request grpc-unary.ts's leanGrpcRequest takes. */
export function servesLeanStream(method: DescMethod, headers: IncomingHttpHeaders): boolean {
  return method.methodKind === "client_streaming" && leanGrpcRequest(headers);
}

/**
 * The messages of a client stream's body (gRPC envelopes, in chunks as read), each decompressed
 * with `compression` (the request's `grpc-encoding`) and decoded as `method`'s input, each within
 * `readMaxBytes`. `ended` is called once the body was read to its end.
 */
export async function* envelopedMessages(body: AsyncIterable<Uint8Array>, method: DescMethod, compression: Compression | undefined, readMaxBytes: number, ended: () => void): AsyncGenerator<Message> {
  // A usage event as clients plainly send it is read without protobuf-es's reflective reader
  // (usage-event-wire.ts: the same message); anything else is decoded by fromBinary.
  const plain = method.input.typeName === UsageEventInputSchema.typeName ? readPlainUsageEventInput : undefined;
  const decode = (bytes: Uint8Array): Message => plain?.(bytes) ?? parse(method, bytes);
  // The start of an envelope not yet whole, in the chunks it came in: joined once it is whole
  // (joining at every chunk would copy a large message once per chunk).
  let held: Buffer[] = [];
  let heldBytes = 0;
  for await (const chunk of body) {
    const c = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    let buf = c;
    if (held.length > 0) {
      held.push(c);
      heldBytes += c.length;
      if (heldBytes < 5) continue;
      const length = envelopeLength(held);
      if (length > readMaxBytes) throw tooLarge(length, readMaxBytes);
      if (heldBytes < 5 + length) continue;
      buf = Buffer.concat(held, heldBytes);
      held = [];
      heldBytes = 0;
    }
    let at = 0;
    // The chunk's envelopes, split at once (a length over the bound fails here, before any of
    // them is handed on, as in connect-node); each is decoded as the method asks for it.
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
    for (const envelope of envelopes) {
      const bytes = envelope.subarray(5);
      const flags = envelope[0] as number;
      if (flags === 0) {
        yield decode(bytes);
        continue;
      }
      if (flags !== 1) throw unknownEnvelopeFlags(flags);
      if (!compression) throw compressedWithoutEncoding();
      yield decode(await compression.decompress(bytes, readMaxBytes));
    }
  }
  if (heldBytes > 0) throw incompleteEnvelope();
  ended();
}

function tooLarge(length: number, readMaxBytes: number): ConnectError {
  return new ConnectError(`message size ${length} is larger than configured readMaxBytes ${readMaxBytes}`, Code.ResourceExhausted);
}
