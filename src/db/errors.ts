/**
 * Translates driver errors so nothing above src/db sees a TypeORM or driver error: Sql hands its
 * callers an unreachable database as StorageUnavailableError and a lost lock conflict as
 * StorageConflictError (billing/storage-errors.ts); stores turn unique-key violations into the
 * domain's AlreadyExistsError where a caller may cause one.
 */
import { StorageConflictError, StorageUnavailableError } from "../billing/storage-errors.js";
import type { Dialect } from "./columns.js";

interface DriverFields {
  code?: string;
  errno?: number;
  sqlState?: string;
  fatal?: boolean;
  message?: string;
  name?: string;
}

/** The driver's error fields, from TypeORM's QueryFailedError (its `driverError`) or the driver's own error. */
function fieldsOf(err: unknown): DriverFields {
  const e = err as (DriverFields & { driverError?: DriverFields }) | undefined;
  const d = e?.driverError;
  // Only a driver's string code: other errors (a ConnectError's is a number) say nothing here.
  const code: unknown = d?.code ?? e?.code;
  return {
    code: typeof code === "string" ? code : undefined,
    errno: d?.errno ?? e?.errno,
    sqlState: d?.sqlState ?? e?.sqlState,
    fatal: d?.fatal ?? e?.fatal,
    message: d?.message ?? e?.message,
    name: e?.name,
  };
}

/** Socket-level failures: the server is not there, went away, or does not answer. */
const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EHOSTDOWN",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EPIPE",
  "PROTOCOL_CONNECTION_LOST",
  "PROTOCOL_SEQUENCE_TIMEOUT", // a statement past its time limit (time-limit.ts)
  "DATABASE_TIMEOUT", // no connection within the time limit, or SQLite locked for all of it (time-limit.ts)
  "ER_CON_COUNT_ERROR", // too many connections
  "ER_SERVER_SHUTDOWN",
  "ER_CONNECTION_KILLED",
  "SQLITE_CANTOPEN",
  "SQLITE_IOERR",
  "SQLITE_NOTADB",
]);
/**
 * MySQL client/server error numbers of the same kind (2002 can't connect, 2006 gone away, 2013
 * lost, …), and 1047 from a Galera node that is not part of the cluster's primary component
 * ("WSREP has not yet prepared node for application use": cut off, joining, or shutting down).
 */
const CONNECTION_ERRNOS = new Set([1040, 1047, 1053, 1927, 2002, 2003, 2005, 2006, 2013, 2055]);
/** mysql2 and TypeORM errors that carry no code, recognised by their message or name. */
const CONNECTION_MESSAGES = [/^Pool is closed/, /in closed state/, /^connect ETIMEDOUT/, /Connection lost/i];
const CONNECTION_NAMES = new Set(["CannotExecuteNotConnectedError", "ConnectionIsNotSetError", "ConnectionNotFoundError"]);

/**
 * The database cannot be reached: refused or lost connections, a server gone away, a connection
 * that timed out, a pool that is closed, a SQLite file that cannot be opened or read. The caller
 * should be told "unavailable" (503, retry later), never what the driver said.
 */
export function isUnavailable(err: unknown): boolean {
  if (err instanceof StorageUnavailableError) return true;
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const { code, errno, fatal, message, name, sqlState } = fieldsOf(e);
    if (code !== undefined && (CONNECTION_CODES.has(code) || code.startsWith("SQLITE_IOERR") || code.startsWith("SQLITE_CANTOPEN"))) return true;
    if (errno !== undefined && CONNECTION_ERRNOS.has(errno)) return true;
    // mysql2 marks an error that ended the connection as fatal (a query the server answered is not).
    if (fatal === true && sqlState === undefined) return true;
    if (name !== undefined && CONNECTION_NAMES.has(name)) return true;
    if (typeof message === "string" && CONNECTION_MESSAGES.some((r) => r.test(message))) return true;
  }
  return false;
}

/** True for a unique-key violation on MySQL/MariaDB (ER_DUP_ENTRY) or SQLite. */
export function isUniqueViolation(err: unknown): boolean {
  const { code, errno } = fieldsOf(err);
  return code === "ER_DUP_ENTRY" || errno === 1062 || code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY";
}

/**
 * Deadlocks and lock timeouts (MySQL) and a busy database (SQLite): worth one more try. On a
 * Galera cluster a transaction that lost certification to a concurrent one committed on another
 * node (or was aborted by one being applied) fails with the same deadlock error, 1213, often at
 * COMMIT: retried the same way.
 */
export function isTransient(err: unknown): boolean {
  if (err instanceof StorageConflictError) return true;
  const { code, errno } = fieldsOf(err);
  // SQLITE_BUSY and its extended codes: SQLITE_BUSY_SNAPSHOT is a WAL transaction that read, then
  // could not write because another connection committed since its snapshot (only a new try helps).
  return errno === 1213 || errno === 1205 || code?.startsWith("SQLITE_BUSY") === true;
}

/**
 * The database refused what it was given (a value, a statement), as opposed to being
 * unreachable or busy (connection errors, lock timeouts, deadlocks, SQLITE_BUSY/LOCKED).
 */
export function isRefusedValue(err: unknown, dialect: Dialect): boolean {
  const { code, sqlState, fatal } = fieldsOf(err);
  if (dialect === "sqlite") return typeof code === "string" && code.startsWith("SQLITE_") && !/^SQLITE_(BUSY|LOCKED)/.test(code);
  // mysql2: an error the server answered has an SQLSTATE; a lost or refused connection is fatal.
  // (Galera's 1047, a node out of the cluster, is answered with an SQLSTATE too: unavailable, not refused.)
  return typeof sqlState === "string" && fatal !== true && !isTransient(err) && !isUnavailable(err);
}

/**
 * `err` as the stores' callers hear it: an unreachable database (isUnavailable) as
 * StorageUnavailableError, a deadlock, lock wait timeout or busy file (isTransient) as
 * StorageConflictError, each with the driver's message and the driver's error as its cause;
 * anything else as it is.
 */
export function storageError(err: unknown): unknown {
  if (err instanceof StorageUnavailableError || err instanceof StorageConflictError) return err;
  const message = err instanceof Error ? err.message : String(err);
  if (isUnavailable(err)) return withDriverStack(new StorageUnavailableError(message, { cause: err }), err);
  if (isTransient(err)) return withDriverStack(new StorageConflictError(message, { cause: err }), err);
  return err;
}

/** `out` with the driver error's stack (where it failed, which logs show), under `out`'s own name. */
function withDriverStack(out: Error, err: unknown): Error {
  const stack = err instanceof Error ? err.stack : undefined;
  const at = stack?.indexOf("\n    at ") ?? -1;
  if (stack !== undefined && at >= 0) out.stack = `${out.name}: ${out.message}${stack.slice(at)}`;
  return out;
}

/** `p`, its failure translated by storageError. */
export function translated<T>(p: Promise<T>): Promise<T> {
  return p.catch((err: unknown) => {
    throw storageError(err);
  });
}
