/** What opening a database gives: the data source, its dialect, entities and Sql, and its health check. */
import type { DataSource } from "typeorm";
import type { Dialect } from "./columns.js";
import type { buildEntities } from "./entities/index.js";
import type { Sql } from "./sql.js";

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
