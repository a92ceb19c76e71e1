/**
 * The lean gRPC path: binary gRPC over HTTP/2 to a unary method, served by the server itself into
 * the same implementations and interceptors as every other call (rpc/invoke.ts), rather than
 * through connect-node's per-call pipelines (linked abort controllers, Headers objects,
 * async-iterable transforms; bench/README.md, gRPC, has the figures against the 2× rule). It
 * comes after the same admit chain (admit.ts), answers as connect-node does (test/api/lean-parity.test.ts
 * runs each case through both paths), and every message is encoded and decoded by protobuf-es.
 * Without an invoker (LEAN_GRPC=off) every call is connect-node's.
 */
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import type { DescMethod } from "@bufbuild/protobuf";
import { ConnectError, createContextValues } from "@connectrpc/connect";
import type { Caller } from "../../billing/tenancy.js";
import { bodyLimit } from "../../limits.js";
import type { Logger } from "../../log.js";
import type { RequestTrace } from "../../ops/trace.js";
import { preAuthKey } from "../../rpc/auth.js";
import { traceKey } from "../../rpc/context.js";
import { publicError } from "../../rpc/errors.js";
import type { Invoker } from "../../rpc/invoke.js";
import { headersOf } from "../../rpc/requests.js";
import type { Responder } from "../admit.js";
import { readAll } from "../body.js";
import { GrpcReply } from "./reply.js";
import { grpcDeadline, isProtocolError, requestCompression, responseCompression, unaryMessage } from "./wire.js";

export { servesLean } from "./wire.js";

export interface LeanCall {
  invoke: Invoker;
  log: Logger;
  path: string;
  method: DescMethod;
  req: Http2ServerRequest;
  res: Http2ServerResponse;
  trace: RequestTrace;
}

/**
 * The responder of a lean call: its answer or error written on the HTTP/2 stream with its
 * trailers (reply.ts). A `grpc-timeout` that passes first answers deadline_exceeded and aborts the
 * call's signal.
 */
export function leanResponder(c: LeanCall): Responder {
  const { log, path, method, req, res, trace } = c;
  const stream = res.stream;
  // The answer goes on the stream itself: the compatibility response built for this stream
  // would send trailers of its own when the stream asks for them.
  stream.removeAllListeners("wantTrailers");
  const reply = new GrpcReply(stream, trace.id);
  // The code of the metrics and the access line (observe.ts): what the reply sent, unless the
  // client reset the stream first (canceled, or past its deadline, whatever the call's failure
  // then said), or this server's own deadline answered it.
  trace.grpcStatus = () => (reply.status === undefined || (stream.aborted && reply.code !== "deadline_exceeded") ? undefined : String(reply.status));
  const fail = (err: unknown) => reply.fail(err instanceof ConnectError && isProtocolError(err) ? err : publicError(err, log, path, trace.id));

  const call = async (caller: Caller | undefined, body: AsyncIterable<Uint8Array>): Promise<void> => {
    // The deadline starts with the call, as connect-node starts it (a malformed one is answered
    // in Connect's words); the answer's compression is negotiated as connect-node does.
    const timeoutMs = grpcDeadline(req.headers);
    if (timeoutMs !== undefined) {
      reply.deadline(timeoutMs);
      trace.deadlineMs = timeoutMs;
    }
    const compression = requestCompression(req.headers);
    reply.compression = responseCompression(req.headers, compression);
    const limit = bodyLimit(method);
    const whole = await readAll(body);
    reply.complete = true;
    const message = await unaryMessage(method, whole, compression, limit);
    const out = await c.invoke({
      method,
      message,
      contextValues: createContextValues().set(preAuthKey, { caller }).set(traceKey, trace),
      protocolName: "grpc",
      requestMethod: "POST",
      url: path,
      header: () => headersOf(req.headers),
      signal: reply.signal,
      timeoutMs,
    });
    reply.message(method, out.message, out.header, out.trailer);
  };

  return {
    refuse: fail,
    headers(h) {
      reply.headers = h;
    },
    serve(caller, body) {
      call(caller, body)
        .catch(fail)
        .catch((err) => {
          // The answer could not even be written: logged, and the stream destroyed.
          if (stream.aborted) log.debug("rpc: the client went away", { rpc: path, request_id: trace.id });
          else log.warn("rpc stream ended early", { rpc: path, request_id: trace.id, err });
          if (!stream.destroyed) stream.destroy();
        });
    },
  };
}
