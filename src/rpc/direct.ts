/**
 * Calling a unary method's implementation in-process, as the REST bridge does: the request JSON
 * is read into the method's input message for the caller the server authenticated from the
 * headers before reading the body (server.ts, with auth.ts), errors are mapped (errors.ts) by the
 * same function the Connect interceptor calls, and the output message is written back as proto
 * JSON with the router's options.
 *
 * It skips what only a wire protocol needs: Connect's universal handler builds a Headers object,
 * two linked AbortControllers (whose abort at the end of every call constructs a DOMException),
 * and an encoded body that the bridge read back. That machinery cost a REST call more than
 * the call itself (about four times a bare Node HTTP response on this project's machine).
 */
import { type DescMethod, type JsonObject, type JsonReadOptions, type JsonWriteOptions, create, fromJson, isMessage, toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, type ContextValues, type HandlerContext, type ServiceImplSpec, createContextValues } from "@connectrpc/connect";
import type { FieldViolation } from "../billing/errors.js";
import type { Caller } from "../billing/tenancy.js";
import type { Logger } from "../log.js";
import { DeferredProblems, callerKey, deferredKey } from "./context.js";
import { publicError } from "./errors.js";

export type DirectResult = { ok: true; json: JsonObject } | { ok: false; error: ConnectError };

export interface DirectCall {
  method: DescMethod;
  /** The request message as proto JSON (unknown fields are ignored). */
  json: JsonObject;
  /** Per-item instants the JSON reader left out (rpc/json.ts), for the method to reject their items. */
  deferred?: FieldViolation[];
  /** The caller, authenticated from the X-API-Key header (undefined for the services that need no key). */
  caller: Caller | undefined;
  /** The HTTP method and path the call came in on (context for the implementation). */
  requestMethod: string;
  url: string;
}

/** A call's context: what the implementations read (the caller in `values`) without per-call signals. */
class DirectContext implements HandlerContext {
  readonly service;
  readonly protocolName = "rest";
  readonly values: ContextValues = createContextValues();
  private headers?: [Headers, Headers, Headers];
  constructor(
    readonly method: DescMethod,
    readonly requestMethod: string,
    readonly url: string,
    caller: Caller | undefined,
  ) {
    this.service = method.parent;
    if (caller) this.values.set(callerKey, caller);
  }
  /** Never aborted: a REST call runs to its end (an ingest commits) even if its client has gone. */
  get signal(): AbortSignal {
    return NEVER_ABORTED;
  }
  timeoutMs(): undefined {
    return undefined;
  }
  private lazyHeaders(): [Headers, Headers, Headers] {
    this.headers ??= [new Headers(), new Headers(), new Headers()];
    return this.headers;
  }
  get requestHeader(): Headers {
    return this.lazyHeaders()[0];
  }
  get responseHeader(): Headers {
    return this.lazyHeaders()[1];
  }
  get responseTrailer(): Headers {
    return this.lazyHeaders()[2];
  }
}

const NEVER_ABORTED = new AbortController().signal;

/** `jsonOptions`: the router's, so that a REST call reads and writes JSON as a Connect call does. */
export function createDirectCaller(specs: readonly ServiceImplSpec[], log: Logger, jsonOptions: Partial<JsonReadOptions & JsonWriteOptions>) {
  const impls = new Map<DescMethod, ServiceImplSpec["methods"][string]>();
  for (const spec of specs) for (const m of Object.values(spec.methods)) if (m.kind === "unary") impls.set(m.method, m);

  return async function call(c: DirectCall): Promise<DirectResult> {
    const rpc = `/${c.method.parent.typeName}/${c.method.name}`;
    try {
      const spec = impls.get(c.method);
      if (!spec || spec.kind !== "unary") throw new ConnectError(`${c.method.parent.typeName}.${c.method.name} is not implemented`, Code.Unimplemented);
      let input;
      try {
        input = fromJson(c.method.input, c.json, jsonOptions);
      } catch (err) {
        throw ConnectError.from(err, Code.InvalidArgument);
      }
      const ctx = new DirectContext(c.method, c.requestMethod, c.url, c.caller);
      if (c.deferred && c.deferred.length > 0) {
        const problems = new DeferredProblems();
        problems.add(0, c.deferred);
        ctx.values.set(deferredKey, problems);
      }
      const out = await spec.impl(input, ctx);
      const message = isMessage(out, c.method.output) ? out : create(c.method.output, out);
      return { ok: true, json: toJson(c.method.output, message, jsonOptions) as JsonObject };
    } catch (err) {
      return { ok: false, error: publicError(err, log, rpc) };
    }
  };
}
