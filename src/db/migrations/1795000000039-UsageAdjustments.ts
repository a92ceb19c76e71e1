import type { MigrationInterface, QueryRunner } from "typeorm";
import { runFor } from "./dialect.js";

/**
 * DESIGN §13: a raised usage multiplier or a usage add-on taken mid-period settles the usage
 * before it on the invoice that bills its window, as an adjustment line of its rate
 * (src/billing/subscriptions/usage-term-changes.ts), not as a credit to the balance:
 * subscriptions.usage_adjustments holds those of the window from usage_since (JSON; NULL: none,
 * as on every existing row); a billed window keeps its own in its invoice's basis JSON (no column).
 */
const MYSQL_UP = ["ALTER TABLE `subscriptions` ADD `usage_adjustments` mediumtext NULL DEFAULT NULL"];
const MYSQL_DOWN = ["ALTER TABLE `subscriptions` DROP COLUMN `usage_adjustments`"];
const SQLITE_UP = ['ALTER TABLE "subscriptions" ADD COLUMN "usage_adjustments" text'];
const SQLITE_DOWN = ['ALTER TABLE "subscriptions" DROP COLUMN "usage_adjustments"'];

export class UsageAdjustments1795000000039 implements MigrationInterface {
  name = "UsageAdjustments1795000000039";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_UP, SQLITE_UP);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
