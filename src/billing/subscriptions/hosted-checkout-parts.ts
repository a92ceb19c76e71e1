/**
 * Parts of the hosted checkout's use cases (hosted-checkout.ts): what makes a checkout stale (what
 * it was for can no longer happen: it stays open, nothing saved) and a checkout's event.
 */
import { AbortedError, BillingError, UnavailableError } from "../errors.js";
import type { NewEvent } from "../events/types.js";
import type { CheckoutSession } from "./types.js";

/** What a checkout was for can no longer happen (a billing rule refuses it now): the checkout is stale. */
export class StaleEffect extends Error {
  constructor(override readonly cause: BillingError) {
    super(cause.message);
  }
}

/** Runs `f`; a billing rule's refusal (not a lost race: retried) becomes a StaleEffect (inside a transaction: rolled back). */
export async function staleOn<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (err) {
    if (err instanceof BillingError && !(err instanceof AbortedError) && !(err instanceof UnavailableError)) throw new StaleEffect(err);
    throw err;
  }
}

/**
 * A checkout's event. `subscription_id` is the subscription a change checkout changes; a subscribe
 * checkout's subscription is created after the checkout completes, with its own `subscription.created`.
 */
export function checkoutEvent(type: "checkout.completed" | "checkout.failed", c: CheckoutSession, failure: string | null): NewEvent {
  const subscriptionId = c.kind === "change" ? ((c.payload as { subscriptionId?: string }).subscriptionId ?? null) : null;
  return { type, environmentId: c.environmentId, resource: { kind: "checkout", checkout: c, subscriptionId, failure } };
}
