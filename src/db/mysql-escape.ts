/**
 * The one escaper of values the MySQL path writes into SQL text: mysql2's own (its `escape` and
 * its formatting of `?` placeholders, sql-escaper underneath). Every statement reaches MySQL as
 * text: TypeORM and Sql.query send `?` parameters formatted by `queryFormat`, and ingestion writes
 * its rows' values inline with `mysqlText`; both escape text with backslashes (`\'`, `\\`, `\0`).
 *
 * That escaping reads back as the same text only when the session's sql_mode lacks
 * NO_BACKSLASH_ESCAPES (under it a backslash is an ordinary character, so `'\''` no longer ends
 * where it should). `sqlModeRefusal` names such a mode; the server refuses to start under it
 * (mysql-connect.ts checks the session's sql_mode before anything is written).
 */
import mysql from "mysql2/promise";

/** The characters the driver's escaper writes with a backslash (sql-escaper's set). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL, backspace, tab and Ctrl-Z are among them
const ESCAPED = /[\0\b\t\n\r\x1a"'\\]/;

/**
 * Text as a MySQL string literal, for statements built with their values inline (the ingest
 * path: a batch's INSERT and totals carry thousands of values, and the driver's formatting of
 * `?` placeholders, value by value, cost the server about as much CPU as the rest of ingestion).
 * The driver's own escaping, byte for byte; text with nothing to escape (most values) is only quoted.
 */
export function mysqlText(s: string): string {
  return ESCAPED.test(s) ? mysql.escape(s) : `'${s}'`;
}

/**
 * The driver's formatting of `?` parameters (the pool's `queryFormat`), except that text without
 * parameters is sent as it is: the driver would otherwise scan all of it (quotes and comments
 * included) for a `?` it has no value for, which for an ingest packet of a megabyte of inline
 * values cost as much as building it.
 */
export function queryFormat(this: { config: { stringifyObjects?: boolean; timezone?: string } }, sql: string, values: unknown): string {
  if (values === undefined || values === null || (Array.isArray(values) && values.length === 0)) return sql;
  return mysql.format(sql, values as Parameters<typeof mysql.format>[1], this.config.stringifyObjects, this.config.timezone as Parameters<typeof mysql.format>[3]);
}

/** sql_mode flags under which the escaping above reads back as other text. */
export const UNSUPPORTED_SQL_MODES: readonly string[] = ["NO_BACKSLASH_ESCAPES"];

/**
 * Why this server cannot work in a session whose `@@SESSION.sql_mode` is `sqlMode`, saying what
 * to change; undefined when it can.
 */
export function sqlModeRefusal(sqlMode: string): string | undefined {
  const modes = sqlMode
    .split(",")
    .map((m) => m.trim().toUpperCase())
    .filter((m) => m !== "");
  const bad = modes.filter((m) => UNSUPPORTED_SQL_MODES.includes(m));
  if (bad.length === 0) return undefined;
  const kept = modes.filter((m) => !UNSUPPORTED_SQL_MODES.includes(m)).join(",");
  return (
    `the MySQL session's sql_mode is '${sqlMode}', and ${bad.join(", ")} is not supported: this server writes text values with backslash escapes, which that mode reads as ordinary characters. ` +
    `Remove ${bad.join(", ")} from the server's sql_mode (SET GLOBAL sql_mode = '${kept}'; and sql_mode in its option file), ` +
    `or from this server's connections only with DATABASE_URL's sql_mode parameter (mysql://user:pass@host:3306/db?sql_mode=${encodeURIComponent(kept)})`
  );
}
