/**
 * The answer of one lean gRPC call, written on its HTTP/2 stream as connect-node writes it: once,
 * whichever comes first of the method's result, an error, or the deadline. The message is encoded
 * by protobuf-es (`toBinary`), compressed when the client accepts it and it is at least
 * COMPRESS_MIN_BYTES (connect-node's default compressMinBytes; grpc-js always sends
 * `grpc-accept-encoding: identity,deflate,gzip`, so its answers over 1 KiB come back in gzip).
 */
import http2, { type ServerHttp2Stream } from "node:http2";
import { type DescMethod, type Message, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Compression } from "@connectrpc/connect/protocol";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { codeName } from "../../ops/trace.js";
import { withRequestInfo } from "../../rpc/errors.js";
import { encodeGrpcMessage } from "../../rpc/grpc-message.js";
import { envelope } from "../../rpc/requests.js";
import { isProtocolError } from "./wire.js";

/** What connect-node answers a binary gRPC request with. */
const CONTENT_TYPE = "application/grpc+proto";

/** connect-node's default compressMinBytes: a response message smaller than this is not compressed. */
export const COMPRESS_MIN_BYTES = 1024;

type OutgoingHeaders = Record<string, string | number>;

function headersObject(h: Headers | undefined, into: OutgoingHeaders): OutgoingHeaders {
  h?.forEach((v, k) => {
    into[k] = v;
  });
  return into;
}

/**
 * respond()'s options (Node copies them). No `date` header: gRPC clients do not read it, and
 * grpc-go and grpc-java send none.
 */
const WITH_TRAILERS = Object.freeze({ waitForTrailers: true, sendDate: false });
const TRAILERS_ONLY = Object.freeze({ endStream: true, sendDate: false });

export class GrpcReply {
  /** Headers the server adds to the answer (the key's rate limit). */
  headers: Record<string, string> | undefined;
  /** The answer's compression: `grpc-encoding` on every answer with a message. */
  compression: Compression | undefined;
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
      const err = new ConnectError(`the call's deadline of ${timeoutMs} ms passed before it was answered`, Code.DeadlineExceeded);
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

  /** The answer's headers; `encoded`: it carries a message (in the answer's compression). */
  private base(encoded: boolean): OutgoingHeaders {
    const out: OutgoingHeaders = { ":status": 200, "content-type": CONTENT_TYPE, "x-request-id": this.requestId };
    if (encoded && this.compression) out["grpc-encoding"] = this.compression.name;
    return this.headers ? Object.assign(out, this.headers) : out;
  }

  /** The call succeeded: headers, one envelope, trailers with grpc-status 0 and any the method set. */
  message(method: DescMethod, message: Message, header: Headers, trailer: Headers): void {
    if (!this.begin()) return;
    this.code = "ok";
    this.status = 0;
    const bytes = toBinary(method.output, message);
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

  private write(flags: number, bytes: Uint8Array, header: Headers, trailer: Headers): void {
    const stream = this.stream;
    if (stream.destroyed || stream.closed) return; // the client went while the answer was compressed
    stream.respond(headersObject(header, this.base(true)), WITH_TRAILERS);
    const trailers = headersObject(trailer, { "grpc-status": "0" });
    stream.once("wantTrailers", () => stream.sendTrailers(trailers));
    stream.end(envelope(flags, bytes));
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
    // The request's id as a RequestInfo detail, as connect-node's path adds it (rpc/errors.ts),
    // except to the protocol errors connect-node answers in its own words (wire.ts protocolError).
    const err = isProtocolError(error) ? error : withRequestInfo(error, this.requestId);
    this.code = codeName(err.code);
    this.status = err.code;
    const status = setTrailerStatus(new Headers(), err);
    status.set("grpc-message", encodeGrpcMessage(err.rawMessage));
    this.stream.respond(headersObject(status, this.base(false)), TRAILERS_ONLY);
    if (!this.complete && this.stream.state.remoteClose !== 1) this.stream.close(http2.constants.NGHTTP2_NO_ERROR);
  }
}
