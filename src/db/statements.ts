/**
 * Statements as the stores build them: SQL with `?` placeholders and its parameters, the
 * Pipeline a transaction's statements travel through, and the helpers that keep statements and
 * packets to a size.
 */

/** One SQL statement with `?` placeholders and its parameters. */
export type Statement = readonly [sql: string, params: readonly unknown[]];

/**
 * A transaction that reaches MySQL in as few round trips as it can (Sql.pipelined): each `run`
 * is one packet, and statements whose results are not needed wait for the next packet or go with
 * the COMMIT. Every round trip to the database costs the server a socket write and a wake-up of
 * the database's thread, which on a busy machine costs more than the statement itself.
 */
export interface Pipeline {
  /** Sends whatever was deferred, then `statements`, in one round trip; returns their results, in order. */
  run(statements: readonly Statement[]): Promise<unknown[]>;
  /**
   * Queues a statement whose result is not needed: it goes with the next `run` or with the COMMIT.
   * With `check`, its result is checked before the COMMIT is sent (check throws: the transaction
   * rolls back), so it does not go with the COMMIT.
   */
  defer(statement: Statement, check?: (result: unknown) => void): void;
  /** Sends what was deferred now (without committing). */
  flush(): Promise<void>;
  /** Runs `fn` once the transaction has committed (never when it rolls back). */
  afterCommit(fn: () => void): void;
  /**
   * Sends what was deferred, then `statements`, then the COMMIT, in one round trip; returns the
   * statements' results. Nothing may be run or deferred after it.
   */
  finish(statements: readonly Statement[]): Promise<unknown[]>;
}

/**
 * A statement's or a packet's size at most (estimated by `paramsBytes`): well under
 * max_allowed_packet (16 MB by default on MariaDB, 64 MB on MySQL), and small enough that the
 * driver's formatting of one packet (escaping every value, synchronously) holds the event loop
 * for a few milliseconds, not tens: a 1,000-event batch of 1 KB events was one packet of about
 * 1.2 MB whose formatting took 20–50 ms. Stores keep each statement to this (rows grouped by
 * `groupBySize`); the pipeline its packets. A statement larger than this goes alone.
 */
export const STATEMENT_BYTES = 1024 * 1024;

/** What parameters take on the wire, at most: three bytes per character of text (UTF-8, escaped). */
export function paramsBytes(params: readonly unknown[]): number {
  let n = 0;
  for (const v of params) n += typeof v === "string" ? 3 * v.length + 2 : 24;
  return n;
}

export function estimatedBytes([sql, params]: Statement): number {
  return sql.length + paramsBytes(params);
}

/** Consecutive runs of `list` of at most `size` items (multi-row statements, IN lists). */
export function chunks<T>(list: readonly T[], size = 500): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < list.length; i += size) out.push(list.slice(i, i + size));
  return out;
}

/** `n` rows of `width` placeholders for a multi-row VALUES list: `(?, ?), (?, ?)`. */
export function placeholders(n: number, width: number): string {
  const row = `(${Array(width).fill("?").join(", ")})`;
  return Array(n).fill(row).join(", ");
}

/**
 * Consecutive runs of `list` of at most `maxItems` items and about `maxBytes` (by `sizeOf`); an
 * item larger than `maxBytes` goes alone.
 */
export function groupBySize<T>(list: readonly T[], sizeOf: (item: T) => number, maxBytes: number, maxItems = Number.POSITIVE_INFINITY): T[][] {
  const out: T[][] = [];
  let current: T[] = [];
  let size = 0;
  for (const item of list) {
    const n = sizeOf(item);
    if (current.length > 0 && (current.length >= maxItems || size + n > maxBytes)) {
      out.push(current);
      current = [];
      size = 0;
    }
    current.push(item);
    size += n;
  }
  if (current.length > 0) out.push(current);
  return out;
}
