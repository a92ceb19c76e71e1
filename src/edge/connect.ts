/**
 * Calls served by connect-node (gRPC, gRPC-Web and Connect; every call the lean path does not
 * take): the node request as Connect's universal request, through the router's handler (its
 * adapter, codecs and interceptors), its answer written back. rpc/grpc-wire.ts mends what gRPC
 * clients expect and connect-node does not write.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { type ConnectError, createContextValues } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { parseTimeout } from "@connectrpc/connect/protocol-grpc";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { Logger } from "../log.js";
import { codeName, traceOf } from "../ops/trace.js";
import { type PreAuth, preAuthKey } from "../rpc/auth.js";
import { replaySeamKey, traceKey } from "../rpc/context.js";
import { withRequestInfo } from "../rpc/errors.js";
import { type GrpcFlavour, grpcRequest, grpcResponse } from "../rpc/grpc-wire.js";
import type { Responder } from "./admit.js";
import { leaveUnread } from "./body.js";
import type { Req, Res } from "./listener.js";

/**
 * The caching policy of a Connect GET (a NO_SIDE_EFFECTS method, the message in the query string)
 * answer, success or error: never stored by any cache. Its answer is one API key's view of billing
 * state that changes with every ingest, and the server sends no validator to revalidate with; a
 * shared cache must never hand it to another key, and a browser's cache should not keep it on
 * disk. `Vary` names what the answer depends on besides the URL (whose query already holds the
 * message, `encoding`, `compression` and `connect`): the key header and the negotiated response
 * compression, for a cache that ignores `no-store`.
 */
export function connectGetHeaders(res: Res): void {
  res.setHeader("cache-control", "private, no-store");
  res.setHeader("vary", "X-API-Key, Accept-Encoding");
}

/** A call's own deadline from its headers (`grpc-timeout`, `connect-timeout-ms`), ms; undefined: none or unreadable. */
function ownDeadline(req: Req): number | undefined {
  const connect = req.headers["connect-timeout-ms"];
  if (typeof connect === "string" && /^\d{1,10}$/.test(connect)) return Number(connect);
  const grpc = req.headers["grpc-timeout"];
  if (grpc === undefined) return undefined;
  const t = parseTimeout(String(grpc), Number.MAX_SAFE_INTEGER);
  return t.error ? undefined : t.timeoutMs;
}

/** A body that, read, throws `err`: how a refusal reaches Connect's protocol-specific error writer. */
// biome-ignore lint/correctness/useYield: a body that only throws; the generator form is what Connect reads
async function* refusing(err: ConnectError): AsyncGenerator<Uint8Array> {
  throw err;
}

/** Runs a Connect handler and writes its response; `noLength`: without the declared length (a refusal's body is not the request's). */
function runRpc(log: Logger, path: string, handler: UniversalHandler, req: Req, res: Res, pre: PreAuth, body: AsyncIterable<Uint8Array>, flavour: GrpcFlavour | undefined, noLength = false): void {
  const trace = traceOf(res);
  if (trace) trace.deadlineMs ??= ownDeadline(req);
  const contextValues = createContextValues().set(preAuthKey, pre).set(traceKey, trace).set(replaySeamKey, true);
  const uReq = grpcRequest({ ...universalRequestFromNodeRequest(req as IncomingMessage, res as ServerResponse, undefined, contextValues), body }, flavour);
  if (noLength) {
    uReq.header = new Headers(uReq.header);
    uReq.header.delete("content-length");
  }
  handler(uReq)
    .then((uRes) => {
      // gRPC's status is in the trailers (or the headers of a trailers-only answer): read when the request ends.
      if (trace && flavour) trace.grpcStatus = () => uRes.trailer?.get("grpc-status") ?? uRes.header?.get("grpc-status");
      return universalResponseToNodeResponse(grpcResponse(uRes, flavour), res as ServerResponse);
    })
    .catch((err) => {
      // A client that went away (a reset stream, a closed connection) is not the server's failure.
      if (("stream" in res && res.stream.aborted) || req.socket?.destroyed) log.debug("rpc: the client went away", { rpc: path, request_id: trace?.id });
      else log.warn("rpc stream ended early", { rpc: path, request_id: trace?.id, err });
      if (!res.headersSent) res.destroy();
    });
}

/** The responder of a call connect-node serves. */
export function connectResponder(log: Logger, path: string, handler: UniversalHandler, req: Req, res: Res, flavour: GrpcFlavour | undefined): Responder {
  return {
    refuse(refusal, readAny = false) {
      leaveUnread(req, res, readAny);
      const trace = traceOf(res);
      const err = withRequestInfo(refusal, trace?.id);
      if (trace) trace.code = codeName(err.code);
      // The error's metadata (Retry-After) become headers on Connect unary, trailers on gRPC.
      // Without the declared length: Connect would check it against the method's bound first.
      runRpc(log, path, handler, req, res, { error: err }, refusing(err), flavour, true);
    },
    headers(h) {
      for (const [k, v] of Object.entries(h)) res.setHeader(k, v);
    },
    serve(caller, body) {
      runRpc(log, path, handler, req, res, { caller }, body, flavour);
    },
  };
}
