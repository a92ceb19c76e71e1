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
import { binaryCollationFor, decAdd, decMax } from "./columns.js";

export interface Database {
  dataSource: DataSource;
  dialect: Dialect;
  entities: ReturnType<typeof buildEntities>;
  sql: Sql;
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
 * MySQL and MariaDB report column defaults differently; TypeORM reads them right only when told
 * which one it talks to, so ask the server once. Its version also names its binary collation.
 */
async function mysqlFlavor(u: URL): Promise<{ type: "mysql" | "mariadb"; binaryCollation: string }> {
  const conn = await mysql.createConnection({
    host: u.hostname,
    port: u.port ? Number(u.port) : 3306,
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
  });
  try {
    const [rows] = await conn.query("SELECT VERSION() AS v");
    const version = String((rows as { v: string }[])[0]?.v);
    return { type: version.includes("MariaDB") ? "mariadb" : "mysql", binaryCollation: binaryCollationFor(version) };
  } finally {
    await conn.end();
  }
}

export async function createDatabase(url: string, options: { poolSize?: number } = {}): Promise<Database> {
  const dialect = dialectOf(url);
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
      // Lets Sql.pipelined send a transaction's statements in one packet. Every statement still
      // takes its values as `?` parameters, escaped by the driver.
      multipleStatements: true,
    });
    return { dataSource, dialect, entities, sql: new Sql(dataSource, dialect, flavor.binaryCollation) };
  }
  const entities = buildEntities(dialect);
  const path = sqlitePath(url);
  if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
  const dataSource = new DataSource({
    ...common,
    entities: Object.values(entities),
    type: "better-sqlite3",
    database: path,
    enableWAL: true,
    prepareDatabase: (db: {
      function: (name: string, opts: object, fn: (...a: unknown[]) => unknown) => void;
      aggregate: (name: string, opts: { start: unknown; step: (acc: unknown, v: unknown) => unknown }) => void;
      pragma: (s: string) => unknown;
    }) => {
      db.pragma("busy_timeout = 5000");
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
  return { dataSource, dialect, entities, sql: new Sql(dataSource, dialect) };
}

