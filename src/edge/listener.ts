/**
 * One port for everything: the first bytes of each connection hand HTTP/2 (the cleartext preface,
 * as gRPC clients send) to an h2c server and everything else to an HTTP/1.1 server (with TLS, ALPN
 * picks); both run the same handler (handler.ts). Here too: the connection caps and the
 * shutdown's drain.
 */
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import http2, { type Http2ServerRequest, type Http2ServerResponse, type Http2Session } from "node:http2";
import net, { type Socket } from "node:net";
import tls, { type TLSSocket } from "node:tls";
import type { ConnectionLimits } from "../config.js";

/** A request and its response, over HTTP/1.1 or HTTP/2. */
export type Req = IncomingMessage | Http2ServerRequest;
export type Res = ServerResponse | Http2ServerResponse;

export interface Listener {
  port: number;
  /**
   * Stops accepting and lets in-flight requests finish for up to `graceMs`; then, if any are
   * left, calls `overdue` (work in flight is told to stop and answer) and waits up to
   * SHUTDOWN_ANSWER_MS more; then closes every connection. Resolves with the number of requests
   * in flight when `graceMs` passed (overdue) and when the connections were closed (cut).
   */
  close(graceMs?: number, overdue?: () => void): Promise<{ overdue: number; cut: number }>;
  /** With TLS: serves new connections with this certificate and key (those open keep theirs). */
  setSecureContext?(pair: TlsPair): void;
}

/** A PEM certificate (chain) and its private key. */
export interface TlsPair {
  cert: Buffer;
  key: Buffer;
}

/** After the drain's deadline, how long work told to stop has to write its answer before the connections are closed. */
const SHUTDOWN_ANSWER_MS = 1_000;

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/**
 * The HTTP/1.1 server: headersTimeout and requestTimeout answer 408 and close; keepAliveTimeout
 * closes a connection idle between requests; timeout one that moves no bytes mid-request, unless
 * a response is under way (a long request keeps its socket while its handler works; a body that
 * stops arriving is bounded by requestTimeout).
 */
function http1Server(limits: ConnectionLimits, handler: (req: Req, res: Res) => void): http.Server {
  // Node looks for requests past their timeouts only periodically: a quarter of the shorter one, at most once a second.
  const checkingInterval = Math.max(25, Math.min(1_000, Math.floor(Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs) / 4)));
  const h1 = http.createServer(
    { headersTimeout: limits.headersTimeoutMs, requestTimeout: limits.requestTimeoutMs, keepAliveTimeout: limits.idleTimeoutMs, connectionsCheckingInterval: checkingInterval },
    handler,
  );
  h1.timeout = limits.idleTimeoutMs;
  h1.on("timeout", (socket: Socket) => {
    if (!(socket as Socket & { _httpMessage?: unknown })._httpMessage) socket.destroy();
  });
  // The header and request timeouts need the server's connection list and its checking timer,
  // which Node starts on 'listening'. h1 never listens itself (it is handed sockets), so start
  // them here; without this neither timeout fires, nor does closeIdleConnections() close anything.
  h1.emit("listening");
  return h1;
}

/**
 * The h2c server (Node's compatibility request and response for each stream). A session with no
 * stream bytes either way (PINGs do not count) for the idle timeout is destroyed, its client sees
 * GOAWAY, but only when none of its streams is open: a call whose handler works for longer than
 * the idle timeout keeps its session.
 */
function http2Server(limits: ConnectionLimits, handler: (req: Req, res: Res) => void): { h2: http2.Http2Server; sessions: Set<Http2Session> } {
  const h2 = http2.createServer({}, handler);
  const openStreams = new WeakMap<Http2Session, number>();
  h2.on("stream", (stream: http2.ServerHttp2Stream) => {
    const session = stream.session;
    if (!session) return;
    openStreams.set(session, (openStreams.get(session) ?? 0) + 1);
    stream.on("close", () => openStreams.set(session, (openStreams.get(session) ?? 1) - 1));
  });
  h2.setTimeout(limits.idleTimeoutMs);
  h2.on("timeout", (session: Http2Session) => {
    if ((openStreams.get(session) ?? 0) === 0) session.destroy();
  });
  const sessions = new Set<Http2Session>();
  h2.on("session", (s) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  return { h2, sessions };
}

/**
 * Hands a cleartext connection to HTTP/2 or HTTP/1.1 by its first bytes. One deadline from
 * accept, not an inactivity timer: a byte every few seconds does not extend it.
 */
function sniff(socket: Socket, limits: ConnectionLimits, h1: http.Server, h2: http2.Http2Server): void {
  const sniffing = setTimeout(() => socket.destroy(), limits.prefaceTimeoutMs);
  socket.on("close", () => clearTimeout(sniffing));
  let head = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    head = Buffer.concat([head, chunk]);
    const n = Math.min(head.length, PREFACE.length);
    const isH2 = head.subarray(0, n).equals(PREFACE.subarray(0, n));
    if (isH2 && head.length < PREFACE.length) return; // wait for the whole preface
    clearTimeout(sniffing);
    socket.off("data", onData);
    // The bytes already read go back to the socket; both servers are handed the socket itself.
    // The HTTP/2 session reads through the native handle and consumes what was put back on its
    // own (Node >= 16.14, nodejs/node#41185); resume() after the HTTP/2 handoff would hand the
    // socket's next bytes to the JS stream instead and break the framing. The HTTP/1.1 parser
    // reads through the stream, which must flow again.
    socket.pause();
    socket.unshift(head);
    if (isH2) {
      h2.emit("connection", socket);
    } else {
      h1.emit("connection", socket);
      socket.resume();
    }
  };
  socket.on("data", onData);
}

/**
 * Serves `handler` on one port for HTTP/1.1 and h2c (with `secure`, TLS: ALPN picks, and the
 * handshake must finish within the preface timeout), bounded by `limits`; on `host` (undefined:
 * every interface).
 */
export function listen(handler: (req: Req, res: Res) => void, port: number, limits: ConnectionLimits, host?: string, secure?: TlsPair): Promise<Listener> {
  let inflight = 0;
  let closing = false;
  let drained: (() => void) | undefined;
  const tracked = (req: Req, res: Res) => {
    inflight++;
    res.on("close", () => {
      inflight--;
      if (closing && inflight === 0) drained?.();
    });
    if (closing && "setHeader" in res && req.httpVersionMajor === 1) res.setHeader("connection", "close");
    handler(req, res);
  };
  const h1 = http1Server(limits, tracked);
  const { h2, sessions } = http2Server(limits, tracked);
  const sockets = new Set<Socket>();
  // TLS: each accepted socket goes to a TLS server (no listener of its own) instead of the
  // sniffer; the secured socket goes to the same HTTP/2 or HTTP/1.1 server as a cleartext one.
  // handshakeTimeout is one deadline from accept, as the preface's is.
  const secured = secure ? tls.createServer({ cert: secure.cert, key: secure.key, ALPNProtocols: ["h2", "http/1.1"], handshakeTimeout: limits.prefaceTimeoutMs }) : undefined;
  secured?.on("secureConnection", (socket: TLSSocket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    if (socket.alpnProtocol === "h2") h2.emit("connection", socket);
    else h1.emit("connection", socket);
  });
  secured?.on("tlsClientError", (_err: Error, socket: TLSSocket) => socket.destroy());
  // noDelay on every accepted socket, before the protocol is known: the HTTP/2 session does not
  // set TCP_NODELAY on a socket it did not accept, and without it every gRPC call would wait
  // ~40 ms for a delayed ACK.
  const tcp = net.createServer({ noDelay: true }, (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    if (secured) secured.emit("connection", socket);
    else sniff(socket, limits, h1, h2);
  });
  if (limits.maxConnections > 0) tcp.maxConnections = limits.maxConnections;

  const close = async (graceMs = 10_000, overdue?: () => void) => {
    closing = true;
    const stopped = new Promise<void>((r) => tcp.close(() => r()));
    for (const s of sessions) s.close();
    h1.close(); // closes idle keep-alive connections and stops the checking timer
    const drain = (ms: number) => Promise.race([new Promise<void>((r) => (drained = r)), new Promise((r) => setTimeout(r, ms).unref())]);
    if (inflight > 0) await drain(graceMs);
    const late = inflight;
    if (late > 0 && overdue) {
      overdue();
      await drain(SHUTDOWN_ANSWER_MS);
    }
    const cut = inflight;
    for (const socket of sockets) socket.destroy();
    await stopped;
    return { overdue: late, cut };
  };
  return new Promise((resolve, reject) => {
    tcp.once("error", reject);
    tcp.listen(port, host, () => {
      const address = tcp.address();
      resolve({
        port: typeof address === "object" && address ? address.port : port,
        ...(secured ? { setSecureContext: (pair: TlsPair) => secured.setSecureContext({ cert: pair.cert, key: pair.key }) } : {}),
        close,
      });
    });
  });
}
