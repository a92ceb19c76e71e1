/**
 * The lean path for unary gRPC (issue 13): `application/grpc` and `application/grpc+proto`
 * requests to unary methods, uncompressed or in gzip or brotli, are served here instead of by
 * connect-node, into the same implementations and interceptors (invoke.ts). The server (server.ts) has already done what
 * it does for every call before the body (admission, auth, rate limit, declared length) and reads
 * the body within its bounds; this module is the wire: the request envelope, the deadline, and
 * the response with its trailers, as connect-node writes them.
 *
 * The server serves these calls on the HTTP/2 stream itself, before Node's compatibility layer
 * (Http2ServerRequest/Response) would be built for them: that layer costs about a fifth of the
 * transport's CPU per call. Per call this path builds one buffer for the request and one for the
 * response: no Headers objects unless an interceptor reads them, no AbortController unless the
 * call has a deadline, no async-iterable pipeline, and the message is decoded once
 * (connect-node's path decodes a binary message twice: binary.ts checks it, then Connect reads it).
 * The answers with a Subject (GetSubject, CreateSubject, UpdateSubject) are written by
 * fast-binary.ts's one-buffer writer, the same bytes as toBinary's at a fraction of its CPU.
 *
 * Compression is negotiated as connect-node does (compressionNegotiate): a request in gzip or br
 * (`grpc-encoding`) is decompressed within the method's bound; the answer is compressed with the
 * first encoding of the client's `grpc-accept-encoding` the server has (without that header, the
 * request's), `grpc-encoding` says which, and a message under COMPRESS_MIN_BYTES goes uncompressed
 * (connect-node's default compressMinBytes). grpc-js always sends
 * `grpc-accept-encoding: identity,deflate,gzip`, so its answers over 1 KiB come back in gzip.
 */
import http2, { type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import { type DescMethod, type Message, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Compression } from "@connectrpc/connect/protocol";
import { parseTimeout, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { codeName } from "../ops/trace.js";
import { withRequestInfo } from "./errors.js";
import { malformed } from "./messages.js";
import { ACCEPTED_COMPRESSION, compressedWithoutEncoding } from "./compression.js";
import { fastBinaryWriters } from "./fast-binary.js";
import { encodeGrpcMessage } from "./grpc-message.js";
import { incompleteEnvelope, unknownEnvelopeFlags } from "./requests.js";

/** What connect-node answers a binary gRPC request with. */
const CONTENT_TYPE = "application/grpc+proto";

/** connect-node's default compressMinBytes: a response message smaller than this is not compressed. */
export const COMPRESS_MIN_BYTES = 1024;

/**
 * Whether the lean path serves a request with these headers: a unary method, POST, binary gRPC,
 * no request compression or one the server has (gzip, br), and no Origin (a browser's call: its
 * CORS headers are the compatibility path's). Client streams have a lean path of their own
 * (grpc-stream.ts); anything else is connect-node's: server and bidirectional streaming, gRPC-Web,
 * Connect, JSON, an unknown compression (answered unimplemented with the ones it has).
 */
export function servesLean(method: DescMethod, headers: IncomingHttpHeaders): boolean {
  return method.methodKind === "unary" && leanGrpcRequest(headers);
}

/**
 * A request the lean gRPC paths serve, whatever its method: POST, binary gRPC, no request
 * compression or one the server has (gzip, br), and no Origin (a browser's call: its CORS headers
 * are the compatibility path's).
 */
export function leanGrpcRequest(headers: IncomingHttpHeaders): boolean {
  if (headers[":method"] !== "POST" || headers.origin !== undefined) return false;
  const type = headers["content-type"];
  if (type !== "application/grpc" && type !== "application/grpc+proto") {
    if (typeof type !== "string") return false;
    const t = type.toLowerCase();
    if (t !== "application/grpc" && t !== "application/grpc+proto") return false;
  }
  const encoding = headers["grpc-encoding"];
  return encoding === undefined || encoding === "identity" || byName.has(encoding as string);
}

const byName = new Map<string, Compression>(ACCEPTED_COMPRESSION.map((c) => [c.name, c]));

/** The request's compression (`grpc-encoding`; undefined: identity). servesLean let only known ones in. */
export function requestCompression(headers: IncomingHttpHeaders): Compression | undefined {
  const encoding = headers["grpc-encoding"];
  return encoding === undefined ? undefined : byName.get(encoding as string);
}

/** `grpc-accept-encoding` values seen, with what they choose (null: none); a few distinct values are all any client sends. */
const accepted = new Map<string, Compression | null>();

/**
 * The answer's compression, as connect-node's compressionNegotiate: the first of the client's
 * `grpc-accept-encoding` the server has, or without that header the request's own.
 */
export function responseCompression(headers: IncomingHttpHeaders, request: Compression | undefined): Compression | undefined {
  const accept = headers["grpc-accept-encoding"];
  if (accept === undefined || accept === "") return request;
  const value = String(accept);
  let found = accepted.get(value);
  if (found === undefined) {
    found = null;
    for (const name of value.split(",")) {
      const c = byName.get(name.trim());
      if (c) {
        found = c;
        break;
      }
    }
    if (accepted.size < 64) accepted.set(value, found);
  }
  return found ?? undefined;
}

/** The call's deadline in ms from the `grpc-timeout` header (undefined: none); throws for a malformed one, as Connect does. */
export function grpcDeadline(headers: IncomingHttpHeaders): number | undefined {
  const raw = headers["grpc-timeout"];
  if (raw === undefined) return undefined;
  const t = parseTimeout(typeof raw === "string" ? raw : String(raw), Number.MAX_SAFE_INTEGER);
  if (t.error) throw t.error;
  return t.timeoutMs;
}

/**
 * The request message of a unary call's body: exactly one envelope whose message, decompressed
 * with `compression` (the request's `grpc-encoding`) to at most `readMaxBytes`, decodes as the
 * method's input; a promise only when the message is compressed. The errors are Connect's for the
 * same bodies, except that what the caller's bytes get wrong is invalid_argument with a reason
 * where Connect says internal: a message that does not decode (MALFORMED_PROTOBUF, messages.ts),
 * flags other than 0x00 and 0x01, a compressed message without an encoding or a body that ends
 * inside its envelope (MALFORMED_ENVELOPE), bytes that do not decompress (MALFORMED_COMPRESSION,
 * compression.ts).
 */
export function decodeRequest(method: DescMethod, body: Buffer, compression?: Compression, readMaxBytes = Number.MAX_SAFE_INTEGER): Message | Promise<Message> {
  if (body.length === 0) throw new ConnectError("protocol error: missing input message for unary method", Code.Unimplemented);
  if (body.length < 5) throw incompleteEnvelope();
  const flags = body[0] as number;
  const length = body.readUInt32BE(1);
  if (body.length - 5 < length) throw incompleteEnvelope(`promised ${length} bytes in enveloped message, got ${body.length - 5} bytes`);
  if (body.length - 5 > length) throw new ConnectError("protocol error: received extra input message for unary method", Code.Unimplemented);
  if (flags === 0) return parse(method, body.subarray(5));
  if (flags !== 1) throw unknownEnvelopeFlags(flags);
  if (!compression) throw compressedWithoutEncoding();
  return compression.decompress(body.subarray(5), readMaxBytes).then((bytes) => parse(method, bytes));
}

/** One message of `method`'s input in the binary format; invalid_argument MALFORMED_PROTOBUF if it does not decode. */
export function parse(method: DescMethod, bytes: Uint8Array): Message {
  try {
    return fromBinary(method.input, bytes);
  } catch (err) {
    throw malformed(method.input, err);
  }
}

type OutgoingHeaders = Record<string, string | number>;

function headersObject(h: Headers | undefined, into: OutgoingHeaders): OutgoingHeaders {
  h?.forEach((v, k) => {
    into[k] = v;
  });
  return into;
}

/** The error of a call whose deadline passed before its answer (grpc-status 4). */
export function deadlineExceeded(timeoutMs: number): ConnectError {
  return new ConnectError(`the call's deadline of ${timeoutMs} ms passed before it was answered`, Code.DeadlineExceeded);
}

/**
 * The answer of one lean call, written to its HTTP/2 stream: once, whichever comes first of the
 * method's result, an error, or the deadline.
 */
export class GrpcReply {
  /** Headers the server adds to the answer (the key's rate limit). */
  headers: Record<string, string> | undefined;
  /** The answer's compression (responseCompression): `grpc-encoding` on every answer with a message. */
  compression: Compression | undefined;
  /** The call's admission ticket (limits.ts), given back when its stream closes (server.ts). */
  ticket: { leave(): void } | undefined;
  /** Set once the request body was read to its end. */
  complete = false;
  /** The code answered ("ok", "not_found", …), once answered. */
  code: string | undefined;
  /** The grpc-status answered (0 for ok), once answered. */
  status: number | undefined;
  private answered = false;
  private timer: NodeJS.Timeout | undefined;
  private controller: AbortController | undefined;

  constructor(
    private readonly stream: ServerHttp2Stream,
    /** The request's id (ops/trace.ts): an `x-request-id` header on the answer, and a RequestInfo detail of an error. */
    private readonly requestId: string,
  ) {}

  /** Aborted when the deadline passes (undefined without one). */
  get signal(): AbortSignal | undefined {
    return this.controller?.signal;
  }

  /** Answers deadline_exceeded after `timeoutMs` unless answered before, and aborts the call's signal. */
  deadline(timeoutMs: number): void {
    const controller = new AbortController();
    this.controller = controller;
    this.timer = setTimeout(() => {
      const err = deadlineExceeded(timeoutMs);
      controller.abort(err);
      this.fail(err);
    }, timeoutMs);
    this.stream.once("close", () => clearTimeout(this.timer));
  }

  private begin(): boolean {
    if (this.answered) return false;
    this.answered = true;
    if (this.timer) clearTimeout(this.timer);
    return !this.stream.destroyed && !this.stream.closed && !this.stream.headersSent;
  }

  private base(): OutgoingHeaders {
    const out: OutgoingHeaders = { ":status": 200, "content-type": CONTENT_TYPE, "x-request-id": this.requestId };
    if (this.compression) out["grpc-encoding"] = this.compression.name;
    return this.headers ? Object.assign(out, this.headers) : out;
  }

  /**
   * The call succeeded: headers, one envelope (compressed with `compression` when the message is
   * at least COMPRESS_MIN_BYTES), trailers with grpc-status 0 (and any the method set).
   */
  message(method: DescMethod, message: Message, header?: Headers, trailer?: Headers): void {
    if (!this.begin()) return;
    this.code = "ok";
    this.status = 0;
    const bytes = fastBinaryWriters.get(method.output)?.(message) ?? toBinary(method.output, message);
    const compression = this.compression;
    if (compression === undefined || bytes.length < COMPRESS_MIN_BYTES) {
      this.write(0, bytes, header, trailer);
      return;
    }
    compression.compress(bytes).then(
      (compressed) => this.write(1, compressed, header, trailer),
      () => this.write(0, bytes, header, trailer),
    );
  }

  private write(flags: number, bytes: Uint8Array, header: Headers | undefined, trailer: Headers | undefined): void {
    const stream = this.stream;
    if (stream.destroyed || stream.closed) return; // the client went while the answer was compressed
    const n = bytes.length;
    const envelope = Buffer.allocUnsafe(5 + n);
    envelope[0] = flags;
    envelope[1] = n >>> 24;
    envelope[2] = (n >>> 16) & 0xff;
    envelope[3] = (n >>> 8) & 0xff;
    envelope[4] = n & 0xff;
    envelope.set(bytes, 5);
    stream.respond(headersObject(header, this.base()), WITH_TRAILERS);
    if (trailer) {
      const trailers = headersObject(trailer, { "grpc-status": "0" });
      stream.once("wantTrailers", () => stream.sendTrailers(trailers));
    } else {
      stream.on("wantTrailers", sendOk);
    }
    stream.end(envelope);
  }

  /**
   * The call failed: trailers-only (one HEADERS frame that ends the stream) with grpc-status,
   * grpc-message (encoded as gRPC's HTTP/2 protocol says) and grpc-status-details-bin (a
   * google.rpc.Status with the error's details, as connect-node encodes it); the error's metadata
   * (Retry-After) too. A request still sending its body is then told to stop (RST_STREAM
   * NO_ERROR, sent once the answer is out) without failing the call.
   */
  fail(error: ConnectError): void {
    if (!this.begin()) return;
    const err = withRequestInfo(error, this.requestId);
    this.code = codeName(err.code);
    this.status = err.code;
    const status = setTrailerStatus(new Headers(), err);
    status.set("grpc-message", encodeGrpcMessage(err.rawMessage));
    this.stream.respond(headersObject(status, this.base()), TRAILERS_ONLY);
    if (!this.complete && this.stream.state.remoteClose !== 1) this.stream.close(http2.constants.NGHTTP2_NO_ERROR);
  }
}

const OK_TRAILERS = Object.freeze({ "grpc-status": "0" });

/** The trailers of a call that succeeded with none of its own (`this` is the stream): one function, no closure per call. */
function sendOk(this: ServerHttp2Stream): void {
  this.sendTrailers(OK_TRAILERS);
}

/**
 * respond()'s options (Node copies them). No `date` header: gRPC clients do not read it, and
 * grpc-go and grpc-java send none; it is one header less to encode per call.
 */
const WITH_TRAILERS = Object.freeze({ waitForTrailers: true, sendDate: false });
const TRAILERS_ONLY = Object.freeze({ endStream: true, sendDate: false });
