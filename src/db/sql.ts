/**
 * How stores reach the database. On MySQL every call takes a pooled connection and transactions
 * are the database's. TypeORM drives SQLite through one shared connection, where two
 * transactions in flight at once would run inside each other; so on SQLite every call is queued
 * behind the running transaction (SQLite serialises writers anyway).
 */
import { markChange, pendingMark } from "./change-scope.js";
import type { DataSource, EntityManager } from "typeorm";
import { type Yielder, yielder } from "../billing/yielding.js";
import { DEFAULT_BINARY_COLLATION, type Dialect } from "./columns.js";
import { isTransient } from "./errors.js";
import { DatabaseTimeoutError, type TimeLimit } from "./time-limit.js";
import { SpanKind, type Tracing } from "../ops/tracing.js";

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
  /** Queues a statement whose result is not needed: it goes with the next `run` or with the COMMIT. */
  defer(statement: Statement): void;
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
 * Runs `fn` once the transaction of `em` (one of Sql.transaction or transactionReadCommitted)
 * has committed; never when it rolls back. Outside such a transaction, nothing runs.
 */
export function afterCommit(em: EntityManager, fn: () => void): void {
  const data = em.queryRunner?.data as { afterCommit?: (() => void)[] } | undefined;
  if (data) (data.afterCommit ??= []).push(fn);
}

/** Runs `fn(em)`, then (after the caller's commit) what it registered with afterCommit. */
async function withAfterCommit<T>(run: (fn: (em: EntityManager) => Promise<T>) => Promise<T>, fn: (em: EntityManager) => Promise<T>): Promise<T> {
  let last: EntityManager | undefined;
  const out = await run(async (em) => {
    last = em;
    const r = await fn(em);
    // A call holding an idempotency key: the key is marked changed in this same transaction.
    await markChange(em, (h) => afterCommit(em, h));
    return r;
  });
  const hooks = (last?.queryRunner?.data as { afterCommit?: (() => void)[] } | undefined)?.afterCommit;
  for (const h of hooks ?? []) h();
  return out;
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

function estimatedBytes([sql, params]: Statement): number {
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

/** Characters a MySQL string literal in single quotes needs escaped (with backslash escapes, the default sql_mode). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL and Ctrl-Z are what MySQL literals escape
const MYSQL_SPECIAL = /[\0\n\r\x1a'\\]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: as above
const MYSQL_SPECIAL_ALL = /[\0\n\r\x1a'\\]/g;
const MYSQL_ESCAPES: Record<string, string> = { "\0": "\\0", "\n": "\\n", "\r": "\\r", "\x1a": "\\Z", "'": "\\'", "\\": "\\\\" };

/**
 * Text as a MySQL string literal, for statements built with their values inline (the ingest
 * path: a batch's INSERT and totals carry thousands of values, and the driver's formatting of
 * `?` placeholders, value by value, cost the server about as much CPU as the rest of ingestion).
 * It reads back as the same text the driver's escaping gives (which also escapes `"`, \b and \t,
 * characters a single-quoted literal holds as they are); most values need no escape at all.
 */
export function mysqlText(s: string): string {
  return MYSQL_SPECIAL.test(s) ? `'${s.replace(MYSQL_SPECIAL_ALL, (c) => MYSQL_ESCAPES[c] as string)}'` : `'${s}'`;
}

/** The driver's own pooled connection (mysql2's callback API), as TypeORM's MySQL driver holds it. */
interface RawConnection {
  query(sql: string, values: unknown[] | undefined, cb: (err: Error | null, result: unknown) => void): void;
  /** The driver's own formatting of `?` placeholders (escaping each value). */
  format(sql: string, values: unknown[]): string;
  release(): void;
  destroy(): void;
}
interface RawPool {
  getConnection(cb: (err: Error | null, conn: RawConnection) => void): void;
  query: RawConnection["query"];
}

function rawQuery(conn: Pick<RawConnection, "query">, sql: string, values: unknown[] | undefined): Promise<unknown> {
  return new Promise((resolve, reject) => conn.query(sql, values, (err, result) => (err ? reject(err) : resolve(result))));
}

/** MySQL: one multi-statement packet per run (more when the statements are large); BEGIN goes with the first, COMMIT with the deferred. */
class MysqlPipeline implements Pipeline {
  private deferred: Statement[] = [];
  readonly committed: (() => void)[] = [];
  private begin: Statement[];
  sent = false;

  constructor(
    private readonly conn: RawConnection,
    readCommitted: boolean,
  ) {
    this.begin = [...(readCommitted ? [["SET TRANSACTION ISOLATION LEVEL READ COMMITTED", []] as const] : []), ["START TRANSACTION", []]];
  }

  async run(statements: readonly Statement[]): Promise<unknown[]> {
    const all = [...this.begin, ...this.deferred, ...statements];
    const skip = all.length - statements.length;
    this.begin = [];
    this.deferred = [];
    if (all.length === 0) return [];
    this.sent = true;
    const results: unknown[] = [];
    for (const packet of groupBySize(all, estimatedBytes, STATEMENT_BYTES)) {
      // Each statement formatted on its own: a statement with its values inline (mysqlText) may
      // hold a `?` in a literal, which must not take a later statement's parameter.
      let text = "";
      for (const [sql, params] of packet) text += `${text === "" ? "" : ";\n"}${params.length === 0 ? sql : this.conn.format(sql, [...params])}`;
      const raw: unknown = await rawQuery(this.conn, text, undefined);
      // mysql2 answers a single statement with its result, several with one result per statement.
      if (packet.length === 1) results.push(raw);
      else results.push(...(raw as unknown[]));
    }
    return results.slice(skip);
  }

  defer(statement: Statement): void {
    this.deferred.push(statement);
  }

  async flush(): Promise<void> {
    if (this.deferred.length > 0) await this.run([]);
  }

  afterCommit(fn: () => void): void {
    this.committed.push(fn);
  }

  private finished = false;

  async finish(statements: readonly Statement[]): Promise<unknown[]> {
    const out = await this.run([...statements, ["COMMIT", []]]);
    this.finished = true;
    return out.slice(0, statements.length);
  }

  async commit(): Promise<void> {
    if (this.finished) return;
    if (!this.sent && this.deferred.length === 0) return; // nothing was ever sent: no transaction to end
    await this.run([["COMMIT", []]]);
  }
}

/**
 * How long an ingest transaction on SQLite holds the event loop before letting it turn. Each
 * statement there runs synchronously, so a thousand events would hold the loop until the COMMIT;
 * between statements the pipeline lets it turn once it has held it this long. That is safe for
 * this server because every other call waits in the queue behind the transaction (Sql.queued):
 * only timers and I/O run meanwhile. Only the ingest pipeline does this: a transaction that waits
 * holds SQLite's write lock for longer, and another connection in the same process (a test's)
 * that writes meanwhile would wait synchronously for the lock, holding the loop the transaction
 * needs to finish.
 */
const SQLITE_SLICE_MS = 10;

/** How many times a SQLite transaction that found the file locked by another process is tried (about 1.3 s of backoff in all). */
const SQLITE_BUSY_ATTEMPTS = 7;

/** SQLite (in-process, no round trips): the statements one by one inside an ordinary transaction. */
class SequentialPipeline implements Pipeline {
  private deferred: Statement[] = [];
  readonly committed: (() => void)[] = [];
  private readonly breathe: Yielder = yielder(SQLITE_SLICE_MS);
  constructor(private readonly em: EntityManager) {}

  async run(statements: readonly Statement[]): Promise<unknown[]> {
    await this.flush();
    const out: unknown[] = [];
    for (const [sql, params] of statements) {
      await this.breathe();
      out.push(await this.em.query(sql, [...params]));
    }
    return out;
  }

  defer(statement: Statement): void {
    this.deferred.push(statement);
  }

  afterCommit(fn: () => void): void {
    this.committed.push(fn);
  }

  /** The statements; the transaction commits when the pipelined function returns. */
  finish(statements: readonly Statement[]): Promise<unknown[]> {
    return this.run(statements);
  }

  async flush(): Promise<void> {
    const list = this.deferred;
    this.deferred = [];
    for (const [sql, params] of list) {
      await this.breathe();
      await this.em.query(sql, [...params]);
    }
  }
}

/** The lock a `findOne` takes to hold a row until its transaction ends: MySQL's FOR UPDATE; SQLite locks the whole database anyway. */
export function rowLock(dialect: Dialect): { mode: "pessimistic_write" } | undefined {
  return dialect === "mysql" ? { mode: "pessimistic_write" } : undefined;
}

export class Sql {
  private tail: Promise<unknown> = Promise.resolve();
  /**
   * Tracing (ops/tracing.ts), set by the app when OTEL_EXPORTER_OTLP_ENDPOINT is set: each
   * transaction made while a span is in progress (a request's) runs in a span of its own.
   */
  tracing: Tracing | undefined = undefined;

  /** `fn` in a database transaction's span when tracing is on and a span is in progress. */
  private traced<T>(fn: () => Promise<T>, readCommitted = false, pipelined = false): Promise<T> {
    const tracing = this.tracing;
    if (tracing === undefined) return fn();
    return tracing.inChildSpan(
      "db.transaction",
      SpanKind.CLIENT,
      { "db.system.name": this.dialect === "mysql" ? "mysql" : "sqlite", "db.transaction.isolation": readCommitted ? "read_committed" : "default", "db.transaction.pipelined": pipelined },
      fn,
    );
  }
  constructor(
    readonly dataSource: DataSource,
    readonly dialect: Dialect,
    /** MySQL: the binary collation every text column has (see columns.ts); unused on SQLite. */
    readonly binaryCollation: string = DEFAULT_BINARY_COLLATION,
    /**
     * SQLite: resolves once what the connection committed is on disk (an fsync off the event
     * loop, sqlite-offloop.ts); every call waits for it before it answers.
     */
    private readonly durable?: () => Promise<void> | undefined,
    /**
     * The time limit of statements (time-limit.ts; 0: none). MySQL's pool applies it itself;
     * here it decides on SQLite when a file locked by another process is `unavailable`.
     */
    private readonly limit: TimeLimit = { ms: 0 },
  ) {}

  /**
   * SQLite: a statement outside a transaction that found the file locked for all of busy_timeout
   * (the time limit) is `unavailable`: the database did not answer in time.
   */
  private lockedIsUnavailable(err: unknown): never {
    if (this.limit.ms > 0 && isTransient(err)) throw new DatabaseTimeoutError(`the database stayed locked for ${this.limit.ms} ms`, { cause: err });
    throw err;
  }

  /**
   * SQLite: `attempt` run again, after a short backoff, while it finds the file locked by another
   * connection (SQLITE_BUSY), until the time limit (then `unavailable`; without a limit, a few
   * tries, then the error). Each try waits for the lock synchronously for a short busy_timeout
   * only (datasource.ts): the backoff between tries leaves the event loop free, so that the
   * connection holding the lock — another process, or one of this process's own (a CLI or a
   * test's fixtures) — can finish its transaction meanwhile.
   */
  private async whileBusy<T>(attempt: () => Promise<T>): Promise<T> {
    const started = performance.now();
    for (let n = 1; ; n++) {
      try {
        return await attempt();
      } catch (err) {
        if (!isTransient(err)) throw err;
        const backoff = Math.min(500, 10 * 2 ** n) * (0.5 + Math.random());
        if (this.limit.ms > 0) {
          if (performance.now() - started + backoff >= this.limit.ms) this.lockedIsUnavailable(err);
        } else if (n >= SQLITE_BUSY_ATTEMPTS) throw err;
        await new Promise((r) => setTimeout(r, backoff));
      }
    }
  }

  /** SQLite: calls queued or running (the metrics' view of its one connection). */
  private pending = 0;
  private readonly settled = () => {
    this.pending--;
  };

  private queued<T>(fn: () => Promise<T>): Promise<T> {
    if (this.dialect !== "sqlite") return fn();
    this.pending++;
    const result = this.tail.then(fn, fn);
    this.tail = result.then(this.settled, this.settled);
    const durable = this.durable;
    if (durable === undefined) return result;
    return result.then(async (value) => {
      await durable();
      return value;
    });
  }

  /**
   * The connections as the metrics report them: MySQL, the pool's (mysql2's own counts);
   * SQLite, its one connection, in use while a call runs, and the calls queued behind it.
   */
  connections(): { max: number; inUse: number; idle: number; waiting: number } {
    if (this.dialect === "sqlite") return { max: 1, inUse: this.pending > 0 ? 1 : 0, idle: this.pending > 0 ? 0 : 1, waiting: Math.max(0, this.pending - 1) };
    const p = this.pool() as unknown as { _allConnections?: { length: number }; _freeConnections?: { length: number }; _connectionQueue?: { length: number }; config?: { connectionLimit?: number } };
    const all = p._allConnections?.length ?? 0;
    const free = p._freeConnections?.length ?? 0;
    return { max: p.config?.connectionLimit ?? 0, inUse: all - free, idle: free, waiting: p._connectionQueue?.length ?? 0 };
  }

  /** One statement or a few reads, outside a transaction. */
  run<T>(fn: (em: EntityManager) => Promise<T>): Promise<T> {
    if (this.dialect === "sqlite") return this.queued(() => this.whileBusy(() => fn(this.dataSource.manager)));
    return fn(this.dataSource.manager);
  }

  /**
   * One plain statement outside a transaction: the hot reads (a subject, an API key, usage
   * totals). On MySQL it goes straight through the pool's mysql2 connection: TypeORM's per-query
   * bookkeeping cost the client as much CPU as the round trip itself (about 170 us each here).
   */
  query<T>(sql: string, params: readonly unknown[]): Promise<T> {
    if (this.dialect === "sqlite") return this.queued(() => this.whileBusy(() => this.dataSource.manager.query(sql, [...params]) as Promise<T>));
    return rawQuery(this.pool(), sql, [...params]) as Promise<T>;
  }

  /** TypeORM's MySQL driver's mysql2 pool (callback API), which Sql.query and pipelined use directly. */
  private pool(): RawPool {
    return (this.dataSource.driver as unknown as { pool: RawPool }).pool;
  }

  /**
   * `fn` in one transaction: all of it is committed, or none. On SQLite, a transaction that finds
   * the database file locked by another process (SQLITE_BUSY: a second server on the same file; in
   * one process calls are queued and never meet) is rolled back and run again, a few times with a
   * short backoff, before its caller hears `aborted`: a lost race is retried inside the service
   * (DESIGN §4). The tries end at the time limit: a file still locked then is `unavailable`.
   * `fn` must only work in the transaction (it may run more than once).
   */
  transaction<T>(fn: (em: EntityManager) => Promise<T>): Promise<T> {
    if (this.tracing === undefined) return this.transactionOnce(fn);
    return this.traced(() => this.transactionOnce(fn));
  }

  private transactionOnce<T>(fn: (em: EntityManager) => Promise<T>): Promise<T> {
    if (this.dialect !== "sqlite") return withAfterCommit((f) => this.dataSource.transaction(f), fn);
    return this.queued(() => this.whileBusy(() => withAfterCommit((f) => this.dataSource.transaction(f), fn)));
  }

  /**
   * `fn` in one READ COMMITTED transaction on MySQL (no gap locks: a queue's claim must not block
   * the inserts that feed the queue); an ordinary transaction on SQLite.
   */
  transactionReadCommitted<T>(fn: (em: EntityManager) => Promise<T>): Promise<T> {
    if (this.dialect !== "mysql") return this.transaction(fn);
    return this.traced(() => withAfterCommit((f) => this.dataSource.transaction("READ COMMITTED", f), fn), true);
  }

  /**
   * `fn` in one transaction, given as a Pipeline: on MySQL its statements travel in as few round
   * trips as `fn`'s need for results allows (the hot path of ingestion); all of it is committed,
   * or none.
   */
  pipelined<T>(fn: (p: Pipeline) => Promise<T>, options: { readCommitted?: boolean } = {}): Promise<T> {
    if (this.tracing === undefined) return this.pipelinedOnce(fn, options);
    return this.traced(() => this.pipelinedOnce(fn, options), options.readCommitted ?? false, true);
  }

  private async pipelinedOnce<T>(fn: (p: Pipeline) => Promise<T>, options: { readCommitted?: boolean }): Promise<T> {
    if (this.dialect === "sqlite") {
      let p: SequentialPipeline | undefined;
      const out = await this.transactionOnce(async (em) => {
        p = new SequentialPipeline(em);
        const r = await fn(p);
        await p.flush();
        return r;
      });
      for (const h of p?.committed ?? []) h();
      return out;
    }
    // The pool's connection itself rather than a TypeORM QueryRunner: the runner's bookkeeping
    // per query (events, logging, timing) cost as much client CPU as the round trip (about
    // 170 us each here), and ingestion makes three of them per transaction.
    const conn = await new Promise<RawConnection>((resolve, reject) => this.pool().getConnection((err, c) => (err ? reject(err) : resolve(c))));
    const p = new MysqlPipeline(conn, options.readCommitted ?? false);
    // A call holding an idempotency key: the key is marked changed in this same transaction.
    const mark = pendingMark();
    if (mark) {
      p.defer(mark.statement);
      p.afterCommit(mark.committed);
    }
    let reusable = true;
    try {
      const out = await fn(p);
      await p.commit();
      for (const h of p.committed) h();
      return out;
    } catch (err) {
      // A failed statement stops the rest of its packet (COMMIT included); undo what ran. A
      // connection that cannot even roll back is not given back to the pool.
      if (p.sent) await rawQuery(conn, "ROLLBACK", []).catch(() => (reusable = false));
      throw err;
    } finally {
      if (reusable) conn.release();
      else conn.destroy();
    }
  }
}
