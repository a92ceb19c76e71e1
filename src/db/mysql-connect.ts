/**
 * Opening MySQL/MariaDB: what the server is (its flavour, its binary collation), whether its
 * sessions suit this server (the database exists; the sql_mode suits the escaper, mysql-escape.ts),
 * the data source on mysql2 with bounded statements, and the health check's own connection.
 *
 * DATABASE_URL may carry `?sql_mode=…`: every connection this server opens then sets its session
 * sql_mode to it (SET SESSION sql_mode), leaving the server's global mode as it is. That is how a
 * server whose global sql_mode includes NO_BACKSLASH_ESCAPES serves this one; without it, sessions
 * have the server's global mode.
 *
 * On a Galera cluster (the server reports `wsrep_on` = ON; behind HAProxy each pooled connection
 * may reach another node) every session sets `wsrep_sync_wait` (WSREP_SYNC_WAIT): its reads,
 * updates and deletes first wait until the node has applied what the cluster committed before,
 * so a call reads what an earlier call just wrote through another node (read-your-writes).
 */
import type mysql2 from "mysql2";
import mysql from "mysql2/promise";
import { DataSource } from "typeorm";
import { boundedCheck } from "./bounded-check.js";
import { binaryCollationFor } from "./columns.js";
import type { Database, DatabaseOptions } from "./database.js";
import { buildEntities } from "./entities/index.js";
import { schemaOptions } from "./migrations/index.js";
import { queryFormat, sqlModeRefusal } from "./mysql-escape.js";
import { Sql } from "./sql.js";
import { type TimeLimit, boundedMysql2 } from "./time-limit.js";

/**
 * How long opening a MySQL connection may take before it fails (ETIMEDOUT → 503). mysql2's
 * default, set here on purpose: a server that is down refuses at once, and on a loaded machine
 * (the test suite on two cores) a healthy server's handshake took over 3 s.
 */
export const CONNECT_TIMEOUT_MS = 10_000;

/** Where and as whom to connect, from a `mysql://` URL. */
function endpoint(u: URL): { host: string; port: number; user: string; password: string } {
  return { host: u.hostname, port: u.port ? Number(u.port) : 3306, user: decodeURIComponent(u.username), password: decodeURIComponent(u.password) };
}

/** The session sql_mode DATABASE_URL asks for (`?sql_mode=…`), if any. */
export function sessionSqlMode(u: URL): string | undefined {
  return u.searchParams.get("sql_mode") ?? undefined;
}

/**
 * MySQL and MariaDB report column defaults differently; TypeORM reads them right only when told
 * which one it talks to, so ask the server once. Its version also names its binary collation.
 * Refuses (throws, saying what to change) a database that is not there, and a session whose
 * sql_mode the escaper does not support: a session as the pool's are (the same user, the same
 * `sql_mode` parameter).
 */
async function mysqlFlavor(u: URL): Promise<{ type: "mysql" | "mariadb"; binaryCollation: string; galera: boolean }> {
  const conn = await mysql.createConnection({ ...endpoint(u), connectTimeout: CONNECT_TIMEOUT_MS });
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
    const mode = sessionSqlMode(u);
    if (mode !== undefined) await conn.query("SET SESSION sql_mode = ?", [mode]);
    const [rows] = await conn.query("SELECT VERSION() AS v, @@SESSION.sql_mode AS m");
    const row = (rows as { v: string; m: string }[])[0];
    const refusal = sqlModeRefusal(String(row?.m ?? ""));
    if (refusal !== undefined) throw new Error(refusal);
    const version = String(row?.v);
    // Galera: `wsrep_on` exists (MariaDB with a provider loaded, Percona XtraDB Cluster) and is ON.
    const [wsrep] = await conn.query("SHOW VARIABLES LIKE 'wsrep_on'");
    const galera = String((wsrep as { Value?: string }[])[0]?.Value ?? "").toUpperCase() === "ON";
    return { type: version.includes("MariaDB") ? "mariadb" : "mysql", binaryCollation: binaryCollationFor(version), galera };
  } finally {
    await conn.end();
  }
}

/**
 * On Galera, what every session waits for before a statement (`wsrep_sync_wait` bits): 1 reads
 * (SELECT, SHOW, BEGIN), 2 UPDATE and DELETE. Inserts need no wait: one that collides with a row
 * another node committed fails its certification (a deadlock error, retried like one).
 */
export const WSREP_SYNC_WAIT = 3;

/** The SET statement each new pooled session runs first, if any (DATABASE_URL's sql_mode; Galera's causality wait). */
export function sessionSettings(sqlMode: string | undefined, galera: boolean): { sql: string; values: string[] } | undefined {
  const parts: string[] = [];
  const values: string[] = [];
  if (sqlMode !== undefined) {
    parts.push("sql_mode = ?");
    values.push(sqlMode);
  }
  if (galera) parts.push(`wsrep_sync_wait = ${WSREP_SYNC_WAIT}`);
  return parts.length === 0 ? undefined : { sql: `SET SESSION ${parts.join(", ")}`, values };
}

/** mysql2 whose pools run `settings` on each new connection before it is used. */
function withSessionSettings(driver: typeof mysql2, settings: { sql: string; values: string[] } | undefined): typeof mysql2 {
  if (settings === undefined) return driver;
  return Object.assign(Object.create(driver) as typeof mysql2, {
    createPool: (options: Parameters<typeof mysql2.createPool>[0]) => {
      const pool = driver.createPool(options);
      // mysql2 runs a connection's commands in order: this one before the statement it was opened for.
      // A connection that cannot take the settings is closed: its statements fail rather than run under others.
      pool.on("connection", (conn) => {
        conn.query(settings.sql, settings.values, (err) => {
          if (err) conn.destroy();
        });
      });
      return pool;
    },
  });
}

/**
 * The health check's own connection, never one of the pool's: a query that hangs (frozen server,
 * a lock) is cut off by destroying that connection, so it never holds a pooled connection nor
 * piles up new ones. It is kept between checks (no handshake each time); one that failed, or was
 * closed by the server meanwhile, is replaced.
 */
function mysqlHealthCheck(u: URL): { ping: (timeoutMs: number) => Promise<boolean>; close: () => void } {
  let kept: mysql.Connection | undefined;
  const open = async (timeoutMs: number, signal: AbortSignal) => {
    const c = await mysql.createConnection({ ...endpoint(u), database: decodeURIComponent(u.pathname.slice(1)), connectTimeout: timeoutMs });
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
  const close = () => {
    kept?.destroy();
    kept = undefined;
  };
  return { ping, close };
}

/** The Database on MySQL/MariaDB at `url` (`mysql://` or `mariadb://`); `limit` bounds its statements. */
export async function openMysql(url: string, options: DatabaseOptions, limit: TimeLimit, unbounded: Database["unbounded"]): Promise<Database> {
  const u = new URL(url.replace(/^mariadb:/, "mysql:"));
  const flavor = await mysqlFlavor(u);
  const entities = buildEntities("mysql", flavor.binaryCollation);
  const { host, port, user, password } = endpoint(u);
  const dataSource = new DataSource({
    ...schemaOptions(entities),
    type: flavor.type,
    host,
    port,
    username: user,
    password,
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
    // which carry their values inline (mysql-escape.ts mysqlText, the driver's escaping too).
    multipleStatements: true,
    extra: { queryFormat },
    // mysql2 whose pools bound every statement and every wait for a connection (time-limit.ts),
    // and give each session the sql_mode DATABASE_URL asks for and, on Galera, its causality wait.
    driver: withSessionSettings(boundedMysql2(limit), sessionSettings(sessionSqlMode(u), flavor.galera)),
  });
  const health = mysqlHealthCheck(u);
  const close = async () => {
    health.close();
    if (dataSource.isInitialized) await dataSource.destroy();
  };
  return { dataSource, dialect: "mysql", entities, sql: new Sql(dataSource, "mysql", flavor.binaryCollation, undefined, limit), ping: health.ping, unbounded, close };
}
