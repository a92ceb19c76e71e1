/**
 * RPC requests with the bytes on the wire chosen by the test (bodies no client library would
 * send: corrupt compression, odd envelope flags, bad base64), and their answers read into one
 * shape whatever the protocol: Connect unary and streaming over HTTP/1.1, Connect GET, gRPC over
 * node:http2, gRPC-Web binary and text over HTTP/1.1, REST.
 */
import http2 from "node:http2";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { base64Decode } from "@bufbuild/protobuf/wire";
import { Code, ConnectError } from "@connectrpc/connect";
import { errorFromJson } from "@connectrpc/connect/protocol-connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { ErrorInfoSchema } from "../../src/gen/google/rpc/error_details_pb.js";

/** What came back: the HTTP status on the wire, the code ("ok" or Connect's name, for every protocol) and the ErrorInfo reason. */
export interface Answer {
  http: number;
  code: string;
  reason: string | undefined;
  message: string;
}

export const codeName = (c: Code): string => Code[c].replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();

function fromError(http: number, err: ConnectError | undefined): Answer {
  if (!err) return { http, code: "ok", reason: undefined, message: "" };
  return { http, code: codeName(err.code), reason: err.findDetails(ErrorInfoSchema)[0]?.reason, message: err.rawMessage };
}

/** One envelope: flags, the big-endian length (`length` if given, else the data's), the data. */
export function envelope(flags: number, data: Uint8Array, length = data.byteLength): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(length >>> 0, 1);
  return Buffer.concat([head, data]);
}

/** The envelopes of `bytes` (a whole body): flags and data; a cut-short tail is left out. */
function envelopes(bytes: Buffer): { flags: number; data: Buffer }[] {
  const out: { flags: number; data: Buffer }[] = [];
  let at = 0;
  while (bytes.length - at >= 5) {
    const length = bytes.readUInt32BE(at + 1);
    if (bytes.length - at - 5 < length) break;
    out.push({ flags: bytes[at] as number, data: bytes.subarray(at + 5, at + 5 + length) });
    at += 5 + length;
  }
  return out;
}

const connectError = (json: unknown) => errorFromJson(json as never, undefined, new ConnectError("no error JSON", Code.Unknown));

/** An error answer's body read as Connect error JSON; one that is not JSON (a plain HTTP refusal) is told by its status alone. */
function errorAnswer(http: number, text: string): Answer {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { http, code: "not JSON", reason: undefined, message: text.slice(0, 200) };
  }
  return fromError(http, connectError(json));
}

/** Every fetch of these helpers gives up after this long: a request that hangs fails its test rather than the run. */
const FETCH_TIMEOUT_MS = 15_000;

/**
 * A Connect POST: unary (`application/proto`, the body is the message; error JSON with the
 * code's HTTP status) or streaming (`application/connect+proto`, enveloped; HTTP 200 and the
 * error in the end-stream message), as `headers["content-type"]` says.
 */
export async function connectPost(url: string, path: string, headers: Record<string, string>, body: Uint8Array): Promise<Answer> {
  const res = await fetch(`${url}${path}`, { method: "POST", headers: { "connect-protocol-version": "1", ...headers }, body: Buffer.from(body), signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
  const bytes = Buffer.from(await res.arrayBuffer());
  const streaming = (headers["content-type"] ?? "").startsWith("application/connect+");
  if (!streaming || res.headers.get("content-type") === "application/json") {
    if (res.status === 200) return fromError(200, undefined);
    return errorAnswer(res.status, bytes.toString("utf8"));
  }
  const end = envelopes(bytes).find((e) => (e.flags & 0b10) !== 0);
  if (!end) return { http: res.status, code: "no end-stream message", reason: undefined, message: bytes.toString("latin1") };
  // The end-stream message may come compressed, in the answer's connect-content-encoding.
  const encoding = res.headers.get("connect-content-encoding");
  const data = (end.flags & 0b1) === 0 ? end.data : encoding === "br" ? brotliDecompressSync(end.data) : gunzipSync(end.data);
  const json = JSON.parse(data.toString("utf8")) as { error?: unknown };
  return fromError(res.status, json.error === undefined ? undefined : connectError(json.error));
}

/** A Connect GET with the query string as given (`connect=v1` added). */
export async function connectGet(url: string, path: string, query: string, headers: Record<string, string>): Promise<Answer> {
  const res = await fetch(`${url}${path}?connect=v1&${query}`, { headers, signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
  const text = await res.text();
  if (res.status === 200) return fromError(200, undefined);
  return errorAnswer(res.status, text);
}

/**
 * A gRPC call over `session` (node:http2): the body as given, the status from the headers of a
 * trailers-only answer or from the trailers. `timeoutMs`: a deadline sent as grpc-timeout, and
 * the stream cancelled five seconds after it if no status came (a server stream that stays open).
 */
export function grpcCall(session: http2.ClientHttp2Session, path: string, headers: Record<string, string>, body: Uint8Array, timeoutMs = 5_000): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", "grpc-timeout": `${timeoutMs}m`, ...headers });
    const status = new Headers();
    let http = 0;
    const take = (h: http2.IncomingHttpHeaders) => {
      for (const [k, v] of Object.entries(h)) if (!k.startsWith(":") && typeof v === "string") status.set(k, v);
    };
    req.on("response", (h) => {
      http = Number(h[":status"]);
      take(h);
    });
    req.on("trailers", take);
    req.on("data", () => {});
    req.on("error", reject);
    const timer = setTimeout(() => req.close(http2.constants.NGHTTP2_CANCEL), timeoutMs + 5_000);
    req.on("close", () => {
      clearTimeout(timer);
      if (!status.has("grpc-status")) {
        resolve({ http, code: "no grpc-status", reason: undefined, message: `stream closed with RST code ${req.rstCode}` });
        return;
      }
      resolve(fromError(http, findTrailerError(status)));
    });
    req.end(body);
  });
}

/**
 * A gRPC-Web call over HTTP/1.1: binary (`application/grpc-web+proto`) or, with `text`, the body
 * sent as given under `application/grpc-web-text` and the answer read back from base64. The
 * status comes from the trailer frame (or the headers of an answer without one).
 */
export async function grpcWebCall(url: string, path: string, headers: Record<string, string>, body: Uint8Array | string, text = false): Promise<Answer> {
  const res = await fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": text ? "application/grpc-web-text" : "application/grpc-web+proto", "x-grpc-web": "1", ...headers },
    body: typeof body === "string" ? body : Buffer.from(body),
    signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
  });
  const raw = Buffer.from(await res.arrayBuffer());
  // Each chunk of a text answer is base64 on its own, padded: decoded with the padding inside.
  const bytes = text ? Buffer.from(base64Decode(raw.toString("latin1"))) : raw;
  const status = new Headers();
  for (const [k, v] of res.headers) status.set(k, v);
  const trailer = envelopes(bytes).find((e) => (e.flags & 0x80) !== 0);
  if (trailer) {
    for (const line of trailer.data.toString("utf8").split("\r\n")) {
      const colon = line.indexOf(":");
      if (colon > 0) status.set(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
    }
  }
  if (!status.has("grpc-status")) return { http: res.status, code: "no grpc-status", reason: undefined, message: raw.toString("latin1").slice(0, 200) };
  return fromError(res.status, findTrailerError(status));
}

/** A REST request with the body as given. */
export async function restCall(url: string, method: string, path: string, headers: Record<string, string>, body?: Uint8Array): Promise<Answer> {
  const res = await fetch(`${url}${path}`, { method, headers, body: body && Buffer.from(body), signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
  const text = await res.text();
  if (res.status === 200) return fromError(200, undefined);
  return errorAnswer(res.status, text);
}
