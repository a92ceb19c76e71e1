/**
 * The idempotency key a call holds while it runs (DESIGN §12), as the transactions of that call
 * see it: Sql.transaction runs `markChange` in each transaction it commits, so the key is marked
 * changed in the same transaction as the change itself. Once one transaction committed the mark,
 * the others skip it; work the call leaves running after its answer (a delivery it woke) is past
 * `ended` and skips it too. A mark that finds the key no longer held by this call (another request
 * with the key took it over after its lease, idempotency.ts) fails the transaction: of the two,
 * only one changes anything.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { EntityManager } from "typeorm";
import { AbortedError } from "../billing/errors.js";

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
 * statement that marks it, the check of how many rows it marked (`held`: throws when none, the
 * key taken over), and what to run once the transaction committed.
 */
export function pendingMark(): { statement: readonly [string, readonly unknown[]]; held: (marked: number) => void; committed: () => void } | undefined {
  const s = changeScope.getStore();
  if (s === undefined || s.marked || s.ended) return undefined;
  return {
    statement: [MARK, [s.environmentId, s.key, s.token]],
    held: (marked) => {
      if (marked === 0) {
        throw new AbortedError(
          "IDEMPOTENCY_KEY_TAKEN_OVER",
          `another request with Idempotency-Key ${JSON.stringify(s.key)} took it over after this one held it for longer than its lease; this one changed nothing`,
        );
      }
    },
    committed: () => {
      s.marked = true;
    },
  };
}

/** The rows an UPDATE's result says it matched (MySQL: affectedRows); undefined when it does not say (SQLite). */
export function rowsOf(result: unknown): number | undefined {
  const n = (result as { affectedRows?: unknown } | undefined)?.affectedRows;
  return typeof n === "number" ? n : undefined;
}

/** In a transaction of a call that holds a key: mark the key changed (once per call), or fail the transaction when the key is no longer this call's. */
export async function markChange(em: EntityManager, onCommit: (fn: () => void) => void): Promise<void> {
  const mark = pendingMark();
  if (mark === undefined) return;
  const result: unknown = await em.query(mark.statement[0], [...mark.statement[1]]);
  mark.held(rowsOf(result) ?? Number(((await em.query("SELECT changes() AS n")) as { n: unknown }[])[0]?.n ?? 0));
  onCommit(mark.committed);
}
