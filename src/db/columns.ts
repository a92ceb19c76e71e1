/**
 * Column helpers shared by every entity, so both stores hold the same values:
 * - times are DATETIME(3) in UTC on MySQL and UTC text on SQLite;
 * - decimals are DECIMAL(38,12) on MySQL (sums DECIMAL(65,12)) and exact text on SQLite, read back in canonical form
 *   ("1.500000000000" and "1.5" both become "1.5");
 * - JSON documents are text, parsed and written here;
 * - text compares byte for byte on both stores (`withBinaryText`): SQLite does so natively, and on
 *   MySQL every text column has the server's binary collation without padding.
 */
import type { EntitySchemaColumnOptions, ValueTransformer } from "typeorm";
import { canonicalDecimal, dec, formatDecimal } from "../billing/money.js";

export type Dialect = "mysql" | "sqlite";

/** True for TypeORM's MySQL-family driver types (MySQL and MariaDB), the branch migrations take. */
export function isMysql(type: string): boolean {
  return type === "mysql" || type === "mariadb";
}

/**
 * The binary, no-pad collation of utf8mb4 for a server's `SELECT VERSION()`: text under it
 * compares byte for byte, as on SQLite ("abc", "ABC", "abc " and "Abc" with a combining accent
 * are four values). MySQL 5.7 has no no-pad binary collation; utf8mb4_bin pads (trailing spaces
 * are ignored there), which is the closest it has.
 */
export function binaryCollationFor(version: string): string {
  return version.includes("MariaDB") ? "utf8mb4_nopad_bin" : /^([89]|\d{2,})\./.test(version) ? "utf8mb4_0900_bin" : "utf8mb4_bin";
}

/** MariaDB's, the server CI and the tests run on; entities built without a server use it. */
export const DEFAULT_BINARY_COLLATION = "utf8mb4_nopad_bin";

const TEXT_TYPES = new Set(["varchar", "char", "text", "mediumtext", "longtext"]);

/**
 * Every text column of `columns` with the binary collation on MySQL: identifiers (IDs and every
 * column holding one, external IDs, rate codes, event names, idempotency keys, tokens, hashes,
 * period keys, currency codes, enums) must compare byte for byte, and text that is not an
 * identifier loses nothing by it (search folds case itself: see the subject store). One rule for
 * every column, so a new column cannot forget it. On SQLite, columns are returned as they are.
 */
export function withBinaryText<T extends Record<string, EntitySchemaColumnOptions>>(dialect: Dialect, collation: string, columns: T): T {
  if (dialect !== "mysql") return columns;
  const out: Record<string, EntitySchemaColumnOptions> = {};
  for (const [name, c] of Object.entries(columns)) {
    out[name] = TEXT_TYPES.has(String(c.type)) ? { ...c, charset: "utf8mb4", collation } : c;
  }
  return out as T;
}

/** withBinaryText bound to one dialect and collation: what each aggregate's tables are built with. */
export type ExactText = <T extends Record<string, EntitySchemaColumnOptions>>(columns: T) => T;

export function idColumn(primary = false): EntitySchemaColumnOptions {
  return { type: "varchar", length: 32, primary, nullable: false };
}

/**
 * A surrogate auto-increment primary key. Listings order by it, so they follow insertion order
 * exactly (creation times can tie within a millisecond); the public ID is a unique column.
 */
export function seqColumn(dialect: Dialect): EntitySchemaColumnOptions {
  return dialect === "mysql" ? { type: "bigint", primary: true, generated: "increment", unsigned: true } : { type: "integer", primary: true, generated: "increment" };
}

/** The times both stores can hold and give back as written: years 1000 to 9999 (MySQL's DATETIME range). */
export const STORABLE_FROM = Date.UTC(1000, 0, 1);
export const STORABLE_END = Date.UTC(10000, 0, 1);

/**
 * A time about to be written, checked: an invalid Date or one outside years 1000–9999 would be
 * written as a negative or five-digit year (SQLite keeps any text; MySQL refuses or mangles it)
 * that no read turns back into the same time. The service accepts only instants from 2000 to 2200
 * (src/billing/time.ts) and derives none far from them, so this never fires on its own data; if a
 * bug ever made such a time, the write fails (and its transaction rolls back) instead of leaving
 * a row that breaks every later read.
 */
export function storableTime(d: Date): Date {
  const ms = d.getTime();
  if (!(ms >= STORABLE_FROM && ms < STORABLE_END)) {
    throw new Error(`refusing to store the time ${Number.isNaN(ms) ? "Invalid Date" : d.toISOString()}: outside years 1000–9999`);
  }
  return d;
}

export const timeTransformer: ValueTransformer = {
  to: (value: unknown) => (value instanceof Date ? storableTime(value) : value),
  from: (value: unknown) => value,
};

export function timeColumn(nullable = false): EntitySchemaColumnOptions {
  // `default: null` on nullable columns: MariaDB reports their default as NULL, and without it
  // TypeORM's schema diff would see a change that is not there.
  return nullable ? { type: "datetime", precision: 3, nullable, default: null, transformer: timeTransformer } : { type: "datetime", precision: 3, nullable, transformer: timeTransformer };
}

export function textColumn(length: number, nullable = true): EntitySchemaColumnOptions {
  return nullable ? { type: "varchar", length, nullable, default: null } : { type: "varchar", length, nullable };
}

export const jsonTransformer: ValueTransformer = {
  to: (value: unknown) => (value === undefined ? undefined : value === null ? null : JSON.stringify(value)),
  from: (value: unknown) => (typeof value === "string" ? JSON.parse(value) : (value ?? null)),
};

/**
 * JSON as text. On MySQL a MEDIUMTEXT (16 MB): TEXT holds 64 KB, less than what validation lets
 * through (an event's 100 data keys and values, a subject's 50 metadata entries of up to three
 * UTF-8 bytes a character).
 */
export function jsonColumn(dialect: Dialect, nullable = false): EntitySchemaColumnOptions {
  return { type: dialect === "mysql" ? "mediumtext" : "text", nullable, transformer: jsonTransformer };
}

export const decimalTransformer: ValueTransformer = {
  to: (value: unknown) => (value === undefined || value === null ? value : canonicalDecimal(String(value))),
  from: (value: unknown) => (value === undefined || value === null ? null : canonicalDecimal(String(value))),
};

/** An exact decimal (price, quantity, usage value). The domain passes and receives strings. */
export function decimalColumn(dialect: Dialect, nullable = false): EntitySchemaColumnOptions {
  const base: EntitySchemaColumnOptions =
    dialect === "mysql" ? { type: "decimal", precision: 38, scale: 12, nullable, transformer: decimalTransformer } : { type: "text", nullable, transformer: decimalTransformer };
  return nullable ? { ...base, default: null } : base;
}

/**
 * An exact decimal that holds a sum (usage totals, invoice line quantities and amounts, invoice
 * totals): DECIMAL(65,12) on MySQL, wide enough for any sum of accepted inputs (DESIGN §6).
 */
export function sumColumn(dialect: Dialect, nullable = false): EntitySchemaColumnOptions {
  return dialect === "mysql" ? { ...decimalColumn(dialect, nullable), precision: 65 } : decimalColumn(dialect, nullable);
}

export function intColumn(): EntitySchemaColumnOptions {
  return { type: "int", nullable: false };
}

/** Exact a + b over decimal text, for SQLite (NULL counts as 0). */
export function decAdd(a: unknown, b: unknown): string {
  return formatDecimal(dec(String(a ?? "0")).plus(dec(String(b ?? "0"))));
}

/** Exact max(a, b) over decimal text, for SQLite (NULL is ignored). */
export function decMax(a: unknown, b: unknown): string | null {
  if (a === null || a === undefined) return b === null || b === undefined ? null : String(b);
  if (b === null || b === undefined) return String(a);
  return dec(String(b)).gt(dec(String(a))) ? String(b) : String(a);
}
