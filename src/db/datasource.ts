/**
 * Builds the TypeORM DataSource for MySQL/MariaDB (mysql2; mysql-connect.ts) or the embedded
 * SQLite file (better-sqlite3). The only place that knows connection details.
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { DataSource } from "typeorm";
import { boundedCheck } from "./bounded-check.js";
import { type Dialect, decAdd, decMax } from "./columns.js";
import type { Database, DatabaseOptions } from "./database.js";
import { buildEntities } from "./entities/index.js";
import { schemaOptions } from "./migrations/index.js";
import { openMysql } from "./mysql-connect.js";
import { Sql } from "./sql.js";
import { loadSqlite } from "./sqlite-module.js";
import { type SqliteConnection, WalSync, startCheckpointer } from "./sqlite-offloop.js";
import type { TimeLimit } from "./time-limit.js";

export type { Database, DatabaseOptions } from "./database.js";
export { CONNECT_TIMEOUT_MS } from "./mysql-connect.js";

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
 * How long SQLite waits (synchronously) for a file another process has locked, when no time
 * limit is given.
 */
/** How long one SQLite statement waits, synchronously, for a lock another connection holds (then Sql retries). */
const SQLITE_BUSY_WAIT_MS = 200;

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
  if (dialect === "mysql") return openMysql(url, options, limit, unbounded);
  return openSqlite(url, limit, unbounded);
}

/** The Database on the SQLite file of `url` (`sqlite:PATH`, `sqlite::memory:`). */
function openSqlite(url: string, limit: TimeLimit, unbounded: Database["unbounded"]): Database {
  const entities = buildEntities("sqlite");
  const path = sqlitePath(url);
  if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
  // COMMIT's fsync and the WAL checkpoints run off the event loop (sqlite-offloop.ts).
  let wal: WalSync | undefined;
  let closing: Promise<void> | undefined;
  const dataSource = new DataSource({
    ...schemaOptions(entities),
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
  return { dataSource, dialect: "sqlite", entities, sql: new Sql(dataSource, "sqlite", undefined, () => wal?.afterWrite(), limit), ping, unbounded, close };
}
