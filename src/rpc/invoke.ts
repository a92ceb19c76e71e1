/**
 * One call path into the implementations of the methods that answer once (unary and
 * client-streaming): the request goes through the server's one list of interceptors (errors, auth,
 * strict instants: app.ts) and then to the implementation, exactly as connect-node's handlers run
 * them (`applyInterceptors`, then `impl(message, context)`). connect-node uses the list for
 * Connect, gRPC-Web and gRPC's server and bidirectional streams; the REST bridge (direct.ts) and
 * the lean gRPC paths (grpc-unary.ts, and grpc-stream.ts for client streams) call through here.
 *
 * What it skips is what only connect-node's wire machinery needs: per call, connect-node builds a
 * Headers object for the request and two for the response, links two AbortControllers (whose
 * abort at the end of every call constructs a DOMException) and runs the message through
 * async-iterable pipelines. Here the headers are built only if something reads them, and the
 * signal is the caller's (never aborted unless the call has a deadline).
 */
import { type DescMethod, type Message, create, isMessage } from "@bufbuild/protobuf";
import type { ContextValues, HandlerContext, Interceptor, ServiceImplSpec, UnaryRequest, UnaryResponse } from "@connectrpc/connect";

/**
 * One unary or client-streaming call as a transport hands it in: the decoded request (a client
 * stream's messages as they are read) and what the implementation may read of the call.
 */
export interface Invocation {
  method: DescMethod;
  message: Message | AsyncIterable<Message>;
  /** The call's values: the server's pre-authentication (auth.ts preAuthKey) at least. */
  contextValues: ContextValues;
  /** "grpc", "rest": what context.protocolName says. */
  protocolName: string;
  requestMethod: string;
  url: string;
  /** The request's headers, built only when an interceptor or implementation reads them. */
  header: () => Headers;
  /** Aborted when the call should stop (its deadline); never aborted if absent. */
  signal?: AbortSignal;
  timeoutMs?: number;
}

/** The output message, and the response headers and trailers the implementation set (undefined: none). */
export interface InvocationOutcome {
  message: Message;
  header: Headers | undefined;
  trailer: Headers | undefined;
}

export type Invoker = (call: Invocation) => Promise<InvocationOutcome>;

const NEVER_ABORTED = new AbortController().signal;

/** The implementation's view of a call (HandlerContext): response headers and trailers built on first use. */
class CallContext implements HandlerContext {
  readonly service;
  readonly method;
  responseHeaders?: Headers;
  responseTrailers?: Headers;
  constructor(
    private readonly req: UnaryRequest,
    readonly protocolName: string,
    private readonly timeout: number | undefined,
  ) {
    this.service = req.service;
    this.method = req.method;
  }
  get requestMethod() {
    return this.req.requestMethod;
  }
  get url() {
    return this.req.url;
  }
  get values() {
    return this.req.contextValues;
  }
  get signal() {
    return this.req.signal;
  }
  get requestHeader() {
    return this.req.header;
  }
  timeoutMs(): number | undefined {
    return this.timeout;
  }
  get responseHeader(): Headers {
    this.responseHeaders ??= new Headers();
    return this.responseHeaders;
  }
  get responseTrailer(): Headers {
    this.responseTrailers ??= new Headers();
    return this.responseTrailers;
  }
}

/** As connect's applyInterceptors: the first interceptor of the list is the outermost. */
function applyInterceptors(next: (req: UnaryRequest) => Promise<UnaryResponse>, interceptors: readonly Interceptor[]) {
  return interceptors.reduceRight((n, i) => i(n as never) as unknown as typeof next, next);
}

/**
 * The invoker of every unary and client-streaming method of `specs`, through `interceptors` (the
 * router's list). A client stream's interceptors see a stream request whose message is the
 * messages' iterable, as connect-node gives them; its answer is one message, as a unary one.
 */
export function createInvoker(specs: readonly ServiceImplSpec[], interceptors: readonly Interceptor[]): Invoker {
  const chains = new Map<DescMethod, (req: UnaryRequest) => Promise<UnaryResponse>>();
  for (const spec of specs) {
    for (const m of Object.values(spec.methods)) {
      if (m.kind !== "unary" && m.kind !== "client_streaming") continue;
      const impl = m.impl as (input: Message | AsyncIterable<Message>, ctx: HandlerContext) => Promise<unknown>;
      const output = m.method.output;
      const innermost = async (req: UnaryRequest): Promise<UnaryResponse> => {
        const ctx = (req as UnaryRequest & { ctx: CallContext }).ctx;
        const out = await impl(req.message, ctx);
        const message = isMessage(out, output) ? out : create(output, out as never);
        return {
          stream: req.stream,
          service: req.service,
          method: req.method,
          message,
          get header() {
            return ctx.responseHeader;
          },
          get trailer() {
            return ctx.responseTrailer;
          },
        } as UnaryResponse;
      };
      chains.set(m.method, applyInterceptors(innermost, interceptors));
    }
  }
  return async (call) => {
    const chain = chains.get(call.method);
    if (!chain) throw new Error(`no unary or client-streaming implementation of ${call.method.parent.typeName}.${call.method.name}`);
    let header: Headers | undefined;
    // The interceptors' view of the call (request headers built on first read); the context rides
    // along, also on a request an interceptor makes of its own by spreading this one.
    const req = {
      stream: call.method.methodKind !== "unary",
      service: call.method.parent,
      method: call.method,
      requestMethod: call.requestMethod,
      url: call.url,
      signal: call.signal ?? NEVER_ABORTED,
      contextValues: call.contextValues,
      message: call.message,
      get header(): Headers {
        header ??= call.header();
        return header;
      },
    } as unknown as UnaryRequest & { ctx: CallContext };
    const ctx = new CallContext(req, call.protocolName, call.timeoutMs);
    req.ctx = ctx;
    const res = await chain(req);
    // An interceptor that answered by itself (a replay: rpc/idempotency.ts) gave headers of its own.
    const own = Object.getOwnPropertyDescriptor(res, "header")?.value as Headers | undefined;
    if (own !== undefined) for (const [name, value] of own) ctx.responseHeader.set(name, value);
    return { message: res.message as Message, header: ctx.responseHeaders, trailer: ctx.responseTrailers };
  };
}
