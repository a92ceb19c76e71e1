/**
 * Request compression: gzip and brotli, as connect-node's adapter accepts by default. Bytes that do
 * not decompress as the encoding the request names are the caller's fault on every path:
 * invalid_argument MALFORMED_COMPRESSION. connect-node 2.1.2's own compressions call only some zlib
 * failures so (a gzip stream cut short, and every brotli failure, are internal there).
 */
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { Code, ConnectError } from "@connectrpc/connect";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import type { Compression } from "@connectrpc/connect/protocol";
import { malformedRequest } from "./errors.js";
import { MALFORMED_ENVELOPE } from "./requests.js";

/** The refusal of bytes that do not decompress as `encoding`; `cause` is zlib's error (its message names the fault). */
function badCompression(encoding: string, cause: unknown): ConnectError {
  const why = cause instanceof Error ? `: ${cause.message}` : "";
  return malformedRequest(`the request message is not valid ${encoding === "br" ? "brotli" : encoding} data${why}`, "MALFORMED_COMPRESSION", { encoding });
}

/**
 * What the router accepts and offers (`acceptCompression`), and what the lean gRPC paths decompress
 * with: connect-node's, with every decompression failure but "too large" (resource_exhausted, as
 * connect-node answers it) refused as badCompression.
 */
export const ACCEPTED_COMPRESSION: Compression[] = [compressionGzip, compressionBrotli].map((c) => ({
  ...c,
  decompress: (bytes, readMaxBytes) =>
    c.decompress(bytes, readMaxBytes).catch((err: unknown) => {
      if (err instanceof ConnectError && err.code === Code.ResourceExhausted) throw err;
      throw badCompression(c.name, err instanceof ConnectError && err.cause !== undefined ? err.cause : err);
    }),
}));

/**
 * `bytes` decompressed from `encoding`, at most `maxBytes` of them, for the server's own detours
 * that read a request before Connect does: "too large" past that, and undefined when the encoding is
 * none the server accepts (Connect then refuses the request in its own words); bytes that do not
 * decompress throw badCompression. No bytes are no message, as connect-node reads them.
 */
export function decompressed(bytes: Uint8Array, encoding: string, maxBytes: number): Buffer | "too large" | undefined {
  if (encoding !== "gzip" && encoding !== "br") return undefined;
  if (bytes.byteLength === 0) return Buffer.alloc(0);
  try {
    return encoding === "gzip" ? gunzipSync(bytes, { maxOutputLength: maxBytes }) : brotliDecompressSync(bytes, { maxOutputLength: maxBytes });
  } catch (err) {
    if ((err as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") return "too large";
    throw badCompression(encoding, err);
  }
}

/** The refusal of a message flagged compressed (envelope flags 0x01) in a request that names no compression, or names identity. */
export function compressedWithoutEncoding(): ConnectError {
  return malformedRequest("the message is flagged compressed (envelope flags 0x01), but the request names no compression (grpc-encoding, connect-content-encoding)", MALFORMED_ENVELOPE);
}
