/**
 * A test clock's time while an advance runs what was due at an instant before its new time
 * (DESIGN §8: every change due up to the new time, in order, each at its own time): the scheduler
 * runs a dunning retry due on day 7 of an advance to day 40 as of day 7, so that the policy after
 * its last attempt cancels or pauses the subscription on day 7 (Lookups.nowFor reads it). Scoped
 * to the calls made from that step (async context): a request on the same clock meanwhile reads
 * the clock's own time.
 */
import { AsyncLocalStorage } from "node:async_hooks";

const step = new AsyncLocalStorage<{ clockId: string; at: Date }>();

/** Runs `fn` with test clock `clockId` read as at `at` by what it calls (steppedTime). */
export function atClockTime<T>(clockId: string, at: Date, fn: () => Promise<T>): Promise<T> {
  return step.run({ clockId, at }, fn);
}

/** The time test clock `clockId` is read at in this step of an advance (atClockTime), if in one. */
export function steppedTime(clockId: string): Date | undefined {
  const s = step.getStore();
  return s && s.clockId === clockId ? s.at : undefined;
}
