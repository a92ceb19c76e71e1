/**
 * Per-test-file databases: a fresh MariaDB database or SQLite file for each file and store, so
 * ava's parallel test files never share state. MariaDB comes from TEST_MYSQL_URL (default
 * mysql://root@127.0.0.1:3306); TEST_STORES picks the stores (default "mysql,sqlite").
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import mysql from "mysql2/promise";
import { randomBase62 } from "../../src/billing/ids.js";
import { type Database, createDatabase } from "../../src/db/datasource.js";

export type Store = "mysql" | "sqlite";

export const STORES: Store[] = (process.env.TEST_STORES ?? "mysql,sqlite").split(",").map((s) => s.trim()) as Store[];

export const MYSQL_BASE = (process.env.TEST_MYSQL_URL ?? "mysql://root@127.0.0.1:3306").replace(/\/+$/, "");

/** What to tell a person whose MariaDB did not answer: what is missing and the two ways on. */
export function mysqlMissing(cause: unknown): string {
  const why = cause instanceof Error ? ((cause as { code?: string }).code ?? cause.message) : String(cause);
  return (
    `MariaDB/MySQL is not reachable at ${MYSQL_BASE} (${why}), and TEST_STORES=${STORES.join(",")} asks for it: ` +
    "start MariaDB (e.g. `service mariadb start`; root with an empty password over TCP, as npm test sets up when run as root) or point TEST_MYSQL_URL at one, " +
    "or run the SQLite half only with TEST_STORES=sqlite npm test"
  );
}

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

export async function createTestDatabase(store: Store): Promise<TestDatabase> {
  if (store === "sqlite") {
    const dir = mkdtempSync(join(tmpdir(), "billing-test-"));
    return { url: `sqlite:${join(dir, "billing.db")}`, drop: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const name = `billing_test_${randomBase62(10).toLowerCase()}`;
  let conn: mysql.Connection;
  try {
    conn = await mysql.createConnection(`${MYSQL_BASE}/`);
  } catch (e) {
    throw new Error(mysqlMissing(e), { cause: e });
  }
  await conn.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
  await conn.end();
  return {
    url: `${MYSQL_BASE}/${name}`,
    drop: async () => {
      const c = await mysql.createConnection(`${MYSQL_BASE}/`);
      await c.query(`DROP DATABASE IF EXISTS \`${name}\``);
      await c.end();
    },
  };
}

/** Runs `fn` on a connection of its own to the database at `url` (a test server's, say), closed afterwards. */
export async function withDatabase<T>(url: string, fn: (db: Database) => Promise<T>, poolSize = 2): Promise<T> {
  const db = await createDatabase(url, { poolSize });
  await db.dataSource.initialize();
  try {
    return await fn(db);
  } finally {
    await db.dataSource.destroy();
  }
}

/** A fresh database of `store`, migrated, for `fn`; dropped afterwards. */
export async function withMigratedDatabase<T>(store: Store, fn: (db: Database) => Promise<T>): Promise<T> {
  const tdb = await createTestDatabase(store);
  try {
    return await withDatabase(tdb.url, async (db) => {
      await db.dataSource.runMigrations({ transaction: "each" });
      return fn(db);
    });
  } finally {
    await tdb.drop();
  }
}
