/**
 * How stores reach the database. On MySQL every call takes a pooled connection and transactions
 * are the database's. TypeORM drives SQLite through one shared connection, where two
 * transactions in flight at once would run inside each other; so on SQLite every call is queued
 * behind the running transaction (SQLite serialises writers anyway).
 */
import { markChange, pendingMark, rowsOf } from "./change-scope.js";
import type { DataSource, EntityManager } from "typeorm";
import { type Yielder, yielder } from "../billing/yielding.js";
import { DEFAULT_BINARY_COLLATION, type Dialect } from "./columns.js";
import { isTransient, translated } from "./errors.js";
import { DatabaseTimeoutError, type TimeLimit, lockWaitSeconds } from "./time-limit.js";
import { SpanKind, type Tracing } from "../ops/tracing.js";
import { type RawConnection, type RawPool, MysqlPipeline, rawQuery } from "./mysql-pipeline.js";
import type { Pipeline, Statement } from "./statements.js";
import { auditSql, auditing, auditingLogger } from "./sql-audit.js";

export { type Pipeline, STATEMENT_BYTES, type Statement, chunks, groupBySize, paramsBytes, placeholders } from "./statements.js";

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
  private deferred: [Statement, ((result: unknown) => void) | undefined][] = [];
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

  defer(statement: Statement, check?: (result: unknown) => void): void {
    this.deferred.push([statement, check]);
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
    for (const [[sql, params], check] of list) {
      await this.breathe();
      const result: unknown = await this.em.query(sql, [...params]);
      check?.(result);
    }
  }
}

/** The lock a `findOne` takes to hold a row until its transaction ends: MySQL's FOR UPDATE; SQLite locks the whole database anyway. */
export function rowLock(dialect: Dialect): { mode: "pessimistic_write" } | undefined {
  return dialect === "mysql" ? { mode: "pessimistic_write" } : undefined;
}

/**
 * Every way into the database, for the stores. Each call's failure reaches its caller translated
 * (errors.ts storageError): an unreachable database is StorageUnavailableError, a lost lock
 * conflict StorageConflictError, never the driver's error itself.
 */
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
  ) {
    // The SQL audit (sql-audit.ts), when a record runs as the database opens: TypeORM's queries too.
    if (auditing()) (dataSource as { logger: DataSource["logger"] }).logger = auditingLogger(dataSource.logger);
  }

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

  /**
   * `read`, a locking read in the transaction of `em`, waiting for a row another transaction
   * holds no longer than lockWaitSeconds (MySQL; the session's own wait is restored after): a
   * row held past it fails the read with a lock wait timeout, which the stores' callers hear as a
   * conflict (StorageConflictError; a billing transaction's AbortedError, retried as a lost race)
   * rather than as the database unavailable once the statement's time limit ran out. SQLite (one
   * writer at a time, never a wait inside the process) or no limit: `read` as it is.
   */
  async lockWaitBounded<T>(em: EntityManager, read: () => Promise<T>): Promise<T> {
    const seconds = this.dialect === "mysql" ? lockWaitSeconds(this.limit) : undefined;
    if (seconds === undefined) return read();
    await em.query(`SET SESSION innodb_lock_wait_timeout = ${seconds}`);
    try {
      return await read();
    } finally {
      // A connection that cannot take it back fails its next statement anyway.
      await em.query("SET SESSION innodb_lock_wait_timeout = DEFAULT").catch(() => undefined);
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
    if (this.dialect === "sqlite") return translated(this.queued(() => this.whileBusy(() => fn(this.dataSource.manager))));
    return translated(fn(this.dataSource.manager));
  }

  /**
   * One write outside an explicit transaction. In a call that holds an idempotency key and has not
   * marked it yet, the write runs in a transaction that marks the key in the same commit (DESIGN
   * §12): a lone INSERT whose answer was lost (committed, but heard as `unavailable`) must make a
   * retry with that key hear IDEMPOTENCY_OUTCOME_LOST, never insert a second row. Otherwise as run.
   */
  write<T>(fn: (em: EntityManager) => Promise<T>): Promise<T> {
    return pendingMark() === undefined ? this.run(fn) : this.transaction(fn);
  }

  /**
   * One plain statement outside a transaction: the hot reads (a subject, an API key, usage
   * totals). On MySQL it goes straight through the pool's mysql2 connection: TypeORM's per-query
   * bookkeeping cost the client as much CPU as the round trip itself (about 170 us each here).
   */
  query<T>(sql: string, params: readonly unknown[]): Promise<T> {
    if (this.dialect === "sqlite") return translated(this.queued(() => this.whileBusy(() => this.dataSource.manager.query(sql, [...params]) as Promise<T>)));
    auditSql(undefined, sql, params);
    return translated(rawQuery(this.pool(), sql, [...params]) as Promise<T>);
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
    if (this.tracing === undefined) return translated(this.transactionOnce(fn));
    return translated(this.traced(() => this.transactionOnce(fn)));
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
    return translated(this.traced(() => withAfterCommit((f) => this.dataSource.transaction("READ COMMITTED", f), fn), true));
  }

  /**
   * `fn` in one transaction, given as a Pipeline: on MySQL its statements travel in as few round
   * trips as `fn`'s need for results allows (the hot path of ingestion); all of it is committed,
   * or none.
   */
  pipelined<T>(fn: (p: Pipeline) => Promise<T>, options: { readCommitted?: boolean } = {}): Promise<T> {
    if (this.tracing === undefined) return translated(this.pipelinedOnce(fn, options));
    return translated(this.traced(() => this.pipelinedOnce(fn, options), options.readCommitted ?? false, true));
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
    const p = new MysqlPipeline(conn, options.readCommitted ?? false, this.dataSource.driver.options.type === "mariadb");
    // A call holding an idempotency key: the key is marked changed in this same transaction.
    const mark = pendingMark();
    if (mark) {
      p.defer(mark.statement, (result) => mark.held(rowsOf(result) ?? 0));
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
      if (p.sent) {
        auditSql(p, "ROLLBACK", []);
        await rawQuery(conn, "ROLLBACK", []).catch(() => (reusable = false));
      }
      throw err;
    } finally {
      if (reusable) conn.release();
      else conn.destroy();
    }
  }
}
