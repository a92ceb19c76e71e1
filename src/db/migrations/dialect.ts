/** What the generated migrations share: run one dialect's statements, drop tables in order. */
import type { QueryRunner } from "typeorm";
import { binaryCollationFor, isMysql } from "../columns.js";

export async function runFor(q: QueryRunner, mysql: readonly string[], sqlite: readonly string[]): Promise<void> {
  for (const sql of isMysql(q.connection.driver.options.type) ? mysql : sqlite) await q.query(sql);
}

/** An identifier quoted for the connection's dialect. */
export function quoted(q: QueryRunner, name: string): string {
  return isMysql(q.connection.driver.options.type) ? `\`${name}\`` : `"${name}"`;
}

export async function dropTables(q: QueryRunner, tables: readonly string[]): Promise<void> {
  for (const table of tables) await q.query(`DROP TABLE ${quoted(q, table)}`);
}

/** The server's binary collation without padding (see binaryCollationFor). */
export async function binaryCollation(q: QueryRunner): Promise<string> {
  const [{ v }] = (await q.query("SELECT VERSION() AS v")) as { v: string }[];
  return binaryCollationFor(v);
}
