/**
 * Builds the TypeORM DataSource for MySQL/MariaDB (mysql2) or the embedded SQLite file
 * (better-sqlite3). The only place that knows connection details.
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import mysql from "mysql2/promise";
import { DataSource } from "typeorm";
import type { Dialect } from "./columns.js";
import { buildEntities } from "./entities/index.js";
import { migrations } from "./migrations/index.js";
import { Sql } from "./sql.js";
import { loadSqlite } from "./sqlite-module.js";
import { type SqliteConnection, WalSync, startCheckpointer } from "./sqlite-offloop.js";
import { type TimeLimit, boundedMysql2 } from "./time-limit.js";
import { binaryCollationFor, decAdd, decMax } from "./columns.js";

export interface Database {
  dataSource: DataSource;
  dialect: Dialect;
  entities: ReturnType<typeof buildEntities>;
  sql: Sql;
  /**
   * True when the database answers `SELECT 1` within `timeoutMs`; false when it fails or does
   * not answer in time (a stopped or frozen server, a table or global lock). Never rejects, never
   * waits longer than about `timeoutMs`, and never holds more than one connection: checks that
   * arrive while one runs share its answer.
   */
  ping(timeoutMs: number): Promise<boolean>;
  /**
   * Runs `fn` with no time limit on statements (the migrations: a migration that rewrites a large
   * table may rightly take minutes). Only while nothing else uses the database (before serving).
   */
  unbounded<T>(fn: () => Promise<T>): Promise<T>;
  /** Closes the health check's connection and the data source. */
  close(): Promise<void>;
}

/**
 * How long opening a MySQL connection may take before it fails (ETIMEDOUT → 503). mysql2's
 * default, set here on purpose: a server that is down refuses at once, and on a loaded machine
 * (the test suite on two cores) a healthy server's handshake took over 3 s.
 */
export const CONNECT_TIMEOUT_MS = 10_000;

/**
 * `check` bounded by `timeoutMs` (false when it fails or is late; `signal` is aborted then, so
 * that the check lets go of what it holds), one at a time: callers meanwhile share its answer.
 */
function boundedCheck(check: (timeoutMs: number, signal: AbortSignal) => Promise<void>): (timeoutMs: number) => Promise<boolean> {
  let running: Promise<boolean> | undefined;
  return (timeoutMs) => {
    running ??= (async () => {
      const late = new AbortController();
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<false>((r) => (timer = setTimeout(() => r(false), timeoutMs)));
      try {
        const attempt = check(timeoutMs, late.signal).then(
          () => true,
          () => false,
        );
        return await Promise.race([attempt, timedOut]);
      } finally {
        clearTimeout(timer);
        late.abort();
        running = undefined;
      }
    })();
    return running;
  };
}

export function dialectOf(url: string): Dialect {
  if (url.startsWith("mysql://") || url.startsWith("mariadb://")) return "mysql";
  if (url.startsWith("sqlite:")) return "sqlite";
  throw new Error(`unsupported DATABASE_URL scheme: ${url.split(":")[0]}`);
}

/** `sqlite:./data/billing.db` → `./data/billing.db`; `sqlite::memory:` → `:memory:`. */
export function sqlitePath(url: string): string {
  return url.slice("sqlite:".length).replace(/^\/\//, "");
}

/**
 * The driver's formatting of `?` parameters, except that text without parameters is sent as it
 * is: the driver would otherwise scan all of it (quotes and comments included) for a `?` it has
 * no value for, which for an ingest packet of a megabyte of inline values cost as much as building it.
 */
function queryFormat(this: { config: { stringifyObjects?: boolean; timezone?: string } }, sql: string, values: unknown): string {
  if (values === undefined || values === null || (Array.isArray(values) && values.length === 0)) return sql;
  return mysql.format(sql, values as Parameters<typeof mysql.format>[1], this.config.stringifyObjects, this.config.timezone as Parameters<typeof mysql.format>[3]);
}

/**
 * MySQL and MariaDB report column defaults differently; TypeORM reads them right only when told
 * which one it talks to, so ask the server once. Its version also names its binary collation.
 */
async function mysqlFlavor(u: URL): Promise<{ type: "mysql" | "mariadb"; binaryCollation: string }> {
  const conn = await mysql.createConnection({
    host: u.hostname,
    port: u.port ? Number(u.port) : 3306,
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
    connectTimeout: CONNECT_TIMEOUT_MS,
  });
  try {
    // A DATABASE_URL naming a database that is not there fails here, saying what to do, rather
    // than as the driver's bare "Unknown database" from somewhere inside the pool. (config.ts
    // has already refused a URL that names none.)
    const name = decodeURIComponent(u.pathname.slice(1));
    const [found] = await conn.query("SELECT SCHEMA_NAME AS s FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", [name]);
    if ((found as unknown[]).length === 0) {
      throw new Error(
        `the database ${name} does not exist on ${u.hostname}:${u.port || 3306}: create it (CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;) or correct DATABASE_URL`,
      );
    }
    const [rows] = await conn.query("SELECT VERSION() AS v");
    const version = String((rows as { v: string }[])[0]?.v);
    return { type: version.includes("MariaDB") ? "mariadb" : "mysql", binaryCollation: binaryCollationFor(version) };
  } finally {
    await conn.end();
  }
}

/**
 * How long SQLite waits (synchronously) for a file another process has locked, when no time
 * limit is given.
 */
/** How long one SQLite statement waits, synchronously, for a lock another connection holds (then Sql retries). */
const SQLITE_BUSY_WAIT_MS = 200;

export interface DatabaseOptions {
  poolSize?: number;
  /**
   * The time limit of each database statement and of each wait for a connection, in ms
   * (DATABASE_STATEMENT_TIMEOUT_MS); past it the caller hears `unavailable`. Unset: no limit
   * (tools and tests that open the database themselves). SQLite: how long a file locked by
   * another process is waited for.
   */
  statementTimeoutMs?: number;
}

export async function createDatabase(url: string, options: DatabaseOptions = {}): Promise<Database> {
  const dialect = dialectOf(url);
  const limit: TimeLimit = { ms: options.statementTimeoutMs ?? 0 };
  const unbounded = async <T>(fn: () => Promise<T>): Promise<T> => {
    const ms = limit.ms;
    limit.ms = 0;
    try {
      return await fn();
    } finally {
      limit.ms = ms;
    }
  };
  const common = {
    migrations,
    migrationsTableName: "schema_migrations",
    synchronize: false,
    logging: false,
  } as const;
  if (dialect === "mysql") {
    const u = new URL(url.replace(/^mariadb:/, "mysql:"));
    const flavor = await mysqlFlavor(u);
    const entities = buildEntities(dialect, flavor.binaryCollation);
    const dataSource = new DataSource({
      ...common,
      entities: Object.values(entities),
      type: flavor.type,
      host: u.hostname,
      port: u.port ? Number(u.port) : 3306,
      username: decodeURIComponent(u.username),
      password: decodeURIComponent(u.password),
      database: decodeURIComponent(u.pathname.slice(1)),
      charset: "utf8mb4_unicode_ci",
      timezone: "Z",
      supportBigNumbers: true,
      bigNumberStrings: true,
      poolSize: options.poolSize ?? 16,
      // A server that is down refuses at once; one that accepts but never answers (frozen, or a
      // network black hole) fails a new connection after this.
      connectTimeout: CONNECT_TIMEOUT_MS,
      // Lets Sql.pipelined send a transaction's statements in one packet. Statements take their
      // values as `?` parameters, escaped by the driver, except ingestion's INSERT and totals,
      // which carry their values inline (sql.ts mysqlText).
      multipleStatements: true,
      extra: { queryFormat },
      // mysql2 whose pools bound every statement and every wait for a connection (time-limit.ts).
      driver: boundedMysql2(limit),
    });
    // The health check has its own connection, never one of the pool's: a query that hangs
    // (frozen server, a lock) is cut off by destroying that connection, so it never holds a
    // pooled connection nor piles up new ones. It is kept between checks (no handshake each
    // time); one that failed, or was closed by the server meanwhile, is replaced.
    let kept: mysql.Connection | undefined;
    const open = async (timeoutMs: number, signal: AbortSignal) => {
      const c = await mysql.createConnection({
        host: u.hostname,
        port: u.port ? Number(u.port) : 3306,
        user: decodeURIComponent(u.username),
        password: decodeURIComponent(u.password),
        database: decodeURIComponent(u.pathname.slice(1)),
        connectTimeout: timeoutMs,
      });
      c.on("error", () => {}); // a late error of a connection given up on
      // An idle kept connection does not keep the process alive.
      (c as unknown as { connection?: { stream?: { unref?: () => void } } }).connection?.stream?.unref?.();
      if (signal.aborted) {
        c.destroy();
        throw new Error("health check given up");
      }
      return c;
    };
    const ping = boundedCheck(async (timeoutMs, signal) => {
      for (let attempt = 0; attempt < 2; attempt++) {
        const reused = kept !== undefined;
        const c = kept ?? (await open(timeoutMs, signal));
        kept = undefined;
        const drop = () => c.destroy();
        signal.addEventListener("abort", drop, { once: true });
        try {
          await c.query("SELECT 1");
          signal.removeEventListener("abort", drop);
          if (!signal.aborted) kept = c;
          else c.destroy();
          return;
        } catch (err) {
          c.destroy();
          // A kept connection may have been closed by the server (wait_timeout): one fresh try.
          if (!reused || signal.aborted) throw err;
        }
      }
    });
    const close = async () => {
      kept?.destroy();
      kept = undefined;
      if (dataSource.isInitialized) await dataSource.destroy();
    };
    return { dataSource, dialect, entities, sql: new Sql(dataSource, dialect, flavor.binaryCollation, undefined, limit), ping, unbounded, close };
  }
  const entities = buildEntities(dialect);
  const path = sqlitePath(url);
  if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
  // COMMIT's fsync and the WAL checkpoints run off the event loop (sqlite-offloop.ts).
  let wal: WalSync | undefined;
  let closing: Promise<void> | undefined;
  const dataSource = new DataSource({
    ...common,
    entities: Object.values(entities),
    type: "better-sqlite3",
    // 12 on Node 20, 13 on Node ≥ 22 when installed (sqlite-module.ts).
    driver: loadSqlite(),
    database: path,
    enableWAL: true,
    prepareDatabase: (
      db: {
        function: (name: string, opts: object, fn: (...a: unknown[]) => unknown) => void;
        aggregate: (name: string, opts: { start: unknown; step: (acc: unknown, v: unknown) => unknown }) => void;
        pragma: (s: string) => unknown;
        close: () => unknown;
      } & SqliteConnection,
    ) => {
      // A file locked by another connection is waited for synchronously (the event loop held) for
      // a short while only; Sql tries again after a backoff until the time limit, then answers
      // `unavailable` (Sql.whileBusy).
      db.pragma(`busy_timeout = ${SQLITE_BUSY_WAIT_MS}`);
      if (path !== ":memory:") {
        const sync = new WalSync(path, db);
        const checkpointer = startCheckpointer(path, db, (err) => process.emitWarning(`SQLite checkpoints are back on the event loop: ${err instanceof Error ? err.message : String(err)}`));
        wal = sync;
        // However the connection is closed (the data source destroyed), the thread and the file go with it.
        const closeConnection = db.close.bind(db);
        db.close = () => {
          const out = closeConnection();
          closing = Promise.all([sync.close(), checkpointer.close()]).then(() => {});
          return out;
        };
      }
      // SQLite's own lower() folds ASCII only; search must ignore case for every script, as on MySQL.
      db.function("lower", { deterministic: true }, (s: unknown) => (s === null || s === undefined ? null : String(s).toLowerCase()));
      // Decimals are text on SQLite; its own + and MAX would go through floating point.
      db.function("dec_add", { deterministic: true }, (a: unknown, b: unknown) => decAdd(a, b));
      db.function("dec_max", { deterministic: true }, (a: unknown, b: unknown) => decMax(a, b));
      // Their aggregate forms, for totals added up in the database (SUM and MAX on MySQL).
      db.aggregate("dec_sum", { start: "0", step: (acc: unknown, v: unknown) => (v === null || v === undefined ? acc : decAdd(acc, v)) });
      db.aggregate("dec_max_of", { start: null, step: (acc: unknown, v: unknown) => decMax(acc, v) });
    },
  });
  const ping = boundedCheck(async () => {
    await dataSource.query("SELECT 1");
  });
  const close = async () => {
    if (dataSource.isInitialized) await dataSource.destroy();
    await closing;
  };
  return { dataSource, dialect, entities, sql: new Sql(dataSource, dialect, undefined, () => wal?.afterWrite(), limit), ping, unbounded, close };
}
