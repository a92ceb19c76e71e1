/**
 * Every request message is checked on its way into Connect (Connect, gRPC and gRPC-Web), so that
 * bad input gets the same answer as on REST, in the caller's protocol:
 *
 * - JSON (`application/json`, and each envelope of `+json`) is read by the one JSON reader the
 *   REST bridge uses (src/rpc/json.ts): the same code, ErrorInfo reason and BadRequest field paths
 *   for a wrong JSON type, malformed JSON, bytes that are not UTF-8 or an instant that does not
 *   read (`{"name":5}` is INVALID_FIELD naming `name` everywhere, not protobuf-es's decode message).
 *   What passes is handed on as the reader's plain proto3 JSON (decimals as written, Timestamps as
 *   canonical UTC text), for Connect's fromJson; per-item instants that did not read are noted in
 *   the call's context (DeferredProblems) for the method to reject their event.
 * - Binary that does not decode is `invalid_argument` with reason MALFORMED_PROTOBUF, naming the
 *   message type (Connect itself calls it `internal`, a 500 / grpc-status 13).
 *
 * Each RPC handler is wrapped: the body's iterator checks each message as it arrives (a stream's
 * one at a time, nothing read earlier than Connect reads it) and throws the error for the first bad
 * one, which Connect answers as it is. A compressed message (gzip or brotli: a compressed Connect
 * unary body, or an envelope flagged compressed) is checked decompressed, within the same bound
 * Connect applies after decompression: binary is handed on as sent, JSON as the reader's JSON
 * (recompressed for a unary body, uncompressed in its envelope). Bodies beyond the size bound and
 * messages too large decompressed are handed on unchecked, for Connect to refuse in its own words.
 *
 * What the caller's bytes get wrong below the message is refused here too, invalid_argument with
 * a reason where Connect would answer internal (a 500 / grpc-status 13): bytes that do not
 * decompress as the named encoding (MALFORMED_COMPRESSION), envelope flags other than 0x00 and
 * 0x01, 0x01 in a request that names no compression, or a body that ends inside an envelope
 * (MALFORMED_ENVELOPE).
 *
 * A Connect GET carries its message in the query string, which Connect decodes before any
 * interceptor runs: the message is checked here the same way (base64 that does not decode is
 * MALFORMED_BASE64), and a GET the server already refused (no key, say: the call's PreAuth
 * holds the error) is answered with that refusal before its message is looked at.
 *
 * "Connect" here is connect-node 2.1.2 (@connectrpc/connect 2.1.2): what it does before any
 * interceptor runs (a binary message that does not parse is `internal`, the GET query's
 * parameters, the bound applied after decompression, its unary error answer) is that version's,
 * to check again on an upgrade; test/api/bad-encoding*.test.ts and error-parity.test.ts pin it.
 */
import { type DescMessage, type DescMethod, type JsonWriteOptions, fromBinary } from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { ConnectError, type ConnectRouter, createContextValues } from "@connectrpc/connect";
import { type UniversalHandler, type UniversalServerRequest, type UniversalServerResponse, createAsyncIterable } from "@connectrpc/connect/protocol";
import { codeToHttpStatus, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { InvalidArgumentError } from "../billing/errors.js";
import { type RequestTrace, codeName } from "../ops/trace.js";
import { preAuthKey } from "./auth.js";
import { DeferredProblems, deferredKey, traceKey } from "./context.js";
import { compressedWithoutEncoding, decompressed, recompressed } from "./compression.js";
import { malformedRequest, toConnectError, withRequestInfo } from "./errors.js";
import { invalidFields, readJsonMessage } from "./json.js";
import { MALFORMED_BASE64 } from "./grpc-wire.js";
import { contentType, envelope, envelopeLength, incompleteEnvelope, unknownEnvelopeFlags } from "./requests.js";

/** The reason of a request whose binary protobuf does not decode. */
export const MALFORMED_PROTOBUF = "MALFORMED_PROTOBUF";

/** Content types whose body is one message (Connect unary). */
const WHOLE_BINARY = new Set(["application/proto"]);
const WHOLE_JSON = new Set(["application/json"]);
/** Content types whose body is messages in envelopes (5 bytes: flags, big-endian length). */
const ENVELOPED_BINARY = new Set(["application/connect+proto", "application/grpc", "application/grpc+proto", "application/grpc-web", "application/grpc-web+proto"]);
const ENVELOPED_JSON = new Set(["application/connect+json", "application/grpc+json", "application/grpc-web+json"]);

/** Checks one message (the `index`-th of the request) and returns the bytes to hand on; throws a ConnectError. */
type Check = (bytes: Uint8Array, index: number) => Uint8Array;

export function malformed(desc: DescMessage, err: unknown): ConnectError {
  const why = err instanceof Error ? err.message : String(err);
  return malformedRequest(`the request is not a valid ${desc.typeName} in the protobuf binary format: ${why}`, MALFORMED_PROTOBUF, { message_type: desc.typeName });
}

/** Binary: decodes as `desc` (the way Connect will), handed on unchanged. */
function binaryCheck(desc: DescMessage): Check {
  return (bytes) => {
    try {
      fromBinary(desc, bytes);
    } catch (err) {
      throw malformed(desc, err);
    }
    return bytes;
  };
}

const encoder = new TextEncoder();

/** JSON: read by the one JSON reader; handed on as its proto3 JSON; deferred problems noted in `problems`. */
function jsonCheck(desc: DescMessage, problems: DeferredProblems): Check {
  return (bytes, index) => {
    let checked: ReturnType<typeof readJsonMessage>;
    try {
      checked = readJsonMessage(desc, bytes);
    } catch (err) {
      throw err instanceof InvalidArgumentError ? toConnectError(err) : err;
    }
    if (checked.violations.length > 0) throw toConnectError(invalidFields(checked.violations));
    problems.add(index, checked.deferred);
    return encoder.encode(JSON.stringify(checked.json));
  };
}

/**
 * `check` for a message compressed with `encoding`: decompressed (at most `maxBytes`) and checked;
 * binary is handed on compressed as sent, rewritten JSON as `rewrite` makes it. A message that does
 * not decompress is refused (MALFORMED_COMPRESSION); one too large decompressed, or in an encoding
 * the server lacks, is handed on as it is, for Connect to refuse.
 */
function compressedCheck(check: Check, encoding: string, maxBytes: number, rewrite: (plain: Uint8Array) => Uint8Array): Check {
  return (bytes, index) => {
    const plain = decompressed(bytes, encoding, maxBytes);
    if (plain === undefined || plain === "too large") return bytes;
    const checked = check(plain, index);
    return checked === plain ? bytes : rewrite(checked);
  };
}

/** The chunks as one buffer (the one chunk itself, uncopied). */
const concat = (chunks: Uint8Array[], size: number): Uint8Array => (chunks.length === 1 ? (chunks[0] as Uint8Array) : Buffer.concat(chunks, size));

/** Connect unary: the whole body is the message. Over `maxBytes` it is handed on for Connect to refuse. */
async function* wholeChecked(body: AsyncIterable<Uint8Array>, check: Check, maxBytes: number): AsyncIterable<Uint8Array> {
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
  yield check(concat(chunks, size), 0);
}

/**
 * Enveloped messages: each complete uncompressed data envelope (flags 0) is checked and yielded
 * (rewritten when the check rewrites it) as soon as it is whole. An envelope announced beyond
 * `maxBytes` ends the checking: the rest goes on unread for Connect to refuse.
 */
async function* envelopesChecked(body: AsyncIterable<Uint8Array>, check: Check, maxBytes: number, compressed?: Check): AsyncIterable<Uint8Array> {
  let pending: Uint8Array[] = [];
  let size = 0;
  let passThrough = false;
  let index = 0;
  for await (const chunk of body) {
    if (passThrough) {
      yield chunk;
      continue;
    }
    pending.push(chunk);
    size += chunk.byteLength;
    if (size < 5) continue;
    // An envelope not yet whole waits in the chunks it came in, joined once when whole (joining
    // at every chunk copied a large message once per chunk); one past the bound goes on at once.
    if (pending.length > 1) {
      const length = envelopeLength(pending);
      if (length <= maxBytes && size < 5 + length) continue;
    }
    let buf = concat(pending, size);
    let at = 0;
    // The envelopes handed on as sent are yielded together, as one run of the buffer: a stream's
    // small messages then pass the generators between here and Connect's own envelope reader once
    // per chunk read, not once each (the same bytes; a bad message still throws before any of its chunk).
    const out: Uint8Array[] = [];
    let runStart = 0;
    const endRun = (to: number) => {
      if (to > runStart) out.push(buf.subarray(runStart, to));
    };
    while (buf.byteLength - at >= 5) {
      const flags = buf[at] as number;
      const length = (buf[at + 1] as number) * 0x1000000 + (((buf[at + 2] as number) << 16) | ((buf[at + 3] as number) << 8) | (buf[at + 4] as number));
      if (length > maxBytes) {
        passThrough = true;
        break;
      }
      if (buf.byteLength - at < 5 + length) break;
      const data = buf.subarray(at + 5, at + 5 + length);
      // Refused here as the lean gRPC paths refuse them: no request sends other flags (0x80 is a
      // gRPC-Web answer's trailers, 0x02 a Connect answer's end), nor a compressed message unnamed.
      if (flags > 1) throw unknownEnvelopeFlags(flags);
      if (flags === 1 && !compressed) throw compressedWithoutEncoding();
      const checked = flags === 0 ? check(data, index++) : (compressed as Check)(data, index++);
      if (checked !== data) {
        // A rewritten message goes on uncompressed (flag 0), which every protocol allows.
        endRun(at);
        out.push(envelope(0, checked));
        runStart = at + 5 + length;
      }
      at += 5 + length;
    }
    endRun(at);
    for (const o of out) yield o;
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
  if (size > 0) throw incompleteEnvelope();
}

/**
 * The body, with the request's id (ops/trace.ts) added as a RequestInfo detail to the error that
 * reading or checking it throws (Connect answers that error itself, before any interceptor), and
 * its code recorded on the trace.
 */
async function* traced(body: AsyncIterable<Uint8Array>, trace: RequestTrace): AsyncIterable<Uint8Array> {
  try {
    yield* body;
  } catch (err) {
    if (!(err instanceof ConnectError)) throw err;
    const out = withRequestInfo(err, trace.id);
    trace.code = codeName(out.code);
    throw out;
  }
}

/**
 * A Connect unary error answer, as Connect writes one (its status, the error JSON, the error's
 * metadata as headers), with the request's id: for a GET answered here, before Connect.
 */
function connectErrorResponse(error: ConnectError, trace: RequestTrace | undefined, jsonOptions: Partial<JsonWriteOptions> | undefined): UniversalServerResponse {
  const err = trace ? withRequestInfo(error, trace.id) : error;
  if (trace) trace.code = codeName(err.code);
  const body = errorToJsonBytes(err, jsonOptions);
  const header = new Headers({ "content-type": "application/json" });
  err.metadata.forEach((value, key) => {
    header.set(key, value);
  });
  header.set("content-length", String(body.byteLength));
  return { status: codeToHttpStatus(err.code), header, body: createAsyncIterable([body]) };
}

const decoder = new TextDecoder();

/**
 * A Connect GET (see above): answered with the call's refusal if the server made one; else its
 * query-string message read as Connect will read it (`base64`, `compression`, `encoding`) and
 * checked like a POST's. Binary goes on as sent; JSON as the reader's JSON, uncompressed. What
 * Connect refuses in its own words (a method without GET, an unknown encoding or compression, a
 * message too large) goes on unchecked.
 */
function checkedGet(handler: UniversalHandler, req: UniversalServerRequest, binary: Check, maxBytes: number, jsonOptions: Partial<JsonWriteOptions> | undefined): Promise<UniversalServerResponse> {
  const trace = req.contextValues?.get(traceKey);
  const pre = req.contextValues?.get(preAuthKey);
  if (pre !== undefined && "error" in pre) return Promise.resolve(connectErrorResponse(pre.error, trace, jsonOptions));
  if (handler.method.idempotency !== MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS) return handler(req);
  const url = new URL(req.url);
  const query = url.searchParams;
  const encoding = query.get("encoding");
  if (encoding !== "proto" && encoding !== "json") return handler(req);
  try {
    const message = query.get("message") ?? "";
    let bytes: Uint8Array;
    if (query.get("base64") === "1") {
      try {
        bytes = base64Decode(message);
      } catch {
        throw malformedRequest("the request's `message` parameter is not valid base64 (base64=1)", MALFORMED_BASE64);
      }
    } else {
      bytes = encoder.encode(message);
    }
    const compression = query.get("compression");
    if (compression !== null && compression !== "identity") {
      const plain = decompressed(bytes, compression, maxBytes);
      if (plain === undefined || plain === "too large") return handler(req);
      bytes = plain;
    }
    if (encoding === "proto") {
      binary(bytes, 0);
      return handler(req);
    }
    const problems = new DeferredProblems();
    const checked = jsonCheck(handler.method.input, problems)(bytes, 0);
    query.set("message", decoder.decode(checked));
    query.delete("base64");
    query.delete("compression");
    const contextValues = req.contextValues ?? createContextValues();
    contextValues.set(deferredKey, problems);
    return handler({ ...req, url: url.toString(), contextValues });
  } catch (err) {
    if (!(err instanceof ConnectError)) throw err;
    return Promise.resolve(connectErrorResponse(err, trace, jsonOptions));
  }
}

/**
 * The handler, with its request messages checked as they reach it (see above). `jsonOptions`:
 * the router's, for the error JSON of a GET answered here.
 */
export function checkedHandler(handler: UniversalHandler, maxBytes: number, jsonOptions?: Partial<JsonWriteOptions>): UniversalHandler {
  const desc = handler.method.input;
  const binary = binaryCheck(desc);
  const wrapped = (req: UniversalServerRequest) => {
    if (req.method === "GET") return checkedGet(handler, req, binary, maxBytes, jsonOptions);
    const body = req.body;
    if (req.method !== "POST" || body === null || typeof body !== "object" || !(Symbol.asyncIterator in body)) return handler(req);
    const trace = req.contextValues?.get(traceKey);
    const out = (b: AsyncIterable<Uint8Array>) => (trace ? traced(b, trace) : b);
    const type = contentType(req);
    const iterable = body as AsyncIterable<Uint8Array>;
    const whole = WHOLE_BINARY.has(type) || WHOLE_JSON.has(type);
    const enveloped = ENVELOPED_BINARY.has(type) || ENVELOPED_JSON.has(type);
    if (!whole && !enveloped) return handler(trace ? { ...req, body: out(iterable) } : req);
    const encoding = (whole ? req.header.get("content-encoding") : (req.header.get("grpc-encoding") ?? req.header.get("connect-content-encoding")))?.trim().toLowerCase() ?? "identity";
    const isJson = WHOLE_JSON.has(type) || ENVELOPED_JSON.has(type);
    let check = binary;
    let header = req.header;
    let contextValues = req.contextValues;
    if (isJson) {
      const problems = new DeferredProblems();
      contextValues = req.contextValues ?? createContextValues();
      contextValues.set(deferredKey, problems);
      check = jsonCheck(desc, problems);
      header = new Headers(req.header);
      header.delete("content-length"); // the JSON handed on is not the JSON sent
    }
    const plain = (b: Uint8Array) => b;
    if (whole) {
      // A compressed unary body stays compressed (its header says so): rewritten JSON is recompressed.
      const c = encoding === "identity" ? check : compressedCheck(check, encoding, maxBytes, (b) => recompressed(b, encoding));
      return handler({ ...req, header, contextValues, body: out(wholeChecked(iterable, c, maxBytes)) });
    }
    const c = encoding === "identity" ? undefined : compressedCheck(check, encoding, maxBytes, plain);
    return handler({ ...req, header, contextValues, body: out(envelopesChecked(iterable, check, maxBytes, c)) });
  };
  return Object.assign(wrapped, handler) as UniversalHandler;
}

/**
 * Wraps every handler of the router with checkedHandler (in place: the server reads router.handlers).
 * `maxBytes`: the bound of every message, or of each method's (the readMaxBytes Connect applies to
 * it): a message within it that the body ends inside of is refused here, one beyond it left to Connect.
 */
export function checkRequestMessages(router: ConnectRouter, maxBytes: number | ((method: DescMethod) => number), jsonOptions?: Partial<JsonWriteOptions>): void {
  const wrapped = router.handlers.map((h) => checkedHandler(h, typeof maxBytes === "number" ? maxBytes : maxBytes(h.method), jsonOptions));
  router.handlers.splice(0, router.handlers.length, ...wrapped);
}
