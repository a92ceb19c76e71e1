import type { MigrationInterface, QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";

/**
 * On MySQL, JSON text columns become MEDIUMTEXT (16 MB): TEXT holds 64 KB, and validation lets
 * larger values through (an event's `data` of 100 keys and values of up to 1,000 characters;
 * a subject's 50 metadata entries in three-byte characters). Such a value was a 500, and failed
 * every event that shared its group commit. SQLite's TEXT has no such bound.
 * MariaDB cannot change a column's type in place: each table is copied (writes to it wait), so
 * on a large usage_events table this migration takes a while; plan the upgrade for it.
 */
const COLUMNS: Record<string, [column: string, nullable: boolean][]> = {
  subjects: [["metadata", false]],
  pricing_metrics: [["dimensions", false]],
  rate_cards: [["metadata", false]],
  rates: [["dimensions", true]],
  rate_cells: [["coordinates", false]],
  usage_events: [["data", false]],
  usage_rollups: [["dims", false]],
  usage_rollups_minute: [["dims", false]],
  subscriptions: [
    ["fixed_rate_quantities", false],
    ["rate_multipliers", false],
    ["metadata", false],
  ],
  checkout_sessions: [["payload", false]],
  timeline_items: [
    ["fixed_rate_quantities", false],
    ["rate_multipliers", false],
  ],
};

/** One ALTER per table (one rebuild), every column to `type`. */
async function retype(q: QueryRunner, type: "mediumtext" | "text"): Promise<void> {
  for (const [table, columns] of Object.entries(COLUMNS)) {
    const changes = columns.map(([column, nullable]) => `MODIFY \`${column}\` ${type} ${nullable ? "NULL" : "NOT NULL"}`);
    await q.query(`ALTER TABLE \`${table}\` ${changes.join(", ")}`);
  }
}

export class LargeJson1795000000007 implements MigrationInterface {
  name = "LargeJson1795000000007";

  async up(q: QueryRunner): Promise<void> {
    if (isMysql(q.connection.driver.options.type)) await retype(q, "mediumtext");
  }

  /** Fails on a value over 64 KB (strict mode), rather than cutting it short. */
  async down(q: QueryRunner): Promise<void> {
    if (isMysql(q.connection.driver.options.type)) await retype(q, "text");
  }
}
