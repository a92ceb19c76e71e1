import { type HandlerContext, createContextKey } from "@connectrpc/connect";
import type { Caller } from "../billing/tenancy.js";

/** The authenticated caller, set by the auth interceptor for every call that needs a key. */
export const callerKey = createContextKey<Caller | undefined>(undefined, { description: "caller" });

export function callerOf(ctx: HandlerContext): Caller {
  const caller = ctx.values.get(callerKey);
  if (!caller) throw new Error("no caller in context: the auth interceptor did not run");
  return caller;
}
