/**
 * Request bodies: read within their bounds as they arrive, and what happens to a body left unread
 * when a request is answered early.
 */
import http2, { type IncomingHttpHeaders } from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import { type Ticket, bodyTooLarge, overloaded } from "../limits.js";
import type { Socket } from "node:net";
import type { Req, Res } from "./listener.js";

/**
 * An unread HTTP/1.1 remainder up to this is read and discarded by Node so that the connection
 * stays open for the next request; a larger (or unknown) one closes the connection instead.
 */
const DISCARD_BYTES = 64 * 1024;

/** The request's Content-Length, when it sent a valid one. */
export function declaredLength(headers: IncomingHttpHeaders): number | undefined {
  const raw = headers["content-length"];
  if (typeof raw !== "string" || !/^\d+$/.test(raw)) return undefined;
  return Number(raw);
}

function cancelled(): ConnectError {
  return new ConnectError("the client cancelled the call", Code.Canceled);
}

/**
 * A request body as it is read, stopping at the bounds: more than `limit` bytes (unary calls;
 * Connect bounds each message of a stream itself) is resource_exhausted; bytes the server has no
 * room for (counted on `ticket` unless the declared length was already) are unavailable. The
 * node stream is never destroyed here: what is left unread is dealt with by `leaveUnread`.
 */
export async function* boundedBody(req: Req, o: { limit: number | undefined; ticket: Ticket | undefined; countBytes: boolean; streaming: boolean; refused: () => void }): AsyncGenerator<Uint8Array> {
  let size = 0;
  let held = 0;
  try {
    for await (const chunk of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (o.limit !== undefined && size > o.limit) {
        o.refused();
        throw bodyTooLarge(o.limit);
      }
      if (o.countBytes && o.ticket) {
        if (!o.ticket.charge(chunk.length)) {
          o.refused();
          throw overloaded("request bytes");
        }
        held += chunk.length;
      }
      yield chunk;
      // A stream's bytes are in flight until the next are asked for; a unary body's until the end.
      if (o.streaming && o.ticket && held > 0) {
        o.ticket.release(held);
        held = 0;
      }
    }
  } catch (err) {
    // A body whose client reset its stream or closed its connection midway fails on Node's side
    // (premature close): the client's choice, canceled, never an internal error of the server.
    if (!(err instanceof ConnectError) && (("stream" in req && req.stream.aborted) || req.aborted || req.socket?.destroyed)) throw cancelled();
    throw err;
  }
  // An HTTP/2 body ends (rather than fails) when the client resets its stream: not a whole stream.
  if ("stream" in req && req.stream.aborted) throw cancelled();
}

/** A body read whole. */
export async function readAll(body: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const c of body) chunks.push(c);
  const only = chunks.length === 1 ? chunks[0] : undefined;
  return Buffer.isBuffer(only) ? only : Buffer.concat(chunks);
}

/**
 * A request answered before its body was read (whole): on HTTP/1.1 the connection is closed after
 * the answer unless the rest is small and nothing was read (then Node discards it and keeps the
 * connection); on HTTP/2 the stream is reset with NO_ERROR once the answer is sent, which tells
 * the client to stop sending without failing the call.
 */
export function leaveUnread(req: Req, res: Res, readAny: boolean): void {
  if (req.complete) return;
  if ("stream" in req) {
    const stream = req.stream;
    res.once("finish", () => {
      if (!req.complete && !stream.destroyed) stream.close(http2.constants.NGHTTP2_NO_ERROR);
    });
    return;
  }
  const declared = declaredLength(req.headers);
  if (!readAny && declared !== undefined && declared <= DISCARD_BYTES) return;
  if (!res.headersSent) res.setHeader("connection", "close");
  lingeringClose(req.socket);
}

/** How long a connection closed with its request body unread goes on being read (and discarded). */
const LINGER_MS = 2_000;

/**
 * A lingering close, as HTTP servers do it: once the answer is written the connection is closed
 * for writing, and what the client still sends is read and discarded for up to LINGER_MS before
 * the connection is destroyed. Destroyed at once, the socket would answer the client's next bytes
 * with a reset, which can discard the answer before the client has read it.
 */
function lingeringClose(socket: Socket): void {
  const s = socket as Socket & { lingering?: boolean };
  if (s.lingering) return;
  s.lingering = true;
  s.destroySoon = function (this: Socket) {
    this.end();
    this.resume();
    const timer = setTimeout(() => this.destroy(), LINGER_MS);
    timer.unref();
    this.once("close", () => clearTimeout(timer));
  };
}
