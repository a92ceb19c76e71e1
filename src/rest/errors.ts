/**
 * REST error bodies: the Connect error JSON `{code, message, details}`. Each detail keeps
 * Connect's `{type, value}` form (value is the base64 protobuf) and adds `debug`, the same detail
 * as readable JSON, so a caller sees the reason and every violated field without decoding.
 * Every body ends with a google.rpc.RequestInfo detail naming the request's id (ops/trace.ts),
 * which the caller can quote and the server's log lines of the request carry.
 */
import type { ServerResponse } from "node:http";
import type { Http2ServerResponse } from "node:http2";
import { fromBinary, toJson } from "@bufbuild/protobuf";
import { type Code, ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus, errorToJson } from "@connectrpc/connect/protocol-connect";
import type { FieldViolation } from "../billing/errors.js";
import { BadRequestSchema, ErrorInfoSchema, RequestInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { traceOf } from "../ops/trace.js";
import { ERROR_DOMAIN, withRequestInfo } from "../rpc/errors.js";

type Res = ServerResponse | Http2ServerResponse;

const KNOWN = { "google.rpc.ErrorInfo": ErrorInfoSchema, "google.rpc.BadRequest": BadRequestSchema, "google.rpc.RequestInfo": RequestInfoSchema } as const;

interface ConnectErrorJson {
  code: string;
  message?: string;
  details?: { type: string; value: string; debug?: unknown }[];
}

/**
 * An error raised by the bridge itself (before any handler ran), named by its code: the HTTP
 * status is Connect's for that code unless `status` says otherwise (413 for a body too large and
 * 405 for a wrong HTTP method, which HTTP has words for and Connect's table does not).
 */
export function sendError(res: Res, code: Code, message: string, reason: string, options: { violations?: FieldViolation[]; status?: number } = {}): void {
  const details: ConstructorParameters<typeof ConnectError>[3] = [{ desc: ErrorInfoSchema, value: { reason, domain: ERROR_DOMAIN } }];
  const violations = options.violations ?? [];
  if (violations.length > 0) details.push({ desc: BadRequestSchema, value: { fieldViolations: violations.map((v) => ({ field: v.field, description: v.description })) } });
  sendConnectError(res, new ConnectError(message, code, undefined, details), options.status);
}

/**
 * A Connect error as a REST response: Connect's status (or `status`) and error JSON, with readable
 * `debug` on known details and the request's id as a RequestInfo detail.
 */
export function sendConnectError(res: Res, error: ConnectError, status = codeToHttpStatus(error.code)): void {
  const trace = traceOf(res);
  const err = withRequestInfo(error, trace?.id);
  const body = errorToJson(err, undefined) as unknown as ConnectErrorJson;
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
