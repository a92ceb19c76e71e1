/**
 * The time limit of every database statement on MySQL/MariaDB (DESIGN §10): a frozen server, or
 * a network that drops every packet, gives the caller `unavailable` (503) after the limit rather
 * than a wait as long as the freeze. The server's own max_statement_time cannot do this (nothing
 * reaches the server); the client must give up, and must then destroy the connection: the
 * statement's answer may still arrive later, so the connection can never be trusted again.
 *
 * TypeORM's MySQL driver takes the driver module as an option; `boundedMysql2` is mysql2's
 * callback API whose pools are bounded, so TypeORM's statements and Sql's direct ones (the pool's
 * own connections) are all bounded the same way:
 * - waiting for a connection (the pool's queue, or a new connection's handshake) takes at most
 *   the limit; a connection that arrives after its caller gave up is given back to the pool;
 * - each statement's answer takes at most the limit (mysql2's `timeout`); one that does not
 *   answer in time fails with PROTOCOL_SEQUENCE_TIMEOUT and its connection is destroyed (never
 *   given back to the pool). A transaction whose statement fails so is rolled back by the server
 *   once the connection is gone, or committed whole if its COMMIT had already left: never half.
 */
import mysql2 from "mysql2";

/** The database did not answer in time (a connection, or a SQLite file locked for the whole limit): `unavailable`. */
export class DatabaseTimeoutError extends Error {
  readonly code = "DATABASE_TIMEOUT";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "DatabaseTimeoutError";
  }
}

/** The limit in ms, read at each statement; 0: none (migrations, which may rightly run long). */
export interface TimeLimit {
  ms: number;
}

/**
 * The seconds a locking read may wait for a row another transaction holds (innodb_lock_wait_timeout,
 * whole seconds) under `limit`: half the limit, at least 1; undefined without a limit. Below the
 * limit, so that a row held too long ends as the database's lock wait timeout (1205: a conflict,
 * which a race loop tries again from a fresh read) before the client's limit ends it as an outage
 * (the connection destroyed, `unavailable`). The database's default (50 s) is far above the limit.
 */
export function lockWaitSeconds(limit: TimeLimit): number | undefined {
  return limit.ms > 0 ? Math.max(1, Math.floor(limit.ms / 2000)) : undefined;
}

type Callback = (err: (Error & { code?: string }) | null, ...rest: unknown[]) => void;

/** The parts of mysql2's callback-API pool and pooled connection this module uses. */
interface PoolConnection {
  query(sql: unknown, values?: unknown, cb?: unknown): unknown;
  release(): void;
  destroy(): void;
  stream?: { destroy(): void };
}
interface Pool {
  getConnection(cb: (err: Error | null, conn: PoolConnection) => void): void;
}

/** A query command mysql2 built already (the pool's own `query` hands one to the connection). */
interface QueryCommand {
  timeout?: number;
  onResult?: Callback;
  on(event: string, fn: unknown): unknown;
}

const isCommand = (sql: unknown): sql is QueryCommand => typeof sql === "object" && sql !== null && typeof (sql as { on?: unknown }).on === "function";
const timedOut = (err: { code?: string } | null) => err?.code === "PROTOCOL_SEQUENCE_TIMEOUT";

/** Destroys a connection at once (its socket too: a frozen peer would never see a polite end). */
function drop(conn: PoolConnection): void {
  conn.destroy();
  conn.stream?.destroy();
}

const bounded = new WeakSet<PoolConnection>();

/** Gives each statement on `conn` the limit (unless it carries its own), and destroys `conn` when one runs out. */
function boundConnection(conn: PoolConnection, limit: TimeLimit): PoolConnection {
  if (bounded.has(conn)) return conn;
  bounded.add(conn);
  const query = conn.query;
  conn.query = function (this: PoolConnection, sql: unknown, values?: unknown, cb?: unknown): unknown {
    const ms = limit.ms;
    if (ms <= 0) return query.call(this, sql, values, cb);
    if (typeof values === "function") {
      cb = values;
      values = undefined;
    }
    if (isCommand(sql)) {
      sql.timeout ||= ms;
      const done = sql.onResult;
      if (done) {
        sql.onResult = (err, ...rest) => {
          if (timedOut(err)) drop(conn);
          done(err, ...rest);
        };
      }
      return query.call(this, sql);
    }
    const options = typeof sql === "object" && sql !== null ? { ...(sql as object) } : { sql };
    (options as { timeout?: number }).timeout ||= ms;
    const done = cb as Callback | undefined;
    return query.call(
      this,
      options,
      values,
      done &&
        ((err: Error & { code?: string }, ...rest: unknown[]) => {
          if (timedOut(err)) drop(conn);
          done(err, ...rest);
        }),
    );
  };
  return conn;
}

/** `pool` with every wait for a connection, and every statement on one, bounded by `limit`. */
function boundPool<P extends Pool>(pool: P, limit: TimeLimit): P {
  const getConnection = pool.getConnection.bind(pool);
  pool.getConnection = (cb) => {
    const ms = limit.ms;
    let waiting = true;
    const timer =
      ms > 0
        ? setTimeout(() => {
            waiting = false;
            cb(new DatabaseTimeoutError(`no database connection within ${ms} ms`), undefined as unknown as PoolConnection);
          }, ms)
        : undefined;
    getConnection((err, conn) => {
      if (!waiting) {
        if (!err) conn.release(); // its caller gave up: the next one in line may have it
        return;
      }
      waiting = false;
      clearTimeout(timer);
      if (err) cb(err, conn);
      else cb(null, boundConnection(conn, limit));
    });
  };
  return pool;
}

/** mysql2 (callback API) for TypeORM's `driver` option: the same module, its pools bounded by `limit`. */
export function boundedMysql2(limit: TimeLimit): typeof mysql2 {
  return Object.assign(Object.create(mysql2) as typeof mysql2, {
    createPool: (options: Parameters<typeof mysql2.createPool>[0]) => boundPool(mysql2.createPool(options) as unknown as Pool, limit),
  });
}
