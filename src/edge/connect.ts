/**
 * Calls served by connect-node (gRPC, gRPC-Web and Connect; every call the lean path does not
 * take): the node request as Connect's universal request, through the router's handler (its
 * adapter, codecs and interceptors), its answer written back. rpc/grpc-wire.ts mends what gRPC
 * clients expect and connect-node does not write.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { type ConnectError, createContextValues } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { parseTimeout as parseConnectTimeout } from "@connectrpc/connect/protocol-connect";
import { parseTimeout as parseGrpcTimeout } from "@connectrpc/connect/protocol-grpc";
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

/** A call's own deadline from its headers (`connect-timeout-ms`, else `grpc-timeout`), ms; undefined: none or unreadable. */
function ownDeadline(req: Req): number | undefined {
  const header = (name: string) => (req.headers[name] === undefined ? null : String(req.headers[name]));
  const connect = parseConnectTimeout(header("connect-timeout-ms"), Number.MAX_SAFE_INTEGER);
  const t = connect.timeoutMs === undefined ? parseGrpcTimeout(header("grpc-timeout"), Number.MAX_SAFE_INTEGER) : connect;
  return t.error ? undefined : t.timeoutMs;
}

/** A body that, read, throws `err`: how a refusal reaches Connect's protocol-specific error writer. */
// biome-ignore lint/correctness/useYield: a body that only throws; the generator form is what Connect reads
async function* refusing(err: ConnectError): AsyncGenerator<Uint8Array> {
  throw err;
}

/** The responder of a call connect-node serves. */
export function connectResponder(log: Logger, path: string, handler: UniversalHandler, req: Req, res: Res, flavour: GrpcFlavour | undefined): Responder {
  const trace = traceOf(res);
  /** Runs the Connect handler and writes its response; `noLength`: without the declared length (a refusal's body is not the request's). */
  const run = (pre: PreAuth, body: AsyncIterable<Uint8Array>, noLength = false): void => {
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
  };
  return {
    refuse(refusal, readAny = false) {
      leaveUnread(req, res, readAny);
      const err = withRequestInfo(refusal, trace?.id);
      if (trace) trace.code = codeName(err.code);
      // The error's metadata (Retry-After) become headers on Connect unary, trailers on gRPC.
      // Without the declared length: Connect would check it against the method's bound first.
      run({ error: err }, refusing(err), true);
    },
    headers(h) {
      for (const [k, v] of Object.entries(h)) res.setHeader(k, v);
    },
    serve(caller, body) {
      run({ caller }, body);
    },
  };
}
