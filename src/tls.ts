/**
 * TLS on the one port (TLS_CERT_FILE, TLS_KEY_FILE; src/edge/listener.ts `listen`): the certificate and
 * key are read and checked as a pair at start (a pair that does not work stops the start), and
 * read again whenever either file changes, looked at every TLS_RELOAD_CHECK_MS: a new pair that
 * works serves the connections made from then on; one that does not (unreadable, not PEM, a key
 * of another certificate, a file half written) is logged and the pair in use kept.
 */
import { X509Certificate } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { createSecureContext } from "node:tls";
import type { TlsFiles } from "./config.js";
import type { Logger } from "./log.js";
import type { TlsPair } from "./edge/listener.js";

/** How often the certificate and key files are looked at for a change (ms). */
export const TLS_RELOAD_CHECK_MS = 1_000;

/** The pair in `files`, read and checked (the key is the certificate's); throws a message naming the setting and the problem. */
export function readTlsPair(files: TlsFiles): TlsPair {
  const read = (name: string, path: string): Buffer => {
    try {
      return readFileSync(path);
    } catch (err) {
      throw new Error(`${name} ${path} cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
  };
  const cert = read("TLS_CERT_FILE", files.certFile);
  const key = read("TLS_KEY_FILE", files.keyFile);
  try {
    createSecureContext({ cert, key });
    new X509Certificate(cert);
  } catch (err) {
    throw new Error(`TLS_CERT_FILE ${files.certFile} and TLS_KEY_FILE ${files.keyFile} are not a PEM certificate and its private key (${(err as Error).message})`);
  }
  return { cert, key };
}

/** What an operator checks of a certificate: whose it is, until when, and its SHA-256 fingerprint. */
export function describeCertificate(cert: Buffer): Record<string, string> {
  const x = new X509Certificate(cert);
  return { subject: x.subject.replace(/\n/g, ", "), valid_to: new Date(x.validTo).toISOString(), fingerprint256: x.fingerprint256 };
}

/** What changes when a file is written or replaced (a rename over it too); "missing" while it is not there. */
function signature(path: string): string {
  try {
    const s = statSync(path);
    return `${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
  } catch {
    return "missing";
  }
}

/**
 * Looks at `files` every `intervalMs` and hands a changed pair that works to `apply`; a pair that
 * does not is logged at error (once per change) and nothing applied. Returns the stop.
 */
export function watchTlsPair(files: TlsFiles, apply: (pair: TlsPair) => void, log: Logger, intervalMs = TLS_RELOAD_CHECK_MS): () => void {
  const seen = () => `${signature(files.certFile)}|${signature(files.keyFile)}`;
  let last = seen();
  const timer = setInterval(() => {
    const now = seen();
    if (now === last) return;
    last = now;
    let pair: TlsPair;
    try {
      pair = readTlsPair(files);
      apply(pair);
    } catch (err) {
      log.error("TLS certificate not reloaded: the one in use is kept", { problem: (err as Error).message });
      return;
    }
    log.info("TLS certificate reloaded", { cert_file: files.certFile, ...describeCertificate(pair.cert) });
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
