import { type HandlerContext, createContextKey } from "@connectrpc/connect";
import type { FieldViolation } from "../billing/errors.js";
import type { Caller } from "../billing/tenancy.js";
import type { RequestTrace } from "../ops/trace.js";

/** The authenticated caller, set by the auth interceptor for every call that needs a key. */
export const callerKey = createContextKey<Caller | undefined>(undefined, { description: "caller" });

/** The request's trace (ops/trace.ts): its request id, and the code the error interceptor records. */
export const traceKey = createContextKey<RequestTrace | undefined>(undefined, { description: "request trace" });

/**
 * Set by the server's call paths (edge/connect.ts for connect-node, invoke.ts for the lean gRPC
 * path and the REST bridge), whose implementations can give a stored answer in their place
 * (idempotency.ts `replaying`): an idempotent replay then goes on to the implementation, so that
 * its answer has the call's own response headers and trailers on every protocol.
 */
export const replaySeamKey = createContextKey<boolean>(false, { description: "replay at the implementation" });

/**
 * The call's Idempotency-Key (DESIGN §12), set by the idempotency interceptor (idempotency.ts) once
 * it claimed the key: the same on every protocol. Set only for a call that runs; a replay never
 * reaches the method's work.
 */
export const idempotencyKeyKey = createContextKey<string | undefined>(undefined, { description: "idempotency key" });

/** The Idempotency-Key the call runs under, if it has one (a write whose IDs derive from it: credit notes). */
export const idempotencyKeyOf = (ctx: HandlerContext): string | undefined => ctx.values.get(idempotencyKeyKey);

export function callerOf(ctx: HandlerContext): Caller {
  const caller = ctx.values.get(callerKey);
  if (!caller) throw new Error("no caller in context: the auth interceptor did not run");
  return caller;
}

/**
 * Per-item instants of a request's JSON that did not read (src/rpc/json.ts), by message (0 for a
 * unary request; the position in a client stream) and field path: the method takes each one to
 * reject the one event holding it. Taken entries are dropped, so a long stream holds only those of
 * messages not yet handled.
 */
export class DeferredProblems {
  private readonly byMessage = new Map<number, Map<string, string>>();
  add(message: number, violations: readonly FieldViolation[]): void {
    if (violations.length === 0) return;
    const m = this.byMessage.get(message) ?? new Map<string, string>();
    for (const v of violations) m.set(v.field, v.description);
    this.byMessage.set(message, m);
  }
  take(message: number, path: string): string | undefined {
    const m = this.byMessage.get(message);
    const problem = m?.get(path);
    if (problem !== undefined) {
      m?.delete(path);
      if (m?.size === 0) this.byMessage.delete(message);
    }
    return problem;
  }
}

export const deferredKey = createContextKey<DeferredProblems | undefined>(undefined, { description: "deferred problems" });

/** The deferred problem of `path` in message `message` of the call, if any (taken). */
export function deferredProblem(ctx: HandlerContext, message: number, path: string): string | undefined {
  return ctx.values.get(deferredKey)?.take(message, path);
}
