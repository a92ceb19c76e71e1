/**
 * The unary methods' one call path for the REST bridge and the lean gRPC path: the server's
 * interceptors (app.ts), then the implementation, as connect's invokeUnaryImplementation runs them
 * (which would build the request headers eagerly; here they are built on first read). An
 * idempotent replay reaches the implementation's seam as on connect-node (context.ts replaySeamKey).
 */
import { type DescMethod, type Message, create, isMessage } from "@bufbuild/protobuf";
import type { ContextValues, HandlerContext, Interceptor, ServiceImplSpec, UnaryRequest, UnaryResponse } from "@connectrpc/connect";
import { replaySeamKey } from "./context.js";

/** One unary call as a transport hands it in: the decoded request and what the implementation may read of the call. */
export interface Invocation {
  method: DescMethod;
  message: Message;
  /** The call's values: the server's pre-authentication (auth.ts preAuthKey) at least. */
  contextValues: ContextValues;
  /** "grpc", "rest": what context.protocolName says. */
  protocolName: string;
  requestMethod: string;
  url: string;
  /** The request's headers, built only when an interceptor or implementation reads them. */
  header: () => Headers;
  /** Aborted when the call should stop (its deadline); never aborted if absent. */
  signal?: AbortSignal | undefined;
  timeoutMs?: number | undefined;
}

/** The output message, and the call's response headers and trailers. */
export type Invoker = (call: Invocation) => Promise<{ message: Message; header: Headers; trailer: Headers }>;

const NEVER_ABORTED = new AbortController().signal;

type Chain = (req: UnaryRequest) => Promise<UnaryResponse>;

/** As connect's copyHeaders: the headers an interceptor's response carries become the call's. */
function copyHeaders(from: Headers, to: Headers): void {
  if (from === to) return;
  for (const key of [...to.keys()]) to.delete(key);
  for (const [key, value] of from) to.set(key, value);
}

/** The invoker of every unary method of `specs`, through `interceptors` (the router's list; the first is the outermost). */
export function createInvoker(specs: readonly ServiceImplSpec[], interceptors: readonly Interceptor[]): Invoker {
  const chains = new Map<DescMethod, Chain>();
  for (const spec of specs) {
    for (const m of Object.values(spec.methods)) {
      if (m.kind !== "unary") continue;
      const impl = m.impl as (input: Message, ctx: HandlerContext) => Promise<unknown>;
      const output = m.method.output;
      const innermost: Chain = async (req) => {
        const ctx = (req as UnaryRequest & { ctx: HandlerContext }).ctx;
        const out = await impl(req.message, ctx);
        const message = isMessage(out, output) ? out : create(output, out as never);
        return { stream: false, service: req.service, method: req.method, message, header: ctx.responseHeader, trailer: ctx.responseTrailer } as UnaryResponse;
      };
      chains.set(
        m.method,
        interceptors.reduceRight<Chain>((next, i) => i(next as never) as unknown as Chain, innermost),
      );
    }
  }
  return async (call) => {
    const chain = chains.get(call.method);
    if (!chain) throw new Error(`no unary implementation of ${call.method.parent.typeName}.${call.method.name}`);
    let header: Headers | undefined;
    const common = { service: call.method.parent, method: call.method, requestMethod: call.requestMethod, url: call.url, signal: call.signal ?? NEVER_ABORTED };
    // The interceptors' view of the call (request headers built on first read); the context rides
    // along, also on a request an interceptor makes of its own by spreading this one.
    const req = {
      ...common,
      stream: false,
      contextValues: call.contextValues,
      message: call.message,
      get header(): Headers {
        header ??= call.header();
        return header;
      },
    } as unknown as UnaryRequest & { ctx: HandlerContext };
    const ctx: HandlerContext = {
      ...common,
      protocolName: call.protocolName,
      values: call.contextValues,
      get requestHeader() {
        return req.header;
      },
      timeoutMs: () => call.timeoutMs,
      responseHeader: new Headers(),
      responseTrailer: new Headers(),
    };
    req.ctx = ctx;
    call.contextValues.set(replaySeamKey, true);
    const res = await chain(req);
    copyHeaders(res.header, ctx.responseHeader);
    copyHeaders(res.trailer, ctx.responseTrailer);
    return { message: res.message as Message, header: ctx.responseHeader, trailer: ctx.responseTrailer };
  };
}
