/**
 * Driver errors are translated inside src/db: Sql hands its callers an unreachable database as
 * StorageUnavailableError and a lost lock conflict as StorageConflictError (the driver's error as
 * the cause); other errors pass as they are. The transport maps the two without knowing src/db.
 */
import test from "ava";
import { StorageConflictError, StorageUnavailableError } from "../../src/billing/storage-errors.js";
import { createDatabase } from "../../src/db/datasource.js";
import { isTransient, isUnavailable, isUniqueViolation, storageError } from "../../src/db/errors.js";
import { WSREP_SYNC_WAIT, sessionSettings } from "../../src/db/mysql-connect.js";
import { createTestDatabase } from "../helpers/db.js";
import { mysqlOnly } from "../helpers/mysql-only.js";

const driverError = (fields: Record<string, unknown>, message = "driver said no") => Object.assign(new Error(message), fields);

test("an unreachable database is StorageUnavailableError, with the driver's message and error as its cause", (t) => {
  for (const raw of [
    driverError({ code: "ECONNREFUSED" }, "connect ECONNREFUSED 127.0.0.1:3306"),
    driverError({ code: "PROTOCOL_CONNECTION_LOST", fatal: true }),
    driverError({ errno: 2006 }),
    // A Galera node out of the primary component ("WSREP has not yet prepared node for application use").
    driverError({ errno: 1047, sqlState: "08S01" }, "WSREP has not yet prepared node for application use"),
    driverError({ code: "DATABASE_TIMEOUT" }),
    driverError({ code: "SQLITE_IOERR_WRITE" }),
    Object.assign(new Error("not connected"), { name: "CannotExecuteNotConnectedError" }),
  ]) {
    const out = storageError(raw);
    t.true(out instanceof StorageUnavailableError, raw.message);
    t.is((out as Error).message, raw.message);
    t.is((out as Error).cause, raw);
    t.true(isUnavailable(out));
    t.is(storageError(out), out, "translated once");
  }
});

test("a deadlock, a lock wait timeout and a busy SQLite file are StorageConflictError", (t) => {
  for (const raw of [driverError({ errno: 1213, sqlState: "40001" }), driverError({ errno: 1205, sqlState: "HY000" }), driverError({ code: "SQLITE_BUSY" })]) {
    const out = storageError(raw);
    t.true(out instanceof StorageConflictError);
    t.is((out as Error).cause, raw);
    t.true(isTransient(out), "the stores' own retries still recognise it");
    t.false(isUnavailable(out));
  }
});

test("other errors pass as they are: a unique-key violation (stores translate it themselves), a domain error, a bug", (t) => {
  const dup = driverError({ code: "ER_DUP_ENTRY", errno: 1062, sqlState: "23000" });
  t.is(storageError(dup), dup);
  t.true(isUniqueViolation(storageError(dup)));
  const bug = new TypeError("x is undefined");
  t.is(storageError(bug), bug);
  t.is(storageError("text"), "text");
});

mysqlOnly("mysql: Sql's calls reject with the translated error: a statement past its time limit is unavailable", async (t) => {
  const tdb = await createTestDatabase("mysql");
  const db = await createDatabase(tdb.url, { poolSize: 2, statementTimeoutMs: 200 });
  await db.dataSource.initialize();
  try {
    const query = await t.throwsAsync(db.sql.query("SELECT SLEEP(3)", []));
    t.true(query instanceof StorageUnavailableError, String(query?.name));
    t.true(isUnavailable((query as Error).cause), "the driver's error is the cause");
    const inTx = await t.throwsAsync(db.sql.transaction(async (em) => em.query("SELECT SLEEP(3)")));
    t.true(inTx instanceof StorageUnavailableError, String(inTx?.name));
    const piped = await t.throwsAsync(db.sql.pipelined((p) => p.run([["SELECT SLEEP(3)", []]])));
    t.true(piped instanceof StorageUnavailableError, String(piped?.name));
  } finally {
    await db.close();
    await tdb.drop();
  }
});

test("a session's settings: sql_mode when the URL names one, and on Galera reads that wait for the cluster's writes", (t) => {
  t.is(sessionSettings(undefined, false), undefined);
  t.deepEqual(sessionSettings("STRICT_ALL_TABLES", false), { sql: "SET SESSION sql_mode = ?", values: ["STRICT_ALL_TABLES"] });
  t.deepEqual(sessionSettings(undefined, true), { sql: `SET SESSION wsrep_sync_wait = ${WSREP_SYNC_WAIT}`, values: [] });
  t.deepEqual(sessionSettings("STRICT_ALL_TABLES", true), { sql: "SET SESSION sql_mode = ?, wsrep_sync_wait = 3", values: ["STRICT_ALL_TABLES"] });
});
