/**
 * Strict instants for Connect JSON requests (DESIGN §4). protobuf-es reads a JSON Timestamp with
 * Date.parse, which rolls 2026-02-30 over to 2 March, so a JSON request to a method
 * whose input holds a google.protobuf.Timestamp is read here first: every Timestamp string goes
 * through the service's one parser (src/billing/time.ts). One it accepts is handed on as its
 * canonical UTC text (so an offset-less time is UTC and digits past the millisecond are dropped,
 * as on REST); one it refuses is noted with its field path and replaced by a placeholder, and the
 * interceptor below, which runs after authentication, answers invalid_argument with every such
 * field before the method is called. The same for the JSON variants of gRPC and gRPC-Web (one
 * enveloped message). Binary requests carry seconds and nanos, which the domain range-checks.
 */
import type { DescField, DescMessage } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor, createContextKey, createContextValues } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerRequest } from "@connectrpc/connect/protocol";
import { parse as parseLossless, stringify as stringifyLossless } from "lossless-json";
import { type FieldViolation, InvalidArgumentError } from "../billing/errors.js";
import { parseInstant } from "../billing/time.js";
import { strictUtf8 } from "./unicode.js";
import { decompressed } from "./compression.js";
import { contentType, isStreamingRequest } from "./requests.js";

const TIMESTAMP = "google.protobuf.Timestamp";
const PLACEHOLDER = "2000-01-01T00:00:00Z";

/** Timestamp fields refused while reading the request's JSON: the interceptor reports them. */
export const instantViolationsKey = createContextKey<FieldViolation[]>([], { description: "instant violations" });
/** Set (to the bound) when such a request's body was over the bound strictInstants reads. */
export const instantTooLargeKey = createContextKey<number>(0, { description: "instant body too large" });

/**
 * How much of a request to a method holding a Timestamp is read and checked before the method:
 * far more than any such request needs (a test clock, a summary period, timeline items), and
 * little enough that parsing it costs a few milliseconds.
 */
export const INSTANT_BODY_BYTES = 256 * 1024;

const holdsCache = new WeakMap<DescMessage, boolean>();
/** Whether a message type holds a Timestamp anywhere (fields, lists, map values, nested). */
function holdsTimestamp(desc: DescMessage, seen = new Set<DescMessage>()): boolean {
  const cached = holdsCache.get(desc);
  if (cached !== undefined) return cached;
  if (desc.typeName === TIMESTAMP) return true;
  if (seen.has(desc)) return false;
  seen.add(desc);
  const holds = desc.fields.some((f) => {
    const m = messageOf(f);
    return m !== undefined && holdsTimestamp(m, seen);
  });
  holdsCache.set(desc, holds);
  return holds;
}

function messageOf(f: DescField): DescMessage | undefined {
  if (f.fieldKind === "message") return f.message;
  if (f.fieldKind === "list" && f.listKind === "message") return f.message;
  if (f.fieldKind === "map" && f.mapKind === "message") return f.message;
  return undefined;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/** A Timestamp value: canonical text, or the placeholder with the violation noted. Non-strings are protobuf-es's to refuse. */
function instant(v: unknown, path: string, out: FieldViolation[]): unknown {
  if (typeof v !== "string") return v;
  const p = parseInstant(v);
  if (p.ok) return new Date(p.ms).toISOString();
  out.push({ field: path, description: p.problem });
  return PLACEHOLDER;
}

/** Rewrites the Timestamp strings of a message's JSON in place; field paths use proto names. */
function walk(desc: DescMessage, json: Record<string, unknown>, prefix: string, out: FieldViolation[]): void {
  for (const f of desc.fields) {
    const key = f.name in json ? f.name : f.jsonName in json ? f.jsonName : undefined;
    if (key === undefined) continue;
    const m = messageOf(f);
    if (!m || !holdsTimestamp(m)) continue;
    const path = prefix === "" ? f.name : `${prefix}.${f.name}`;
    const value = json[key];
    const one = (v: unknown, p: string): unknown => {
      if (m.typeName === TIMESTAMP) return instant(v, p, out);
      if (isObject(v)) walk(m, v, p, out);
      return v;
    };
    if (f.fieldKind === "list" && Array.isArray(value)) json[key] = value.map((v, i) => one(v, `${path}[${i}]`));
    else if (f.fieldKind === "map" && isObject(value)) for (const k of Object.keys(value)) value[k] = one(value[k], `${path}.${k}`);
    else if (f.fieldKind === "message") json[key] = one(value, path);
  }
}

/** Reads up to a little past `max` bytes; the iterator stays open for the rest. */
async function readUpTo(it: AsyncIterator<Uint8Array>, max: number): Promise<{ chunks: Uint8Array[]; size: number }> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  while (size <= max) {
    const r = await it.next();
    if (r.done) break;
    chunks.push(r.value);
    size += r.value.byteLength;
  }
  return { chunks, size };
}

async function* replay(chunks: Uint8Array[], rest?: AsyncIterator<Uint8Array>): AsyncIterable<Uint8Array> {
  yield* chunks;
  if (!rest) return;
  for (let r = await rest.next(); !r.done; r = await rest.next()) yield r.value;
}

/** JSON bodies in one envelope per message (5 bytes: flags, big-endian length), unary requests only. */
const ENVELOPED = new Set(["application/connect+json", "application/grpc+json", "application/grpc-web+json"]);

/** The request's compression: of the body (Connect unary) or of its compressed envelopes. */
function encodingOf(req: UniversalServerRequest, enveloped: boolean): string {
  const h = enveloped ? (req.header.get("grpc-encoding") ?? req.header.get("connect-content-encoding")) : req.header.get("content-encoding");
  return (h ?? "identity").trim().toLowerCase();
}

/** Whether strictInstants has anything to do for this request (a cheap check, no body read). */
export function readsInstants(handler: UniversalHandler, req: UniversalServerRequest): boolean {
  const type = contentType(req);
  if (req.method !== "POST" || (type !== "application/json" && !ENVELOPED.has(type))) return false;
  if (isStreamingRequest(handler.method)) return false;
  return holdsTimestamp(handler.method.input);
}

/**
 * The request as the handler should read it: unchanged unless it is JSON (Connect's unary
 * `application/json`, or one uncompressed envelope of `+json` on Connect streaming, gRPC or
 * gRPC-Web) for a method taking one message whose type holds a Timestamp; then with its
 * Timestamps read strictly (see above), and handed on uncompressed if it came compressed (gzip
 * or brotli: a compressed body is no way around the strict reading). A body over `maxBytes`
 * (compressed or not), or that is not a JSON object, is handed on as it came, for Connect to
 * read or refuse.
 */
export async function strictInstants(handler: UniversalHandler, req: UniversalServerRequest, maxBytes: number): Promise<UniversalServerRequest> {
  if (!readsInstants(handler, req)) return req;
  const enveloped = ENVELOPED.has(contentType(req));
  const body = req.body;
  if (body === null || typeof body !== "object" || !(Symbol.asyncIterator in body)) return req;
  const iterator = (body as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
  const { chunks, size } = await readUpTo(iterator, maxBytes);
  const contextValues = req.contextValues ?? createContextValues();
  if (size > maxBytes) {
    // Larger than any request to these methods needs: refused (by the interceptor, after
    // authentication) rather than read leniently.
    contextValues.set(instantTooLargeKey, maxBytes);
    return { ...req, contextValues, body: replay(chunks, iterator) };
  }
  const raw = Buffer.concat(chunks);
  let text: Buffer = raw;
  const encoding = encodingOf(req, enveloped);
  let compressed = !enveloped && encoding !== "identity";
  if (enveloped) {
    // One message (flags 0, or 1: compressed), filling the body exactly.
    if (raw.length < 5 || (raw[0] !== 0 && raw[0] !== 1) || raw.readUInt32BE(1) !== raw.length - 5) return { ...req, body: replay([raw]) };
    text = raw.subarray(5);
    compressed = raw[0] === 1;
  }
  if (compressed) {
    const d = decompressed(text, encoding, maxBytes);
    if (d === undefined) return { ...req, body: replay([raw]) };
    if (d === "too large") {
      contextValues.set(instantTooLargeKey, maxBytes);
      return { ...req, contextValues, body: replay([raw]) };
    }
    text = d;
  }
  // Strict UTF-8: bytes that are not are handed on as they came, for Connect's strict decoder
  // to refuse (a lenient decode here would turn them into U+FFFD and hide them).
  const decoded = strictUtf8(text);
  if (decoded === undefined) return { ...req, body: replay([raw]) };
  let json: unknown;
  try {
    json = parseLossless(decoded);
  } catch {
    return { ...req, body: replay([raw]) };
  }
  if (!isObject(json)) return { ...req, body: replay([raw]) };
  const violations: FieldViolation[] = [];
  walk(handler.method.input, json, "", violations);
  if (violations.length > 0) contextValues.set(instantViolationsKey, violations);
  const message = Buffer.from(stringifyLossless(json) ?? "{}", "utf8");
  let bytes = message;
  if (enveloped) {
    bytes = Buffer.alloc(5 + message.length);
    bytes.writeUInt32BE(message.length, 1);
    message.copy(bytes, 5);
  }
  const header = new Headers(req.header);
  if (header.has("content-length")) header.set("content-length", String(bytes.byteLength));
  // Handed on uncompressed: a whole body without its encoding, an envelope with flags 0.
  if (compressed && !enveloped) header.delete("content-encoding");
  return { ...req, header, contextValues, body: replay([bytes]) };
}

/** Answers invalid_argument, with every field, for Timestamps strictInstants refused (after authentication). */
export function instantInterceptor(): Interceptor {
  return (next) => async (req) => {
    const tooLarge = req.contextValues.get(instantTooLargeKey);
    if (tooLarge > 0) throw new ConnectError(`a request to this method may have at most ${tooLarge} bytes`, Code.ResourceExhausted);
    const violations = req.contextValues.get(instantViolationsKey);
    if (violations.length > 0) throw new InvalidArgumentError(violations);
    return next(req);
  };
}
