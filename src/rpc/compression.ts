/**
 * Request compression: gzip and brotli, as connect-node's adapter accepts by default. The
 * server's own detours that read a request before Connect does (strict instants, the binary
 * check) decompress with the same bound Connect applies after decompression.
 */
import { brotliCompressSync, brotliDecompressSync, gunzipSync, gzipSync } from "node:zlib";
import { Code, ConnectError } from "@connectrpc/connect";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import { told } from "./errors.js";

/** What the router accepts and offers (`acceptCompression`). */
export const ACCEPTED_COMPRESSION = [compressionGzip, compressionBrotli];

/**
 * `bytes` decompressed from `encoding`, at most `maxBytes` of them: "too large" past that, and
 * undefined when they do not decompress or the encoding is none the server accepts (Connect
 * then refuses the request in its own words).
 */
export function decompressed(bytes: Uint8Array, encoding: string, maxBytes: number): Buffer | "too large" | undefined {
  try {
    if (encoding === "gzip") return gunzipSync(bytes, { maxOutputLength: maxBytes });
    if (encoding === "br") return brotliDecompressSync(bytes, { maxOutputLength: maxBytes });
    return undefined;
  } catch (err) {
    return (err as { code?: string }).code === "ERR_BUFFER_TOO_LARGE" ? "too large" : undefined;
  }
}

/** `bytes` compressed again with `encoding` (gzip or br), for a message rewritten after its check. */
export function recompressed(bytes: Uint8Array, encoding: string): Uint8Array {
  return encoding === "br" ? brotliCompressSync(bytes) : gzipSync(bytes);
}

/**
 * The refusal of a message flagged compressed in a request that names no compression: Connect's
 * own words (internal), marked to be told, so that the error interceptor does not hide them
 * behind "internal error" when a stream's message is the one refused.
 */
export function compressedWithoutEncoding(): ConnectError {
  return told(new ConnectError("received compressed envelope, but do not know how to decompress", Code.Internal));
}
