/**
 * Where connect-node 2.1.2's gRPC and gRPC-Web answers differ from what gRPC clients expect, mended
 * around its handlers by src/edge/connect.ts (test/api/grpc-tools.test.ts pins the answers; check
 * again on an upgrade):
 * - `grpc-message` is written with encodeURIComponent (`email%3A must be …` in grpc-js): respelled
 *   as gRPC says (grpc-message.ts), in gRPC trailers and in a gRPC-Web body's trailer frame;
 * - `application/grpc-web-text` (base64; the grpc-web browser client's default) is refused as an
 *   unsupported media type: it is decoded into `application/grpc-web` on its way in and its answer
 *   encoded back on the way out, chunk by chunk, so streams stay streams;
 * - a gRPC call to a method the server does not have gets an HTTP 404: answered as gRPC here
 *   (status 12 UNIMPLEMENTED).
 */
import { constants } from "node:buffer";
import { Code, type ConnectError } from "@connectrpc/connect";
import type { UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { decompressed } from "./compression.js";
import { malformedRequest } from "./errors.js";
import { encodeGrpcMessage } from "./grpc-message.js";
import { envelope } from "./requests.js";

/** The gRPC flavours, from a request's content type; undefined for anything else. */
export type GrpcFlavour = "grpc" | "grpc-web" | "grpc-web-text";

export function grpcFlavour(contentType: string | undefined): GrpcFlavour | undefined {
  const type = (contentType ?? "").split(";", 1)[0]?.trim().toLowerCase() ?? "";
  const m = /^application\/(grpc|grpc-web|grpc-web-text)(\+[a-z0-9.-]+)?$/.exec(type);
  return m ? (m[1] as GrpcFlavour) : undefined;
}

/** connect-node 2.1.2's encodeURIComponent spelling of a grpc-message, respelled as gRPC's protocol says. */
function respell(value: string): string {
  try {
    return encodeGrpcMessage(decodeURIComponent(value));
  } catch {
    return value;
  }
}

const TRAILER_FLAG = 0x80;

/** The bytes as a Buffer, uncopied. */
const asBuffer = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

/**
 * A gRPC-Web trailer frame with its grpc-message respelled. connect-node 2.1.2 compresses a
 * trailer frame over compressMinBytes like a message (with the response's `encoding`); it is sent
 * back uncompressed: compression is each message's choice.
 */
function mendTrailerFrame(flags: number, data: Uint8Array, encoding: string | null): Uint8Array {
  const text = flags & 0x01 ? decompressed(data, encoding ?? "", constants.MAX_LENGTH) : asBuffer(data);
  if (!(text instanceof Buffer)) return envelope(flags, data);
  const mended = text.toString("utf8").replace(/^[ \t]*grpc-message[ \t]*:(.*)$/gim, (_m, value: string) => `grpc-message: ${respell(value.trim())}`);
  return envelope(TRAILER_FLAG, Buffer.from(mended, "utf8"));
}

/**
 * A gRPC-Web response body with its trailer frame mended. connect-node 2.1.2 yields each envelope
 * as one chunk (transformJoinEnvelopes), the trailer frame last: a chunk that is not exactly one
 * trailer frame goes on as it is.
 */
async function* mendWebBody(body: AsyncIterable<Uint8Array>, encoding: string | null): AsyncIterable<Uint8Array> {
  for await (const chunk of body) {
    const flags = chunk[0] ?? 0;
    const whole = chunk.byteLength >= 5 && new DataView(chunk.buffer, chunk.byteOffset + 1, 4).getUint32(0) === chunk.byteLength - 5;
    yield flags & TRAILER_FLAG && whole ? mendTrailerFrame(flags, chunk.subarray(5), encoding) : chunk;
  }
}

/** A gRPC body, then its trailers (filled in by Connect as the body ends) with grpc-message respelled. */
async function* mendTrailersAfter(body: AsyncIterable<Uint8Array>, trailer: Headers): AsyncIterable<Uint8Array> {
  yield* body;
  const message = trailer.get("grpc-message");
  if (message !== null) trailer.set("grpc-message", respell(message));
}

/** Each chunk in base64 on its own, padded: grpc-web clients read the text four characters at a time. */
async function* toBase64(body: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  for await (const chunk of body) yield Buffer.from(asBuffer(chunk).toString("base64"), "latin1");
}

const BASE64 = /^[A-Za-z0-9+/=]*$/;

/** Whole groups of four base64 characters, which may hold padding between separately encoded chunks. */
function decodeGroups(s: string): Buffer {
  if (!s.includes("=")) return Buffer.from(s, "base64");
  const parts: Buffer[] = [];
  let at = 0;
  while (at < s.length) {
    const eq = s.indexOf("=", at);
    const end = eq < 0 ? s.length : (Math.floor(eq / 4) + 1) * 4;
    parts.push(Buffer.from(s.slice(at, end), "base64"));
    at = end;
  }
  return Buffer.concat(parts);
}

function notBase64(): ConnectError {
  return malformedRequest("the application/grpc-web-text request body is not valid base64", "MALFORMED_BASE64");
}

/** A base64 request body decoded as it arrives (line breaks and spaces ignored). */
async function* fromBase64(body: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  let rest = "";
  for await (const chunk of body) {
    const s =
      rest +
      asBuffer(chunk)
        .toString("latin1")
        .replace(/[\r\n\t ]/g, "");
    if (!BASE64.test(s)) throw notBase64();
    const whole = s.length - (s.length % 4);
    rest = s.slice(whole);
    if (whole > 0) yield decodeGroups(s.slice(0, whole));
  }
  if (rest.length > 0) throw notBase64();
}

/** The most base64 characters that encode `bytes` bytes: a text body's bound on the wire. */
export const base64Length = (bytes: number): number => Math.ceil(bytes / 3) * 4;

/** A request as Connect should read it: grpc-web-text turned into grpc-web (else unchanged). */
export function grpcRequest(req: UniversalServerRequest, flavour: GrpcFlavour | undefined): UniversalServerRequest {
  if (flavour !== "grpc-web-text") return req;
  const header = new Headers(req.header);
  header.set("content-type", (header.get("content-type") ?? "").replace(/application\/grpc-web-text/i, "application/grpc-web"));
  header.delete("content-length");
  const body = req.body;
  const bytes = body !== null && typeof body === "object" && Symbol.asyncIterator in body ? fromBase64(body as AsyncIterable<Uint8Array>) : body;
  return { ...req, header, body: bytes };
}

/** Connect's response as gRPC clients expect it (see above), for a request of `flavour`. */
export function grpcResponse(res: UniversalServerResponse, flavour: GrpcFlavour | undefined): UniversalServerResponse {
  if (flavour === undefined || res.body === undefined) return res;
  const type = res.header?.get("content-type") ?? "";
  if (flavour === "grpc") {
    if (!type.startsWith("application/grpc") || !res.trailer) return res;
    return { ...res, body: mendTrailersAfter(res.body, res.trailer) };
  }
  if (!type.startsWith("application/grpc-web")) return res;
  let body = mendWebBody(res.body, res.header?.get("grpc-encoding") ?? null);
  let header = res.header;
  if (flavour === "grpc-web-text") {
    header = new Headers(header);
    header.set("content-type", type.replace("application/grpc-web", "application/grpc-web-text"));
    header.delete("content-length");
    body = toBase64(body);
  }
  return { ...res, header, body };
}

/**
 * The answer to a gRPC call of a method the server does not have: HTTP 200 with grpc-status 12.
 * gRPC gets the status in trailers (after headers, as connect-node 2.1.2 answers every gRPC call); gRPC-Web
 * in a trailer frame, base64 for grpc-web-text.
 */
export function unimplemented(flavour: GrpcFlavour, path: string): { headers: Record<string, string>; trailers?: Record<string, string>; body?: Uint8Array } {
  const message = `unknown method ${path}: this server has no such gRPC service or method`;
  const status = { "grpc-status": String(Code.Unimplemented), "grpc-message": encodeGrpcMessage(message) };
  if (flavour === "grpc") return { headers: { "content-type": "application/grpc" }, trailers: status };
  const trailer = envelope(TRAILER_FLAG, Buffer.from(`grpc-status: ${status["grpc-status"]}\r\ngrpc-message: ${status["grpc-message"]}\r\n`, "utf8"));
  if (flavour === "grpc-web") return { headers: { "content-type": "application/grpc-web+proto" }, body: trailer };
  return { headers: { "content-type": "application/grpc-web-text+proto" }, body: Buffer.from(Buffer.from(trailer).toString("base64"), "latin1") };
}
