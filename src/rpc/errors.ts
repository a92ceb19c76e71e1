/**
 * The one place that maps domain errors to Connect/gRPC codes (and through the Connect code
 * table to HTTP statuses). Every error carries a google.rpc.ErrorInfo with a stable `reason`;
 * bad input also carries a google.rpc.BadRequest with every violated field and its path.
 */
import { type DescMessage, type MessageInitShape, create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ContextValues, type Interceptor } from "@connectrpc/connect";
import {
  AbortedError,
  AlreadyExistsError,
  type BillingError,
  BillingError as BillingErrorClass,
  FailedPreconditionError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
  UnauthenticatedError,
  UnavailableError,
} from "../billing/errors.js";
import { StorageConflictError, StorageUnavailableError } from "../billing/storage-errors.js";
import { BadRequestSchema, ErrorInfoSchema, RequestInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import type { Logger } from "../log.js";
import { codeName } from "../ops/trace.js";
import { traceKey } from "./context.js";

export const ERROR_DOMAIN = "billing.v1";

/** The Connect code of a domain error. */
export function codeOf(err: BillingError): Code {
  if (err instanceof InvalidArgumentError) return Code.InvalidArgument;
  if (err instanceof NotFoundError) return Code.NotFound;
  if (err instanceof AlreadyExistsError) return Code.AlreadyExists;
  if (err instanceof FailedPreconditionError) return Code.FailedPrecondition;
  if (err instanceof AbortedError) return Code.Aborted;
  if (err instanceof UnauthenticatedError) return Code.Unauthenticated;
  if (err instanceof PermissionDeniedError) return Code.PermissionDenied;
  if (err instanceof UnavailableError) return Code.Unavailable;
  return Code.Internal;
}

export function toConnectError(err: BillingError): ConnectError {
  const details: { desc: DescMessage; value: MessageInitShape<DescMessage> }[] = [{ desc: ErrorInfoSchema, value: { reason: err.reason, domain: ERROR_DOMAIN, metadata: err.metadata } }];
  // Bad input, or a state refusal about one of the request's fields: every field named, with its path.
  if (err instanceof InvalidArgumentError || (err instanceof FailedPreconditionError && err.violations.length > 0)) {
    details.push({ desc: BadRequestSchema, value: { fieldViolations: err.violations } });
  }
  return new ConnectError(err.message, codeOf(err), undefined, details);
}

/** Connect's own decode errors name a field only in prose; give them a reason like ours. */
function withReason(err: ConnectError): ConnectError {
  if (err.details.length > 0 || err.code !== Code.InvalidArgument) return err;
  return new ConnectError(err.rawMessage, err.code, err.metadata, [{ desc: ErrorInfoSchema, value: create(ErrorInfoSchema, { reason: "MALFORMED_REQUEST", domain: ERROR_DOMAIN }) }]);
}

function withInfo(message: string, code: Code, reason: string, metadata?: Record<string, string>): ConnectError {
  return new ConnectError(message, code, undefined, [{ desc: ErrorInfoSchema, value: { reason, domain: ERROR_DOMAIN, metadata } }]);
}

/**
 * Failures of the database rather than of the request, as the stores report them
 * (billing/storage-errors.ts): one that cannot be reached is `unavailable` (503); a deadlock or
 * lock wait timeout that outlived the service's own retries is `aborted` (409). Both are worth
 * retrying; neither says more.
 */
function databaseError(err: unknown, log: Logger, rpc: string, requestId: string | undefined): ConnectError | undefined {
  if (err instanceof StorageUnavailableError) {
    log.warn("rpc failed: database unavailable", { rpc, request_id: requestId, err });
    return withInfo("the database is unavailable; try again later", Code.Unavailable, "DATABASE_UNAVAILABLE");
  }
  if (err instanceof StorageConflictError) {
    log.warn("rpc failed: database conflict", { rpc, request_id: requestId, err });
    return withInfo("the request conflicted with another one; try again", Code.Aborted, "CONFLICT");
  }
  return undefined;
}

/**
 * What a caller is told of an error: domain errors become their code; an unreachable database
 * is `unavailable` and a persistent lock conflict `aborted`; anything else unexpected becomes
 * `internal` with the message "internal error" (the cause is logged under `rpc`, never sent).
 * The Connect interceptor and the REST bridge both call it. `requestId` (ops/trace.ts) goes in
 * the log line of the cause and, as a google.rpc.RequestInfo detail, in what the caller is told.
 */
export function publicError(err: unknown, log: Logger, rpc: string, requestId?: string): ConnectError {
  // Already told (the interceptor ran, and the call path maps what is thrown around it too): as is, logged once.
  if (err instanceof ConnectError && published.has(err)) return withRequestInfo(err, requestId);
  const out = withRequestInfo(toPublic(err, log, rpc, requestId), requestId);
  published.add(out);
  return out;
}

/**
 * `err` with a google.rpc.RequestInfo {request_id} detail after its others (a new error: errors
 * may be shared), unless it has one or there is no id. What it returns counts as published.
 */
export function withRequestInfo(err: ConnectError, requestId: string | undefined): ConnectError {
  if (requestId === undefined) return err;
  for (const d of err.details) if ((("desc" in d ? d.desc.typeName : d.type) as string) === "google.rpc.RequestInfo") return err;
  const out = new ConnectError(err.rawMessage, err.code, err.metadata, undefined, err.cause);
  out.details.push(...err.details, { desc: RequestInfoSchema, value: { requestId } });
  published.add(out);
  return out;
}

/** The errors publicError made: what a client may be told. */
const published = new WeakSet<ConnectError>();

/**
 * Bytes of the caller's that do not read as what the request says they are (not the compression
 * it names, not base64, an envelope no protocol has): invalid_argument with `reason`
 * (MALFORMED_COMPRESSION, MALFORMED_ENVELOPE, MALFORMED_BASE64, …) in an ErrorInfo, as every error
 * of the service carries one. Never a 500 / internal: the request is at fault, not the server.
 */
export function malformedRequest(message: string, reason: string, metadata?: Record<string, string>): ConnectError {
  return withInfo(message, Code.InvalidArgument, reason, metadata);
}

function toPublic(err: unknown, log: Logger, rpc: string, requestId: string | undefined): ConnectError {
  if (err instanceof BillingErrorClass) return toConnectError(err);
  if (err instanceof ConnectError && err.code !== Code.Internal && err.code !== Code.Unknown) return withReason(err);
  const cause = err instanceof ConnectError ? (err.cause ?? err) : err;
  const db = databaseError(cause, log, rpc, requestId);
  if (db) return db;
  log.error("rpc failed", { rpc, request_id: requestId, err: cause });
  return new ConnectError("internal error", Code.Internal);
}

/**
 * Wraps every Connect, gRPC and gRPC-Web call with publicError, with the request's id (its trace
 * in the call's context values, set by the server), and records the error's code on the trace.
 * A server stream fails while its messages are read, after the call returned: those errors too
 * (WatchEvents' not_found for an unknown cursor would otherwise reach the client as internal).
 */
export function errorInterceptor(log: Logger): Interceptor {
  return (next) => async (req) => {
    try {
      const res = await next(req);
      const kind = req.method.methodKind;
      return res.stream && (kind === "server_streaming" || kind === "bidi_streaming") ? { ...res, message: publishedMessages(res.message, log, req) } : res;
    } catch (err) {
      throw callError(err, log, req);
    }
  };
}

/** What the caller of `req` is told of `err` (publicError), its code recorded on the request's trace. */
function callError(err: unknown, log: Logger, req: { url: string; contextValues: ContextValues }): ConnectError {
  const trace = req.contextValues.get(traceKey);
  const out = publicError(err, log, req.url, trace?.id);
  if (trace) trace.code = codeName(out.code);
  return out;
}

/** Node's error for a stream that closed before its end (ERR_STREAM_PREMATURE_CLOSE), itself or as the cause. */
function closedEarly(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 3; e = e.cause, depth++) {
    if ((e as { code?: unknown }).code === "ERR_STREAM_PREMATURE_CLOSE") return true;
  }
  return false;
}

/**
 * A server stream's messages, with the error that ends it made public (callError); a stream that
 * ends because its client left or its deadline passed ends with the abort's error (canceled,
 * deadline_exceeded), which is no failure of the server's.
 */
async function* publishedMessages<T>(messages: AsyncIterable<T>, log: Logger, req: { url: string; contextValues: ContextValues; signal: AbortSignal }): AsyncIterable<T> {
  try {
    yield* messages;
  } catch (err) {
    if (req.signal.aborted && (err === req.signal.reason || (err instanceof Error && err.name === "AbortError"))) throw ConnectError.from(err);
    // The request stream closed under the call (the client reset it, or the server cut a
    // key-less stream past its time): canceled, no failure of the server's.
    if (closedEarly(err)) throw new ConnectError("the stream was closed before it ended", Code.Canceled);
    throw callError(err, log, req);
  }
}
