/**
 * The idempotency key a call holds while it runs (DESIGN §12), as the transactions of that call
 * see it: Sql.transaction runs `markChange` in each transaction it commits, so the key is marked
 * changed in the same transaction as the change itself. Once one transaction committed the mark,
 * the others skip it; work the call leaves running after its answer (a delivery it woke) is past
 * `ended` and skips it too.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { EntityManager } from "typeorm";

export interface ChangeScope {
  environmentId: string;
  key: string;
  token: string;
  marked: boolean;
  ended: boolean;
}

export const changeScope = new AsyncLocalStorage<ChangeScope>();

/**
 * Runs `fn` outside the calling request's scope: its transactions do not mark the request's key.
 * For work a request triggers that is not its own change (the scheduler's, made the same whoever
 * triggers it: closing a cycle that ended before a cancel applies).
 */
export function outsideChangeScope<T>(fn: () => Promise<T>): Promise<T> {
  return changeScope.exit(fn);
}

const MARK = "UPDATE idempotency_keys SET changed = 1 WHERE environment_id = ? AND idem_key = ? AND claim_token = ?";

/**
 * For a transaction about to start in a call that holds a key and has not marked it yet: the
 * statement that marks it, and what to run once the transaction committed.
 */
export function pendingMark(): { statement: readonly [string, readonly unknown[]]; committed: () => void } | undefined {
  const s = changeScope.getStore();
  if (s === undefined || s.marked || s.ended) return undefined;
  return {
    statement: [MARK, [s.environmentId, s.key, s.token]],
    committed: () => {
      s.marked = true;
    },
  };
}

/** In a transaction of a call that holds a key: mark the key changed (once per call). */
export async function markChange(em: EntityManager, onCommit: (fn: () => void) => void): Promise<void> {
  const mark = pendingMark();
  if (mark === undefined) return;
  await em.query(mark.statement[0], [...mark.statement[1]]);
  onCommit(mark.committed);
}
