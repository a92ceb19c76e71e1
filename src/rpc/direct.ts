/**
 * Calling a unary method's implementation in-process, as the REST bridge does: the request JSON
 * is read into the method's input message for the caller the server authenticated from the
 * headers before reading the body (server.ts, with auth.ts), the call goes through the server's
 * one list of interceptors (invoke.ts: errors, auth) into the implementation, errors
 * are what the client is told (errors.ts publicError), and the output message is written back as
 * proto JSON with the router's options, then as REST writes it (json-out.ts: `null` for unset
 * optional fields, spec numbers as JSON numbers).
 *
 * It skips what only a wire protocol needs (see invoke.ts): that machinery cost a REST call more
 * than the call itself (about four times a bare Node HTTP response on this project's machine).
 */
import { type DescMethod, type JsonObject, type JsonReadOptions, type JsonWriteOptions, type Message, fromJson, toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues } from "@connectrpc/connect";
import type { FieldViolation } from "../billing/errors.js";
import type { Caller } from "../billing/tenancy.js";
import type { Logger } from "../log.js";
import type { RequestTrace } from "../ops/trace.js";
import { preAuthKey } from "./auth.js";
import { DeferredProblems, deferredKey, traceKey } from "./context.js";
import { publicError } from "./errors.js";
import type { Invoker } from "./invoke.js";
import { type RestJson, restJson } from "./json-out.js";

/** `json` holds raw numbers when `rawNumbers` is set: write it with json-out.ts stringifyRest. */
export type DirectResult = ({ ok: true; header?: Headers | undefined } & RestJson) | { ok: false; error: ConnectError };

export interface DirectCall {
  method: DescMethod;
  /** The request message as proto JSON (unknown fields are ignored). */
  json: JsonObject;
  /** The request message itself, when the body was read straight into it (rpc/convert fastRequestReaders): `json` is then unused. */
  message?: Message | undefined;
  /** Per-item instants the JSON reader left out (rpc/json.ts), for the method to reject their items. */
  deferred?: FieldViolation[];
  /** The caller, authenticated from the X-API-Key header (undefined for the services that need no key). */
  caller: Caller | undefined;
  /** The HTTP method and path the call came in on (context for the implementation). */
  requestMethod: string;
  url: string;
  /** The request's trace (its id goes in log lines and error details). */
  trace?: RequestTrace | undefined;
  /** The request's headers, for what reads them (Idempotency-Key: rpc/idempotency.ts). */
  header?: (() => Headers) | undefined;
}

/**
 * `jsonOptions`: the router's, so that a REST call reads and writes JSON as a Connect call does.
 * A REST call's signal is never aborted: it runs to its end (an ingest commits) even if its client has gone.
 */
export function createDirectCaller(invoke: Invoker, log: Logger, jsonOptions: Partial<JsonReadOptions & JsonWriteOptions>) {
  return async function call(c: DirectCall): Promise<DirectResult> {
    const rpc = `/${c.method.parent.typeName}/${c.method.name}`;
    try {
      if (c.method.methodKind !== "unary") throw new ConnectError(`${c.method.parent.typeName}.${c.method.name} is not implemented`, Code.Unimplemented);
      let message: Message;
      try {
        message = c.message ?? fromJson(c.method.input, c.json, jsonOptions);
      } catch (err) {
        throw ConnectError.from(err, Code.InvalidArgument);
      }
      const contextValues = createContextValues().set(preAuthKey, { caller: c.caller }).set(traceKey, c.trace);
      if (c.deferred && c.deferred.length > 0) {
        const problems = new DeferredProblems();
        problems.add(0, c.deferred);
        contextValues.set(deferredKey, problems);
      }
      const out = await invoke({
        method: c.method,
        message,
        contextValues,
        protocolName: "rest",
        requestMethod: c.requestMethod,
        url: c.url,
        header: c.header ?? (() => new Headers()),
      });
      return { ok: true, header: out.header, ...restJson(c.method.output, toJson(c.method.output, out.message, jsonOptions) as JsonObject) };
    } catch (err) {
      return { ok: false, error: publicError(err, log, rpc, c.trace?.id) };
    }
  };
}
