/** Translates driver errors so nothing above src/db sees a TypeORM or driver error. */

/** True for a unique-key violation on MySQL/MariaDB (ER_DUP_ENTRY) or SQLite. */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; errno?: number; driverError?: { code?: string; errno?: number } };
  const code = e?.driverError?.code ?? e?.code;
  const errno = e?.driverError?.errno ?? e?.errno;
  return code === "ER_DUP_ENTRY" || errno === 1062 || code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY";
}
