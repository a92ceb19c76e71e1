import type { MigrationInterface, QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";
import { binaryCollation } from "./dialect.js";

/**
 * On MySQL, every text column of every table compares byte for byte, as on SQLite: IDs and every
 * column holding one, external IDs, rate codes, coordinate and dimension hashes, tokens, key
 * hashes and prefixes, period keys, currency codes, enums. Under the tables' default
 * utf8mb4_unicode_ci, `GET /subjects/ext_x` found the subject whose external ID is `Ext_x`,
 * `Müller` collided with `Muller`, a trailing space or a case-flipped ID or checkout token still
 * matched, and two rate codes `Seats` and `seats` on one card were a 500 (unique key).
 * Migration 6 did this for idempotency keys and event names; this does it for the rest, and
 * makes the binary collation each table's default, so a column added later has it too.
 *
 * Up cannot create duplicates: values equal under the binary collation were equal under the old
 * one, so no unique key holds two of them. Each table is copied once (MariaDB rebuilds its
 * indexes under the new collation); writes to it wait meanwhile.
 *
 * Down can: once `ext_x` and `Ext_x` both exist, utf8mb4_unicode_ci sees one value twice in a
 * unique key. Down first looks for such values in every unique key and, if any, refuses with the
 * list before changing anything (resolve them, then migrate down again). Migration 6's columns
 * stay binary.
 */
const TABLES = [
  "environments",
  "api_keys",
  "subjects",
  "pricing_metrics",
  "rate_cards",
  "rate_catalogs",
  "rates",
  "rate_cells",
  "usage_events",
  "usage_rollups",
  "usage_rollups_minute",
  "subscriptions",
  "invoices",
  "invoice_lines",
  "payment_methods",
  "checkout_sessions",
  "test_clocks",
  "subscription_timelines",
  "timeline_items",
];

const OLD_COLLATION = "utf8mb4_unicode_ci";

/** Migration 6's columns: binary before this migration too, and after its down. */
const BINARY_BEFORE: Record<string, [column: string, nullable: boolean][]> = {
  usage_events: [
    ["idempotency_key", false],
    ["event_name", false],
  ],
  pricing_metrics: [["event_name", false]],
  usage_rollups: [["last_key", true]],
  usage_rollups_minute: [["last_key", true]],
};

const TEXT_TYPES = new Set(["char", "varchar", "text", "mediumtext", "longtext"]);

/**
 * Values that one of `table`'s unique keys holds twice once its text columns (those down
 * converts) compare under OLD_COLLATION; up to three per key, as readable lines.
 */
async function collisionsOnDown(q: QueryRunner, table: string): Promise<string[]> {
  const columns: { name: string; type: string }[] = await q.query("SELECT COLUMN_NAME AS name, DATA_TYPE AS type FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", [
    table,
  ]);
  const kept = new Set((BINARY_BEFORE[table] ?? []).map(([c]) => c));
  const converted = new Set(columns.filter((c) => TEXT_TYPES.has(String(c.type).toLowerCase()) && !kept.has(c.name)).map((c) => c.name));
  const keyParts: { key: string; column: string }[] = await q.query(
    "SELECT INDEX_NAME AS `key`, COLUMN_NAME AS `column` FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND NON_UNIQUE = 0 ORDER BY INDEX_NAME, SEQ_IN_INDEX",
    [table],
  );
  const keys = new Map<string, string[]>();
  for (const { key, column } of keyParts) keys.set(key, [...(keys.get(key) ?? []), column]);
  const found: string[] = [];
  for (const [key, cols] of keys) {
    if (!cols.some((c) => converted.has(c))) continue;
    const grouped = cols.map((c) => (converted.has(c) ? `\`${c}\` COLLATE ${OLD_COLLATION}` : `\`${c}\``)).join(", ");
    const notNull = cols.map((c) => `\`${c}\` IS NOT NULL`).join(" AND ");
    const shown = `CONCAT('(', CONCAT_WS(', ', ${cols.map((c) => `QUOTE(\`${c}\`)`).join(", ")}), ')')`;
    const rows: { v: string }[] = await q.query(
      `SELECT GROUP_CONCAT(${shown} ORDER BY ${shown} SEPARATOR ' and ') AS v FROM \`${table}\` WHERE ${notNull} GROUP BY ${grouped} HAVING COUNT(*) > 1 LIMIT 3`,
    );
    for (const r of rows) found.push(`${table}.${key}: ${r.v}`);
  }
  return found;
}

export class BinaryIdentifiers1795000000008 implements MigrationInterface {
  name = "BinaryIdentifiers1795000000008";

  async up(q: QueryRunner): Promise<void> {
    if (!isMysql(q.connection.driver.options.type)) return; // SQLite compares text byte for byte already
    const collation = await binaryCollation(q);
    for (const table of TABLES) await q.query(`ALTER TABLE \`${table}\` CONVERT TO CHARACTER SET utf8mb4 COLLATE ${collation}`);
  }

  async down(q: QueryRunner): Promise<void> {
    if (!isMysql(q.connection.driver.options.type)) return;
    const collisions: string[] = [];
    for (const table of TABLES) collisions.push(...(await collisionsOnDown(q, table)));
    if (collisions.length > 0) {
      throw new Error(
        `cannot migrate down: under ${OLD_COLLATION} these values of a unique key would be equal (they differ only in case, accents or trailing spaces); ` +
          `change or delete one of each, then migrate down again. ${collisions.join("; ")}`,
      );
    }
    for (const table of TABLES) {
      // Column by column rather than CONVERT TO: migration 6's columns are left as they are.
      const columns: { name: string; type: string; nullable: string }[] = await q.query(
        "SELECT COLUMN_NAME AS name, COLUMN_TYPE AS type, IS_NULLABLE AS nullable FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLLATION_NAME IS NOT NULL ORDER BY ORDINAL_POSITION",
        [table],
      );
      const kept = new Set((BINARY_BEFORE[table] ?? []).map(([c]) => c));
      const changes = columns
        .filter((c) => !kept.has(c.name))
        .map((c) => `, MODIFY \`${c.name}\` ${c.type} CHARACTER SET utf8mb4 COLLATE ${OLD_COLLATION} ${c.nullable === "YES" ? "NULL DEFAULT NULL" : "NOT NULL"}`);
      await q.query(`ALTER TABLE \`${table}\` DEFAULT CHARACTER SET utf8mb4 COLLATE ${OLD_COLLATION}${changes.join("")}`);
    }
  }
}
