/**
 * Every request message is checked on its way into Connect (Connect, gRPC and gRPC-Web), so that
 * bad input gets the same answer as on REST, in the caller's protocol:
 * - JSON (`application/json`, each envelope of `+json`) is read by the one JSON reader (json.ts):
 *   the same code, reason and field paths as on REST (`{"name":5}` is INVALID_FIELD naming `name`,
 *   not protobuf-es's decode message). What passes goes on as the reader's proto3 JSON, for
 *   Connect's fromJson; per-item instants that did not read are noted in the call's DeferredProblems.
 * - Binary that does not decode is `invalid_argument` MALFORMED_PROTOBUF (Connect: `internal`).
 * - A compressed message (a Connect unary body, or an envelope flagged 0x01) is checked decompressed
 *   within the bound Connect applies after decompression; binary goes on as sent, JSON as the
 *   reader's (recompressed for a unary body). Bytes that do not decompress are MALFORMED_COMPRESSION;
 *   envelope flags other than 0x00 and 0x01, 0x01 with no compression named, or a body that ends
 *   inside an envelope are MALFORMED_ENVELOPE (Connect: `internal`, a 500 / grpc-status 13). Bodies
 *   and messages beyond the bound go on unchecked, for Connect to refuse in its own words.
 * - A Connect GET's query-string message (which Connect decodes before any interceptor) is checked
 *   the same way (bad base64 is MALFORMED_BASE64); a GET the server already refused (its PreAuth holds
 *   the error) is answered with that refusal first.
 * Each message is checked as Connect reads it (a stream's one at a time); the first bad one throws.
 * "Connect" is connect-node 2.1.2: what it does before any interceptor runs is that version's, to
 * check again on an upgrade (test/api/bad-encoding*.test.ts and error-parity.test.ts pin it).
 */
import { brotliCompressSync, gzipSync } from "node:zlib";
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
import { compressedWithoutEncoding, decompressed } from "./compression.js";
import { malformedRequest, toConnectError, withRequestInfo } from "./errors.js";
import { invalidFields, readJsonMessage } from "./json.js";
import { contentType, envelope, incompleteEnvelope, unknownEnvelopeFlags } from "./requests.js";

/** The bodies checked: one message (Connect unary: `application/proto`, `/json`), or messages in envelopes (5 bytes: flags, big-endian length). */
const BODY = /^application\/(?:(proto|json)|connect\+(?:proto|json)|grpc(?:-web)?(?:\+(?:proto|json))?)$/;

/** Checks one message (the `index`-th of the request) and returns the bytes to hand on; throws a ConnectError. */
type Check = (bytes: Uint8Array, index: number) => Uint8Array;

export function malformed(desc: DescMessage, err: unknown): ConnectError {
  const why = err instanceof Error ? err.message : String(err);
  return malformedRequest(`the request is not a valid ${desc.typeName} in the protobuf binary format: ${why}`, "MALFORMED_PROTOBUF", { message_type: desc.typeName });
}

const encoder = new TextEncoder();

/**
 * Binary (no `problems`): decodes as `desc` (the way Connect will), handed on unchanged. JSON: read
 * by the one JSON reader, handed on as its proto3 JSON, deferred problems noted in `problems`.
 */
function checkOf(desc: DescMessage, problems?: DeferredProblems): Check {
  return (bytes, index) => {
    try {
      if (!problems) {
        fromBinary(desc, bytes);
        return bytes;
      }
      const checked = readJsonMessage(desc, bytes);
      if (checked.violations.length > 0) throw invalidFields(checked.violations);
      problems.add(index, checked.deferred);
      return encoder.encode(JSON.stringify(checked.json));
    } catch (err) {
      if (!problems) throw malformed(desc, err);
      throw err instanceof InvalidArgumentError ? toConnectError(err) : err;
    }
  };
}

/** The request's context values, with `problems` for its JSON messages' deferred problems. */
function withProblems(req: UniversalServerRequest, problems: DeferredProblems) {
  const contextValues = req.contextValues ?? createContextValues();
  contextValues.set(deferredKey, problems);
  return contextValues;
}

/** `check` of a message compressed with `encoding` (see above); rewritten JSON goes on as `rewrite` makes it. */
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

/** The data length in the header of the envelope that starts `parts` (chunks of at least 5 bytes in all). */
function envelopeLength(parts: readonly Uint8Array[]): number {
  let length = 0;
  let i = 0;
  for (const part of parts) {
    for (const byte of part) {
      if (i > 0) length = length * 256 + byte;
      if (++i === 5) return length;
    }
  }
  return length;
}

/**
 * Enveloped messages: each complete data envelope is checked (`compressed` checks one flagged 0x01)
 * and yielded, rewritten when the check rewrites it, as soon as it is whole. An envelope announced
 * beyond `maxBytes` ends the checking: the rest goes on unread for Connect to refuse.
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
    // Envelopes handed on as sent are yielded together, as one run of the buffer, so a stream's
    // small messages pass the generators up to Connect once per chunk, not once each.
    const out: Uint8Array[] = [];
    let runStart = 0;
    while (buf.byteLength - at >= 5) {
      const flags = buf[at] as number;
      const length = new DataView(buf.buffer, buf.byteOffset + at + 1, 4).getUint32(0);
      if (length > maxBytes) {
        passThrough = true;
        break;
      }
      if (buf.byteLength - at < 5 + length) break;
      const data = buf.subarray(at + 5, at + 5 + length);
      // As the lean gRPC paths refuse them: no request sends other flags (0x80 is a gRPC-Web
      // answer's trailers, 0x02 a Connect answer's end), nor a compressed message unnamed.
      if (flags > 1) throw unknownEnvelopeFlags(flags);
      if (flags === 1 && !compressed) throw compressedWithoutEncoding();
      const checked = (flags === 0 ? check : (compressed as Check))(data, index++);
      if (checked !== data) {
        // A rewritten message goes on uncompressed (flag 0), which every protocol allows.
        if (at > runStart) out.push(buf.subarray(runStart, at));
        out.push(envelope(0, checked));
        runStart = at + 5 + length;
      }
      at += 5 + length;
    }
    if (at > runStart) out.push(buf.subarray(runStart, at));
    for (const o of out) yield o;
    buf = buf.subarray(at);
    if (passThrough && buf.byteLength > 0) yield buf;
    pending = !passThrough && buf.byteLength > 0 ? [buf] : [];
    size = passThrough ? 0 : buf.byteLength;
  }
  if (size > 0) throw incompleteEnvelope();
}

/** `err` with the request's id (ops/trace.ts) as a RequestInfo detail, and its code recorded on the trace. */
function traced(err: ConnectError, trace: RequestTrace | undefined): ConnectError {
  if (!trace) return err;
  const out = withRequestInfo(err, trace.id);
  trace.code = codeName(out.code);
  return out;
}

/** The body, with the error reading or checking it throws traced (Connect answers that error itself, before any interceptor). */
async function* tracedBody(body: AsyncIterable<Uint8Array>, trace: RequestTrace): AsyncIterable<Uint8Array> {
  try {
    yield* body;
  } catch (err) {
    throw err instanceof ConnectError ? traced(err, trace) : err;
  }
}

/** A Connect unary error answer as Connect writes one (its status, the error JSON, the error's metadata as headers). */
function connectErrorResponse(err: ConnectError, jsonOptions: Partial<JsonWriteOptions> | undefined): UniversalServerResponse {
  const body = errorToJsonBytes(err, jsonOptions);
  const header = new Headers({ "content-type": "application/json" });
  err.metadata.forEach((value, key) => {
    header.set(key, value);
  });
  header.set("content-length", String(body.byteLength));
  return { status: codeToHttpStatus(err.code), header, body: createAsyncIterable([body]) };
}

/**
 * A Connect GET (see above): its query-string message read as Connect will read it (`base64`,
 * `compression`, `encoding`); JSON goes on as the reader's, uncompressed. What Connect refuses in
 * its own words (a method without GET, an unknown encoding or compression, a message too large) goes on unchecked.
 */
function checkedGet(handler: UniversalHandler, req: UniversalServerRequest, maxBytes: number, jsonOptions: Partial<JsonWriteOptions> | undefined): Promise<UniversalServerResponse> {
  const trace = req.contextValues?.get(traceKey);
  const refuse = (err: ConnectError) => Promise.resolve(connectErrorResponse(traced(err, trace), jsonOptions));
  const pre = req.contextValues?.get(preAuthKey);
  if (pre !== undefined && "error" in pre) return refuse(pre.error);
  if (handler.method.idempotency !== MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS) return handler(req);
  const url = new URL(req.url);
  const query = url.searchParams;
  const encoding = query.get("encoding");
  if (encoding !== "proto" && encoding !== "json") return handler(req);
  try {
    const message = query.get("message") ?? "";
    let bytes: Uint8Array;
    try {
      bytes = query.get("base64") === "1" ? base64Decode(message) : encoder.encode(message);
    } catch {
      throw malformedRequest("the request's `message` parameter is not valid base64 (base64=1)", "MALFORMED_BASE64");
    }
    const compression = query.get("compression");
    const problems = encoding === "json" ? new DeferredProblems() : undefined;
    let check = checkOf(handler.method.input, problems);
    if (compression !== null && compression !== "identity") check = compressedCheck(check, compression, maxBytes, (b) => b);
    // The bytes themselves back: binary, or a message left unchecked (too large, an unknown compression).
    const checked = check(bytes, 0);
    if (!problems || checked === bytes) return handler(req);
    query.set("message", new TextDecoder().decode(checked));
    query.delete("base64");
    query.delete("compression");
    return handler({ ...req, url: url.toString(), contextValues: withProblems(req, problems) });
  } catch (err) {
    if (!(err instanceof ConnectError)) throw err;
    return refuse(err);
  }
}

/** The handler, with its request messages checked as they reach it; `jsonOptions`: the router's, for a GET's error answered here. */
export function checkedHandler(handler: UniversalHandler, maxBytes: number, jsonOptions?: Partial<JsonWriteOptions>): UniversalHandler {
  const desc = handler.method.input;
  const binary = checkOf(desc);
  const wrapped = (req: UniversalServerRequest) => {
    if (req.method === "GET") return checkedGet(handler, req, maxBytes, jsonOptions);
    const body = req.body;
    if (req.method !== "POST" || body === null || typeof body !== "object" || !(Symbol.asyncIterator in body)) return handler(req);
    const trace = req.contextValues?.get(traceKey);
    const out = (b: AsyncIterable<Uint8Array>) => (trace ? tracedBody(b, trace) : b);
    const type = contentType(req);
    const iterable = body as AsyncIterable<Uint8Array>;
    const kind = BODY.exec(type);
    if (!kind) return handler(trace ? { ...req, body: out(iterable) } : req);
    const whole = kind[1] !== undefined;
    const encoding = (whole ? req.header.get("content-encoding") : (req.header.get("grpc-encoding") ?? req.header.get("connect-content-encoding")))?.trim().toLowerCase() ?? "identity";
    let { header, contextValues } = req;
    let check = binary;
    if (type.endsWith("json")) {
      const problems = new DeferredProblems();
      contextValues = withProblems(req, problems);
      check = checkOf(desc, problems);
      header = new Headers(req.header);
      header.delete("content-length"); // the JSON handed on is not the JSON sent
    }
    // A compressed unary body stays compressed (its header says so): rewritten JSON is recompressed.
    // A rewritten envelope goes on uncompressed.
    const rewrite = whole ? (b: Uint8Array) => (encoding === "br" ? brotliCompressSync(b) : gzipSync(b)) : (b: Uint8Array) => b;
    const compressed = encoding === "identity" ? undefined : compressedCheck(check, encoding, maxBytes, rewrite);
    const checked = whole ? wholeChecked(iterable, compressed ?? check, maxBytes) : envelopesChecked(iterable, check, maxBytes, compressed);
    return handler({ ...req, header, contextValues, body: out(checked) });
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
