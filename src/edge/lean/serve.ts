/**
 * The lean gRPC path: a unary binary gRPC call served on its HTTP/2 stream into the same
 * implementations and interceptors as every other call (rpc/invoke.ts), without connect-node's
 * per-call pipeline (bench/README.md, gRPC: about 3× less server CPU). It comes after the admit
 * chain (admit.ts) and answers as connect-node does (test/api/lean-parity runs each case through
 * both); protobuf-es encodes and decodes every message. Without an invoker (LEAN_GRPC=off) every
 * call is connect-node's.
 */
import http2, { type IncomingHttpHeaders, type Http2ServerRequest, type Http2ServerResponse, type ServerHttp2Stream } from "node:http2";
import { type DescMethod, type Message, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues } from "@connectrpc/connect";
import { type Compression, compressionNegotiate, encodeEnvelope } from "@connectrpc/connect/protocol";
import { parseTimeout, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import type { Caller } from "../../billing/tenancy.js";
import { bodyLimit } from "../../limits.js";
import type { Logger } from "../../log.js";
import type { RequestTrace } from "../../ops/trace.js";
import { preAuthKey } from "../../rpc/auth.js";
import { ACCEPTED_COMPRESSION, compressedWithoutEncoding } from "../../rpc/compression.js";
import { traceKey } from "../../rpc/context.js";
import { publicError, withRequestInfo } from "../../rpc/errors.js";
import { encodeGrpcMessage } from "../../rpc/grpc-message.js";
import type { Invoker } from "../../rpc/invoke.js";
import { malformed } from "../../rpc/messages.js";
import { headersOf, incompleteEnvelope, unknownEnvelopeFlags } from "../../rpc/requests.js";
import type { Responder } from "../admit.js";
import { readAll } from "../body.js";

/**
 * Whether the lean path serves a call of `method` with these headers: unary, POST, binary gRPC, a
 * request compression the server has, no Origin (a browser's call: its CORS is connect-node's).
 * Everything else is connect-node's, streams too (bench/README.md, gRPC, measured the ingest
 * stream under the 2× rule).
 */
export function servesLean(method: DescMethod, headers: IncomingHttpHeaders): boolean {
  if (method.methodKind !== "unary" || headers[":method"] !== "POST" || headers.origin !== undefined) return false;
  const type = String(headers["content-type"]).toLowerCase();
  const encoding = headers["grpc-encoding"];
  return (type === "application/grpc" || type === "application/grpc+proto") && (encoding === undefined || encoding === "identity" || ACCEPTED_COMPRESSION.some((c) => c.name === encoding));
}

/** connect-node's default compressMinBytes (grpc-js accepts gzip, so its answers over 1 KiB come back compressed). */
const COMPRESS_MIN_BYTES = 1024;

/** respond()'s options: no `date` header (gRPC clients do not read it; grpc-go and grpc-java send none). */
const WITH_TRAILERS = Object.freeze({ waitForTrailers: true, sendDate: false });
const TRAILERS_ONLY = Object.freeze({ endStream: true, sendDate: false });

/** The method's answer, with the headers and trailers it set. */
type Outcome = Awaited<ReturnType<Invoker>>;

export interface LeanParts {
  invoke: Invoker;
  log: Logger;
  path: string;
  method: DescMethod;
  req: Http2ServerRequest;
  res: Http2ServerResponse;
  trace: RequestTrace;
}

/**
 * One lean call: answered once on its stream, whichever comes first of the method's result, an
 * error, or the `grpc-timeout` deadline (which also aborts the call's signal).
 */
class LeanCall implements Responder {
  private readonly stream: ServerHttp2Stream;
  private extra: Record<string, string> | undefined;
  /** The answer's compression, negotiated as connect-node does. */
  private compression: Compression | null = null;
  private answered = false;
  /** The grpc-status answered, once answered. */
  private status: number | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly c: LeanParts) {
    const stream = c.res.stream;
    this.stream = stream;
    // The compatibility response of this stream would send trailers of its own when asked.
    stream.removeAllListeners("wantTrailers");
    // The code of the metrics and the access line (observe.ts): what was answered, unless the
    // client reset the stream first (canceled, whatever the call then said) or this deadline answered.
    c.trace.grpcStatus = () => (this.status === undefined || (stream.aborted && this.status !== Code.DeadlineExceeded) ? undefined : String(this.status));
  }

  refuse(err: ConnectError): void {
    this.fail(publicError(err, this.c.log, this.c.path, this.c.trace.id));
  }

  headers(h: Record<string, string>): void {
    this.extra = h;
  }

  serve(caller: Caller | undefined, body: AsyncIterable<Uint8Array>): void {
    const { log, path, trace } = this.c;
    this.call(caller, body)
      .then(
        (protocolError) => protocolError && this.fail(protocolError),
        (err) => this.fail(publicError(err, log, path, trace.id)),
      )
      .catch((err) => {
        // The answer could not even be written.
        if (this.stream.aborted) log.debug("rpc: the client went away", { rpc: path, request_id: trace.id });
        else log.warn("rpc stream ended early", { rpc: path, request_id: trace.id, err });
        if (!this.stream.destroyed) this.stream.destroy();
      });
  }

  /**
   * Reads, decodes, invokes and answers the call. Returns the errors connect-node answers in its
   * own words (a malformed `grpc-timeout`, no or more than one message), without the details
   * (reason, RequestInfo) the server's own errors carry; throws the others.
   */
  private async call(caller: Caller | undefined, body: AsyncIterable<Uint8Array>): Promise<ConnectError | undefined> {
    const { method, req, trace } = this.c;
    const header = (name: string) => (req.headers[name] === undefined ? null : String(req.headers[name]));
    const timeout = parseTimeout(header("grpc-timeout"), Number.MAX_SAFE_INTEGER);
    if (timeout.error) return timeout.error;
    let signal: AbortSignal | undefined;
    if (timeout.timeoutMs !== undefined) {
      trace.deadlineMs = timeout.timeoutMs;
      signal = this.deadline(timeout.timeoutMs);
    }
    const { request, response } = compressionNegotiate(ACCEPTED_COMPRESSION, header("grpc-encoding"), header("grpc-accept-encoding"), "grpc-accept-encoding");
    this.compression = response;
    const whole = await readAll(body);
    // Exactly one envelope; what the caller's bytes get wrong is invalid_argument with a reason (rpc/messages.ts refuses the same on connect-node's path).
    if (whole.length === 0) return new ConnectError("protocol error: missing input message for unary method", Code.Unimplemented);
    if (whole.length < 5) throw incompleteEnvelope();
    const flags = whole[0] as number;
    const length = whole.readUInt32BE(1);
    if (whole.length - 5 < length) throw incompleteEnvelope(`promised ${length} bytes in enveloped message, got ${whole.length - 5} bytes`);
    if (whole.length - 5 > length) return new ConnectError("protocol error: received extra input message for unary method", Code.Unimplemented);
    let bytes: Uint8Array = whole.subarray(5);
    if (flags === 1) {
      if (!request) throw compressedWithoutEncoding();
      bytes = await request.decompress(bytes, bodyLimit(method));
    } else if (flags !== 0) throw unknownEnvelopeFlags(flags);
    let message: Message;
    try {
      message = fromBinary(method.input, bytes);
    } catch (err) {
      throw malformed(method.input, err);
    }
    const contextValues = createContextValues().set(preAuthKey, { caller }).set(traceKey, trace);
    const out = await this.c.invoke({
      method,
      message,
      contextValues,
      protocolName: "grpc",
      requestMethod: "POST",
      url: this.c.path,
      header: () => headersOf(req.headers),
      signal,
      timeoutMs: timeout.timeoutMs,
    });
    this.succeed(out);
    return undefined;
  }

  /** Answers deadline_exceeded after `timeoutMs` unless answered before; the returned signal is aborted then. */
  private deadline(timeoutMs: number): AbortSignal {
    const controller = new AbortController();
    this.timer = setTimeout(() => {
      const err = new ConnectError(`the call's deadline of ${timeoutMs} ms passed before it was answered`, Code.DeadlineExceeded);
      controller.abort(err);
      this.fail(withRequestInfo(err, this.c.trace.id));
    }, timeoutMs);
    this.stream.once("close", () => clearTimeout(this.timer));
    return controller.signal;
  }

  /** Whether this is the call's one answer and the stream can still take it. */
  private begin(): boolean {
    if (this.answered) return false;
    this.answered = true;
    clearTimeout(this.timer);
    return !this.stream.destroyed && !this.stream.closed && !this.stream.headersSent;
  }

  /** The answer's headers; `encoded`: it carries a message, in the answer's compression. */
  private base(encoded: boolean): Record<string, string | number> {
    const out: Record<string, string | number> = { ":status": 200, "content-type": "application/grpc+proto", "x-request-id": this.c.trace.id };
    if (encoded && this.compression) out["grpc-encoding"] = this.compression.name;
    return this.extra ? Object.assign(out, this.extra) : out;
  }

  /** Success: headers, one envelope (compressed when the client accepts it and it is large enough), trailers with grpc-status 0 and any the method set. */
  private succeed(out: Outcome): void {
    if (!this.begin()) return;
    this.status = 0;
    const bytes = toBinary(this.c.method.output, out.message);
    const compression = bytes.length < COMPRESS_MIN_BYTES ? null : this.compression;
    if (!compression) this.write(0, bytes, out);
    else
      compression.compress(bytes).then(
        (compressed) => this.write(1, compressed, out),
        () => this.write(0, bytes, out),
      );
  }

  private write(flags: number, bytes: Uint8Array, out: Outcome): void {
    const stream = this.stream;
    if (stream.destroyed || stream.closed) return; // the client went while the answer was compressed
    stream.respond(Object.assign(this.base(true), Object.fromEntries(out.header)), WITH_TRAILERS);
    const trailers = { "grpc-status": "0", ...Object.fromEntries(out.trailer) };
    stream.once("wantTrailers", () => stream.sendTrailers(trailers));
    stream.end(encodeEnvelope(flags, bytes));
  }

  /**
   * Failure: trailers-only (one HEADERS frame ending the stream) with the error's metadata
   * (Retry-After), grpc-status, grpc-message as gRPC's HTTP/2 protocol encodes it, and
   * grpc-status-details-bin as connect-node encodes it. A request still sending its body is then
   * told to stop (RST_STREAM NO_ERROR) without failing the call.
   */
  private fail(err: ConnectError): void {
    if (!this.begin()) return;
    this.status = err.code;
    const status = setTrailerStatus(new Headers(), err);
    status.set("grpc-message", encodeGrpcMessage(err.rawMessage));
    this.stream.respond(Object.assign(this.base(false), Object.fromEntries(status)), TRAILERS_ONLY);
    if (this.stream.state.remoteClose !== 1) this.stream.close(http2.constants.NGHTTP2_NO_ERROR);
  }
}

export const leanResponder = (parts: LeanParts): Responder => new LeanCall(parts);
