/**
 * Idempotent writes (DESIGN §12): what a call with an `Idempotency-Key` meets, decided from the
 * key's stored row. Pure: the store (db/stores/idempotency-store.ts) reads and writes the row in
 * one transaction, the interceptor (rpc/idempotency.ts) acts on the decision.
 */

/** How long a key and its outcome are kept (DESIGN §12: at least 24 hours), then swept. */
export const IDEMPOTENCY_KEY_TTL_MS = 24 * 60 * 60 * 1000;
/**
 * How long a first call holds its key while it runs. A claim older than this belongs to a call
 * whose server died: if it committed no change, the key is taken over and the call runs again.
 */
export const IDEMPOTENCY_LEASE_MS = 5 * 60 * 1000;
/** How long a repeat waits for a first call still running before it is answered 409 IN_USE. */
export const IDEMPOTENCY_IN_USE_WAIT_MS = 2_000;

/** The first wait before a key's outcome is written again after the database refused it; it doubles up to SETTLE_RETRY_MAX_MS. */
export const SETTLE_RETRY_FIRST_MS = 250;
export const SETTLE_RETRY_MAX_MS = 5_000;

/**
 * Writes a call's decided outcome to its key (or lets the key go), again and again, after the
 * database refused the first write: a moment's outage (a failover, a proxy restarted) must not
 * leave the key IN_USE until its lease ends, when a retry would hear OUTCOME_LOST for a call whose
 * answer was known. Waits 250 ms, doubling up to 5 s, between writes; gives up when the lease
 * would have lapsed anyway, or when `stopped` aborts (the server stops: the lease then settles the
 * key, as for a server that died).
 */
export function settleLater(write: () => Promise<unknown>, stopped: AbortSignal | undefined, gaveUp: (err: unknown) => void, leaseMs = IDEMPOTENCY_LEASE_MS): void {
  const end = Date.now() + leaseMs;
  let wait = SETTLE_RETRY_FIRST_MS;
  const again = () => {
    if (stopped?.aborted) return;
    write().catch((err: unknown) => {
      if (stopped?.aborted || Date.now() + wait >= end) return gaveUp(err);
      setTimeout(again, wait).unref();
      wait = Math.min(wait * 2, SETTLE_RETRY_MAX_MS);
    });
  };
  setTimeout(again, wait).unref();
  wait = Math.min(wait * 2, SETTLE_RETRY_MAX_MS);
}

/** 1–255 printable ASCII characters (DESIGN §12). */
export const IDEMPOTENCY_KEY_MAX = 255;
export function idempotencyKeyProblem(key: string): string | undefined {
  if (key.length === 0) return "must not be empty";
  if (key.length > IDEMPOTENCY_KEY_MAX) return `must have at most ${IDEMPOTENCY_KEY_MAX} characters`;
  if (!/^[\x20-\x7e]+$/.test(key)) return "must be printable ASCII characters (0x20–0x7E)";
  return undefined;
}

/**
 * The first call's outcome, as stored and replayed: success is the output message's protobuf
 * bytes (base64); an error its code, message and details (type and protobuf bytes, base64), so
 * each protocol writes the replay exactly as it wrote the first answer.
 */
export type IdempotencyOutcome = { ok: true; message: string } | { ok: false; code: number; message: string; details: { type: string; value: string }[] };

export interface IdempotencyKeyState {
  fingerprint: string;
  rpc: string;
  state: "running" | "done";
  claimToken: string;
  /** A transaction of the first call committed a change. */
  changed: boolean;
  lockedUntil: Date;
  expiresAt: Date;
  outcome: IdempotencyOutcome | null;
}

export type IdempotencyDecision =
  /** No live row (none, expired, or a dead claim that changed nothing): claim it and run. */
  | { kind: "claim" }
  | { kind: "replay"; outcome: IdempotencyOutcome }
  /** The key was used for another method or other parameters. */
  | { kind: "reused"; rpc: string }
  | { kind: "in_use" }
  /** The first call committed a change and its server died before it stored the answer. */
  | { kind: "lost" };

export function decide(row: IdempotencyKeyState | undefined, fingerprint: string, now: Date): IdempotencyDecision {
  if (row === undefined || row.expiresAt.getTime() <= now.getTime()) return { kind: "claim" };
  if (row.fingerprint !== fingerprint) return { kind: "reused", rpc: row.rpc };
  if (row.state === "done" && row.outcome !== null) return { kind: "replay", outcome: row.outcome };
  if (row.lockedUntil.getTime() > now.getTime()) return { kind: "in_use" };
  return row.changed ? { kind: "lost" } : { kind: "claim" };
}

/** A key this call holds while it runs. */
export interface IdempotencyClaim {
  environmentId: string;
  key: string;
  token: string;
}

export type ClaimResult = { kind: "claimed"; claim: IdempotencyClaim } | Exclude<IdempotencyDecision, { kind: "claim" }>;

export interface IdempotencyStore {
  /** Decides on the key's row and, when the decision is to claim, claims it; one transaction. */
  claim(environmentId: string, key: string, fingerprint: string, rpc: string, now: Date): Promise<ClaimResult>;
  /**
   * Runs `fn` with `claim` in scope: every transaction `fn` commits also marks the key changed,
   * in that transaction (so a crash after it can never let the key run the call again).
   */
  within<T>(claim: IdempotencyClaim, fn: () => Promise<T>): Promise<T>;
  /** Stores the outcome; the key is `done`. */
  complete(claim: IdempotencyClaim, outcome: IdempotencyOutcome, now: Date): Promise<void>;
  /**
   * The call failed in a way not stored (5xx, unavailable, a retryable conflict): the key is let
   * go so that the retry runs (true), unless the call committed a change: then the claim lapses
   * at once, and a retry is told the outcome was lost rather than run again (false).
   */
  release(claim: IdempotencyClaim): Promise<boolean>;
  /** Deletes keys past their expiry, at most `limit`; how many. */
  sweep(now: Date, limit: number): Promise<number>;
}
