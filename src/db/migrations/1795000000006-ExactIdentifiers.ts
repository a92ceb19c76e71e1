import type { MigrationInterface, QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";

/**
 * On MySQL, idempotency keys, event names and the `last` tie-break key compare byte for byte,
 * trailing spaces included, as they do on SQLite: under the default case- and space-insensitive
 * collation "abc", "ABC" and "abc " were one idempotency key and "usage" and "USAGE" one event name.
 * The binary collation without padding is utf8mb4_nopad_bin on MariaDB, utf8mb4_0900_bin on MySQL 8.
 */
const COLUMNS: [table: string, column: string, nullable: boolean][] = [
  ["usage_events", "idempotency_key", false],
  ["usage_events", "event_name", false],
  ["pricing_metrics", "event_name", false],
  ["usage_rollups", "last_key", true],
  ["usage_rollups_minute", "last_key", true],
];

export class ExactIdentifiers1795000000006 implements MigrationInterface {
  name = "ExactIdentifiers1795000000006";

  async up(q: QueryRunner): Promise<void> {
    if (!isMysql(q.connection.driver.options.type)) return; // SQLite compares text exactly already
    const [{ v }] = (await q.query("SELECT VERSION() AS v")) as { v: string }[];
    const collation = v.includes("MariaDB") ? "utf8mb4_nopad_bin" : /^[89]\./.test(v) ? "utf8mb4_0900_bin" : "utf8mb4_bin";
    for (const [table, column, nullable] of COLUMNS) {
      await q.query(`ALTER TABLE \`${table}\` MODIFY \`${column}\` varchar(255) CHARACTER SET utf8mb4 COLLATE ${collation} ${nullable ? "NULL DEFAULT NULL" : "NOT NULL"}`);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    if (!isMysql(q.connection.driver.options.type)) return;
    for (const [table, column, nullable] of COLUMNS) {
      await q.query(`ALTER TABLE \`${table}\` MODIFY \`${column}\` varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci ${nullable ? "NULL DEFAULT NULL" : "NOT NULL"}`);
    }
  }
}
