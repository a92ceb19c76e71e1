/** What the generated migrations share: run one dialect's statements, drop tables in order. */
import type { QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";

export async function runFor(q: QueryRunner, mysql: readonly string[], sqlite: readonly string[]): Promise<void> {
  for (const sql of isMysql(q.connection.driver.options.type) ? mysql : sqlite) await q.query(sql);
}

export async function dropTables(q: QueryRunner, tables: readonly string[]): Promise<void> {
  const quote = isMysql(q.connection.driver.options.type) ? "`" : '"';
  for (const table of tables) await q.query(`DROP TABLE ${quote}${table}${quote}`);
}
