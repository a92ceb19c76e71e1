/**
 * Retrying an attempt that lost a race: a cancellation or change whose row moved on under it (a
 * cycle closed, another change applied) or that the database gave up on (a deadlock, a lock wait)
 * starts over from a fresh read, a few times, then answers `aborted` (409, retryable).
 */
import { AbortedError } from "../errors.js";

/** How many times a cancellation or change that lost a race to a cycle close (or a deadlock) is tried in all. */
export const RACE_ATTEMPTS = 8;

/** After this long, a call that keeps losing races gives up (aborted) rather than try again. */
const RACE_BUDGET_MS = 5_000;

/** The error of an attempt that lost a race: retried by retryingRaces, `aborted` (409) if it must give up. */
export function lostRace(id: string): AbortedError {
  return new AbortedError("SUBSCRIPTION_CHANGED", `subscription ${id} changed meanwhile (a billing cycle closed or another change applied); try again`, { subscription_id: id });
}

/** A short jittered backoff before attempt `n + 1`: about 5, 10, 20, … ms, at most 160. */
function backoff(n: number): Promise<void> {
  const base = Math.min(160, 5 * 2 ** (n - 1));
  return new Promise((r) => setTimeout(r, base / 2 + Math.random() * base));
}

/**
 * Runs `attempt` until it does not lose a race (an AbortedError: the row moved on under it, or
 * the database gave up on a deadlock or lock wait), at most RACE_ATTEMPTS times with a short
 * jittered backoff. Each attempt must re-read what it decides on. Past the last attempt the
 * AbortedError goes to the caller (409, retryable); any other error at once.
 */
export async function retryingRaces<T>(attempt: (n: number) => Promise<T>, budgetMs = RACE_BUDGET_MS): Promise<T> {
  const started = Date.now();
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (err) {
      // Attempts are also bounded in time: a lock wait timeout alone can take the database's
      // innodb_lock_wait_timeout (50 s by default), and the caller should hear `aborted` sooner.
      if (!(err instanceof AbortedError) || n >= RACE_ATTEMPTS || Date.now() - started > budgetMs) throw err;
      await backoff(n);
    }
  }
}
