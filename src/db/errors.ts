/** Translates driver errors so nothing above src/db sees a TypeORM or driver error. */
import type { Dialect } from "./columns.js";

interface DriverFields {
  code?: string;
  errno?: number;
  sqlState?: string;
  fatal?: boolean;
}

/** The driver's error fields, from TypeORM's QueryFailedError (its `driverError`) or the driver's own error. */
function fieldsOf(err: unknown): DriverFields {
  const e = err as (DriverFields & { driverError?: DriverFields }) | undefined;
  const d = e?.driverError;
  return { code: d?.code ?? e?.code, errno: d?.errno ?? e?.errno, sqlState: d?.sqlState ?? e?.sqlState, fatal: d?.fatal ?? e?.fatal };
}

/** True for a unique-key violation on MySQL/MariaDB (ER_DUP_ENTRY) or SQLite. */
export function isUniqueViolation(err: unknown): boolean {
  const { code, errno } = fieldsOf(err);
  return code === "ER_DUP_ENTRY" || errno === 1062 || code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY";
}

/** Deadlocks and lock timeouts (MySQL) and a busy database (SQLite): worth one more try. */
export function isTransient(err: unknown): boolean {
  const { code, errno } = fieldsOf(err);
  return errno === 1213 || errno === 1205 || code === "SQLITE_BUSY";
}

/**
 * The database refused what it was given (a value, a statement), as opposed to being
 * unreachable or busy (connection errors, lock timeouts, deadlocks, SQLITE_BUSY/LOCKED).
 */
export function isRefusedValue(err: unknown, dialect: Dialect): boolean {
  const { code, sqlState, fatal } = fieldsOf(err);
  if (dialect === "sqlite") return typeof code === "string" && code.startsWith("SQLITE_") && !/^SQLITE_(BUSY|LOCKED)/.test(code);
  // mysql2: an error the server answered has an SQLSTATE; a lost or refused connection is fatal.
  return typeof sqlState === "string" && fatal !== true && !isTransient(err);
}
