import type { MigrationInterface, QueryRunner } from "typeorm";
import { runFor } from "./dialect.js";

/**
 * DESIGN §13: a unique_count bills a value once across the usage windows of consecutive rate
 * cards that both bill it with the same rate (src/billing/subscriptions/first-seen.ts). The switch
 * gives the new window a first-seen anchor per such rate: subscriptions.first_seen holds those of
 * the window from usage_since (JSON; NULL: none, as on every existing row, measured as before); a
 * billed window keeps its own in its invoice's basis JSON (no column).
 */
const MYSQL_UP = ["ALTER TABLE `subscriptions` ADD `first_seen` mediumtext NULL DEFAULT NULL"];
const MYSQL_DOWN = ["ALTER TABLE `subscriptions` DROP COLUMN `first_seen`"];
const SQLITE_UP = ['ALTER TABLE "subscriptions" ADD COLUMN "first_seen" text'];
const SQLITE_DOWN = ['ALTER TABLE "subscriptions" DROP COLUMN "first_seen"'];

export class FirstSeenAnchors1795000000038 implements MigrationInterface {
  name = "FirstSeenAnchors1795000000038";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_UP, SQLITE_UP);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
