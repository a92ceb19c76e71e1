/**
 * One port for everything: a TCP listener looks at the first bytes of each connection and hands
 * HTTP/2 (the cleartext preface, as gRPC clients send) to an h2c server and everything else to an
 * HTTP/1.1 server. Both run the same request handler: Connect RPC (gRPC, gRPC-Web, Connect), then
 * the REST bridge, then the few plain routes (health).
 */
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import http2, { type Http2ServerRequest, type Http2ServerResponse, type Http2Session } from "node:http2";
import net, { type Socket } from "node:net";
import { Duplex } from "node:stream";
import type { ConnectRouter } from "@connectrpc/connect";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { ConnectionLimits } from "./config.js";
import type { Logger } from "./log.js";
import { sendError } from "./rest/errors.js";
import { INSTANT_BODY_BYTES, readsInstants, strictInstants } from "./rpc/instants.js";

type Req = IncomingMessage | Http2ServerRequest;
type Res = ServerResponse | Http2ServerResponse;

export interface HandlerParts {
  router: ConnectRouter;
  rest: (req: Req, res: Res) => boolean;
  pages: (req: Req, res: Res) => boolean;
  health: () => Promise<boolean>;
  log: Logger;
  /** Whether an `x-api-key` header value is an active key (cached; no body is read before it). */
  knownKey: (key: string | string[] | undefined) => Promise<boolean>;
}

export function createRequestHandler({ router, rest, pages, health, log, knownKey }: HandlerParts) {
  const rpc = new Map(router.handlers.map((h) => [h.requestPath, h]));
  return (req: Req, res: Res): void => {
    const path = (req.url ?? "/").split("?", 1)[0] ?? "/";
    // CORS for the API (browser apps read billing state with a publishable key). API keys travel
    // in a header, never in cookies, so any origin may call; pages under /hosted/ are not shared.
    if (req.headers.origin && !path.startsWith("/hosted/")) {
      res.setHeader("access-control-allow-origin", "*");
      res.setHeader("access-control-expose-headers", "grpc-status, grpc-message, grpc-status-details-bin");
      if (req.method === "OPTIONS") {
        res.writeHead(204, {
          "access-control-allow-methods": "GET, POST, PUT, DELETE",
          "access-control-allow-headers": "x-api-key, content-type, connect-protocol-version, connect-timeout-ms, x-grpc-web, x-user-agent, grpc-timeout",
          "access-control-max-age": "86400",
        });
        res.end();
        return;
      }
    }
    const handler = rpc.get(path);
    if (handler) {
      const uReq = universalRequestFromNodeRequest(req as IncomingMessage, res as ServerResponse, undefined, undefined);
      // JSON that may hold a Timestamp is read strictly first (src/rpc/instants.ts), for a caller
      // whose key is known: anyone else gets the method's 401 without the body being read here.
      const detour = async () => (readsInstants(handler, uReq) && (await knownKey(req.headers["x-api-key"])) ? handler(await strictInstants(handler, uReq, INSTANT_BODY_BYTES)) : handler(uReq));
      detour()
        .then((uRes) => universalResponseToNodeResponse(uRes, res as ServerResponse))
        .catch((err) => {
          log.warn("rpc stream ended early", { rpc: path, err });
          if (!res.headersSent) res.destroy();
        });
      return;
    }
    if (rest(req, res)) return;
    if (pages(req, res)) return;
    if (path === "/healthz" && req.method === "GET") {
      health().then(
        (ok) => {
          res.writeHead(ok ? 200 : 503, { "content-type": "application/json" });
          res.end(JSON.stringify({ status: ok ? "ok" : "database unavailable" }));
        },
        () => {
          res.writeHead(503, { "content-type": "application/json" });
          res.end(JSON.stringify({ status: "database unavailable" }));
        },
      );
      return;
    }
    sendError(res, 404, "not_found", `no route for ${req.method} ${path}`, "ROUTE_NOT_FOUND");
  };
}

export interface Listener {
  port: number;
  /** Stops accepting, lets in-flight requests finish (up to `graceMs`), then closes every connection. */
  close(graceMs?: number): Promise<void>;
}

/**
 * The socket as a JS stream that first yields the bytes already read. The HTTP/2 session reads
 * from a native socket handle directly and would never see bytes put back with unshift(); given
 * a JS stream it reads through it.
 */
function replay(socket: Socket, head: Buffer): Duplex {
  const d = new Duplex({
    read() {
      socket.resume();
    },
    write(chunk: Buffer, _enc, cb) {
      socket.write(chunk, cb);
    },
    final(cb) {
      socket.end();
      cb();
    },
    destroy(err, cb) {
      socket.destroy(err ?? undefined);
      cb(err);
    },
  });
  d.push(head);
  socket.on("data", (c: Buffer) => {
    if (!d.push(c)) socket.pause();
  });
  socket.on("end", () => d.push(null));
  socket.on("close", () => d.destroy());
  return d;
}

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/**
 * How often the HTTP/1.1 server looks for requests past their header or request timeout (Node
 * checks only periodically): a quarter of the shorter timeout, at most once a second, so a
 * timeout fires at most that much late.
 */
function checkingInterval(limits: ConnectionLimits): number {
  return Math.max(25, Math.min(1_000, Math.floor(Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs) / 4)));
}

/**
 * Serves `handler` on one port for HTTP/1.1 and h2c, bounded by `limits`: a connection that does
 * not finish its first bytes (the HTTP/2 preface) in time, an HTTP/1.1 request whose headers or
 * whole request arrive too slowly, and a connection that moves no bytes for the idle timeout are
 * closed and their sockets destroyed.
 */
export function listen(handler: (req: Req, res: Res) => void, port: number, limits: ConnectionLimits, host?: string): Promise<Listener> {
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

  // HTTP/1.1: headersTimeout and requestTimeout answer 408 and close (checked every
  // connectionsCheckingInterval); keepAliveTimeout closes a connection idle between requests;
  // timeout (no 'timeout' listener: the socket is destroyed) one that moves no bytes mid-request.
  const h1 = http.createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.idleTimeoutMs,
      connectionsCheckingInterval: checkingInterval(limits),
    },
    tracked,
  );
  h1.timeout = limits.idleTimeoutMs;
  // The header and request timeouts need the server's connection list and its checking timer,
  // which Node starts on 'listening'. h1 never listens itself (it is handed sockets), so start
  // them here; without this neither timeout fires, nor does closeIdleConnections() close anything.
  h1.emit("listening");
  // HTTP/2: a session with no stream bytes either way (HEADERS or DATA; PINGs do not count) for
  // the idle timeout is destroyed (no 'timeout' listener on the server): its client sees GOAWAY
  // and the socket is closed. A stream that keeps sending or receiving keeps its session.
  const h2 = http2.createServer({}, tracked);
  h2.setTimeout(limits.idleTimeoutMs);
  const sessions = new Set<Http2Session>();
  h2.on("session", (s) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  const sockets = new Set<Socket>();

  // noDelay: HTTP/2 frames go out through the replay stream, so the HTTP/2 server never sets
  // TCP_NODELAY itself; without it every gRPC call waits ~40 ms for a delayed ACK.
  const tcp = net.createServer({ noDelay: true }, (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    // One deadline from accept, not an inactivity timer: a byte every few seconds does not
    // extend it. Until the protocol is known nothing else bounds the connection.
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
      socket.pause();
      if (isH2) {
        h2.emit("connection", replay(socket, head));
      } else {
        socket.unshift(head);
        h1.emit("connection", socket);
      }
      socket.resume();
    };
    socket.on("data", onData);
  });
  if (limits.maxConnections > 0) tcp.maxConnections = limits.maxConnections;

  return new Promise((resolve, reject) => {
    tcp.once("error", reject);
    tcp.listen(port, host, () => {
      const address = tcp.address();
      resolve({
        port: typeof address === "object" && address ? address.port : port,
        async close(graceMs = 10_000) {
          closing = true;
          const stopped = new Promise<void>((r) => tcp.close(() => r()));
          for (const s of sessions) s.close();
          h1.close(); // closes idle keep-alive connections and stops the checking timer
          if (inflight > 0) {
            await Promise.race([new Promise<void>((r) => (drained = r)), new Promise((r) => setTimeout(r, graceMs).unref())]);
          }
          for (const socket of sockets) socket.destroy();
          await stopped;
        },
      });
    });
  });
}
