/**
 * The lean path for unary gRPC (issue 13): `application/grpc` and `application/grpc+proto`
 * requests to unary methods, uncompressed, are served here instead of by connect-node, into the
 * same implementations and interceptors (invoke.ts). The server (server.ts) has already done what
 * it does for every call before the body (admission, auth, rate limit, declared length) and reads
 * the body within its bounds; this module is the wire: the request envelope, the deadline, and
 * the response with its trailers, as connect-node writes them.
 *
 * Per call it builds one buffer for the request and one for the response: no Headers objects
 * unless an interceptor reads them, no AbortController unless the call has a deadline, no
 * async-iterable pipeline, and the message is decoded once (connect-node's path decodes a binary
 * message twice: binary.ts checks it, then Connect reads it).
 */
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { type DescMethod, type Message, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { parseTimeout, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { malformed } from "./binary.js";
import { encodeGrpcMessage } from "./grpc-message.js";

/** What connect-node answers a binary gRPC request with. */
const CONTENT_TYPE = "application/grpc+proto";

/**
 * Whether the lean path serves this request: a unary method, POST, binary gRPC, and no request
 * compression (anything else is connect-node's: streaming, gRPC-Web, Connect, JSON, gzip).
 */
export function servesLean(method: DescMethod, req: Http2ServerRequest): boolean {
  if (method.methodKind !== "unary" || req.method !== "POST") return false;
  const type = req.headers["content-type"];
  if (type !== "application/grpc" && type !== "application/grpc+proto") {
    if (typeof type !== "string") return false;
    const t = type.toLowerCase();
    if (t !== "application/grpc" && t !== "application/grpc+proto") return false;
  }
  const encoding = req.headers["grpc-encoding"];
  return encoding === undefined || encoding === "identity";
}

/** The call's deadline in ms from the `grpc-timeout` header (undefined: none); throws for a malformed one, as Connect does. */
export function grpcDeadline(req: Http2ServerRequest): number | undefined {
  const raw = req.headers["grpc-timeout"];
  if (raw === undefined) return undefined;
  const t = parseTimeout(typeof raw === "string" ? raw : String(raw), Number.MAX_SAFE_INTEGER);
  if (t.error) throw t.error;
  return t.timeoutMs;
}

/**
 * The request message of a unary call's body: exactly one uncompressed envelope whose message
 * decodes as the method's input. The errors are Connect's for the same bodies, except that a
 * message that does not decode is invalid_argument MALFORMED_PROTOBUF (binary.ts).
 */
export function decodeRequest(method: DescMethod, body: Buffer): Message {
  if (body.length === 0) throw new ConnectError("protocol error: missing input message for unary method", Code.Unimplemented);
  if (body.length < 5) throw new ConnectError(`protocol error: incomplete envelope`, Code.InvalidArgument);
  const flags = body[0] as number;
  const length = body.readUInt32BE(1);
  if (body.length - 5 < length) throw new ConnectError(`protocol error: promised ${length} bytes in enveloped message, got ${body.length - 5} bytes`, Code.InvalidArgument);
  if (body.length - 5 > length) throw new ConnectError("protocol error: received extra input message for unary method", Code.Unimplemented);
  if ((flags & 0b1) === 1) throw new ConnectError("received compressed envelope, but do not know how to decompress", Code.Internal);
  try {
    return fromBinary(method.input, body.subarray(5));
  } catch (err) {
    throw malformed(method.input, err);
  }
}

function headersObject(h: Headers | undefined, into: Record<string, string | number | string[]>) {
  h?.forEach((v, k) => {
    into[k] = v;
  });
  return into;
}

/**
 * The response headers: those the server set on `res` already (rate limit, CORS), then
 * `extra`. Written to the HTTP/2 stream itself: the compatibility layer's writeHead validates
 * and copies every header again, about a tenth of a Ping's cost.
 */
function responseHeaders(res: Http2ServerResponse, extra: Record<string, string>): Record<string, string | number | string[]> {
  const out: Record<string, string | number | string[]> = { ":status": 200 };
  const set = res.getHeaderNames().length > 0 ? res.getHeaders() : undefined;
  if (set) for (const k of Object.keys(set)) out[k] = set[k] as string | number | string[];
  return Object.assign(out, extra);
}

/** Whether the response can still be written (not answered yet, the stream open). */
function writable(res: Http2ServerResponse): boolean {
  return !res.headersSent && !res.stream.destroyed && !res.stream.closed;
}

/** The response of a call that succeeded: headers, one envelope, trailers with grpc-status 0. */
export function writeMessage(res: Http2ServerResponse, method: DescMethod, message: Message, header?: Headers, trailer?: Headers): void {
  if (!writable(res)) return;
  const bytes = toBinary(method.output, message);
  const envelope = Buffer.allocUnsafe(5 + bytes.length);
  envelope[0] = 0;
  envelope.writeUInt32BE(bytes.length, 1);
  envelope.set(bytes, 5);
  // The compatibility layer sends these when the stream asks for its trailers.
  res.addTrailers(headersObject(trailer, { "grpc-status": "0" }) as Record<string, string>);
  res.stream.respond(headersObject(header, responseHeaders(res, { "content-type": CONTENT_TYPE })), { waitForTrailers: true });
  res.stream.end(envelope);
}

/**
 * The response of a call that failed, trailers-only (one HEADERS frame that ends the stream):
 * grpc-status, grpc-message (encoded as gRPC's HTTP/2 protocol says) and grpc-status-details-bin
 * (a google.rpc.Status with the error's details, as connect-node encodes it); the error's
 * metadata (Retry-After) too.
 */
export function writeError(res: Http2ServerResponse, err: ConnectError, header?: Headers): void {
  if (!writable(res)) return;
  const status = setTrailerStatus(new Headers(), err);
  status.set("grpc-message", encodeGrpcMessage(err.rawMessage));
  res.stream.respond(headersObject(status, headersObject(header, responseHeaders(res, { "content-type": CONTENT_TYPE }))), { endStream: true });
}

/** The error of a call whose deadline passed before its answer (grpc-status 4). */
export function deadlineExceeded(timeoutMs: number): ConnectError {
  return new ConnectError(`the call's deadline of ${timeoutMs} ms passed before it was answered`, Code.DeadlineExceeded);
}
