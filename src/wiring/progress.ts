/**
 * Progress lines of long runs: scheduler runs (a catch-up on real time, a test clock advanced
 * over years) and a new pricing metric's backfill.
 */
import type { RunProgress } from "../billing/subscriptions/scheduler.js";
import type { Logger } from "../log.js";

/** A long run (migrations, a scheduler catch-up, a test clock advance) logs its progress at most this often. */
export const PROGRESS_EVERY_MS = 5_000;

/**
 * Progress lines of long scheduler runs (a catch-up on real time, a test clock advanced over
 * years): at most every PROGRESS_EVERY_MS while a run goes on, and one at the end of a run that
 * logged any, with the cycles closed so far and the rate. `alive` is told of the real-time
 * scheduler's progress (readiness: a long catch-up is not a stuck scheduler).
 */
export function progressLogger(log: Logger, alive?: () => void): (p: RunProgress) => void {
  const lastLogged = new Map<string, number>();
  return (p) => {
    if (p.clockId === null) alive?.();
    const key = `${p.clockId}@${p.startedAt}`;
    const now = Date.now();
    const last = lastLogged.get(key);
    if (p.done) {
      if (last !== undefined) log.info("scheduler run finished", progressFields(p, now));
      lastLogged.delete(key);
      return;
    }
    if (now - (last ?? p.startedAt) < PROGRESS_EVERY_MS) return;
    lastLogged.set(key, now);
    log.info("scheduler run in progress", progressFields(p, now));
  };
}

function progressFields(p: RunProgress, now: number): Record<string, unknown> {
  const seconds = (now - p.startedAt) / 1000;
  return { clock: p.clockId ?? "real time", closed: p.closed, elapsed_s: Math.round(seconds * 10) / 10, per_s: seconds > 0 ? Math.round((p.closed / seconds) * 10) / 10 : null };
}

/**
 * Progress lines of a new pricing metric's backfill (its event name's stored events added to its
 * totals, 5,000 at a time, in the creating call): at most every PROGRESS_EVERY_MS.
 */
export function backfillLogger(log: Logger): (metric: { id: string; environmentId: string }, events: number, startedAt: number) => void {
  let last = 0;
  return (metric, events, startedAt) => {
    const now = Date.now();
    if (now - Math.max(last, startedAt) < PROGRESS_EVERY_MS) return;
    last = now;
    const seconds = (now - startedAt) / 1000;
    log.info("pricing metric backfill in progress", { metric: metric.id, environment: metric.environmentId, events, elapsed_s: Math.round(seconds * 10) / 10, per_s: Math.round(events / seconds) });
  };
}
