/**
 * REST error bodies: the Connect error JSON `{code, message, details}`. Each detail keeps
 * Connect's `{type, value}` form (value is the base64 protobuf) and adds `debug`, the same detail
 * as readable JSON, so a caller sees the reason and every violated field without decoding.
 * Every body ends with a google.rpc.RequestInfo detail naming the request's id (ops/trace.ts),
 * which the caller can quote and the server's log lines of the request carry.
 */
import { fromBinary, toJson } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus, errorToJson } from "@connectrpc/connect/protocol-connect";
import type { Res } from "../edge/listener.js";
import { BadRequestSchema, ErrorInfoSchema, RequestInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { traceOf } from "../ops/trace.js";
import { isRateLimited } from "../ratelimit.js";
import { ERROR_DOMAIN, withRequestInfo } from "../rpc/errors.js";

const KNOWN = { "google.rpc.ErrorInfo": ErrorInfoSchema, "google.rpc.BadRequest": BadRequestSchema, "google.rpc.RequestInfo": RequestInfoSchema } as const;

/**
 * An error raised by the bridge itself (before any handler ran), named by its code and reason: the
 * HTTP status is Connect's for the code unless `status` says otherwise (413, 415, 405: HTTP has
 * words for them that Connect's table does not).
 */
export function sendError(res: Res, code: Code, message: string, reason: string, status?: number): void {
  sendConnectError(res, new ConnectError(message, code, undefined, [{ desc: ErrorInfoSchema, value: { reason, domain: ERROR_DOMAIN } }]), status);
}

/**
 * A refusal of a plain HTTP request (admission, its body): a body over its bound (limits.ts
 * bodyTooLarge) is 413 with the details Connect and gRPC get (ErrorInfo PAYLOAD_TOO_LARGE with
 * its `limit`), anything else the error as it is.
 */
export function sendRefusal(res: Res, err: ConnectError): void {
  if (res.headersSent) res.end();
  else if (err.code === Code.ResourceExhausted && !isRateLimited(err)) sendConnectError(res, err, 413);
  else sendConnectError(res, err);
}

/**
 * A Connect error as a REST response: Connect's status (or `status`) and error JSON, with readable
 * `debug` on known details and the request's id as a RequestInfo detail.
 */
export function sendConnectError(res: Res, error: ConnectError, status = codeToHttpStatus(error.code)): void {
  const trace = traceOf(res);
  const err = withRequestInfo(error, trace?.id);
  const body = errorToJson(err, undefined) as { code: string; message?: string; details?: { type: string; value: string; debug?: unknown }[] };
  for (const d of body.details ?? []) {
    const schema = KNOWN[d.type as keyof typeof KNOWN];
    delete d.debug;
    if (!schema) continue;
    try {
      // Read back from the bytes sent, so that `debug` says exactly what `value` carries.
      d.debug = toJson(schema, fromBinary(schema, Buffer.from(d.value, "base64")), { useProtoFieldName: true });
    } catch {
      // leave the detail without debug
    }
  }
  if (trace) trace.code = body.code;
  // The error's metadata are headers, as connect-node 2.1.2 sends them on a unary error (Idempotent-Replayed).
  if (!res.headersSent) for (const [name, value] of err.metadata) res.setHeader(name, value);
  const text = JSON.stringify({ code: body.code, message: body.message ?? "", details: body.details ?? [] });
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}
