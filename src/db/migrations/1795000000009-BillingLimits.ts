import type { MigrationInterface, QueryRunner } from "typeorm";
import { runFor } from "./dialect.js";

/**
 * Value limits and failing subscriptions (DESIGN §6, §8):
 * - columns that hold sums (usage totals, invoice lines and totals, checkout amounts) become
 *   DECIMAL(65,12) on MySQL, so no sum of accepted inputs (20 + 12 digits each) can overflow them
 *   (an hourly total of two large events was an "Out of range value" 500; a cycle close whose
 *   usage total did not fit stopped the scheduler for every environment). SQLite keeps exact text.
 * - a subscription whose cycle close fails is set aside: the error, the number of attempts and
 *   when to try again are kept on its row.
 * - usage_events gains an (environment_id, event_name) index: a new pricing metric's backfill
 *   reads only its event name's events (it scanned every event of the environment, holding the
 *   environment's lock, so ingestion waited).
 * MariaDB rebuilds a table to change a column's type: the usage totals tables are copied.
 */
const MYSQL_UP = [
  "ALTER TABLE `usage_rollups` MODIFY `sum_value` decimal(65,12) NOT NULL",
  "ALTER TABLE `usage_rollups_minute` MODIFY `sum_value` decimal(65,12) NOT NULL",
  "ALTER TABLE `invoices` MODIFY `total` decimal(65,12) NOT NULL",
  "ALTER TABLE `invoice_lines` MODIFY `quantity` decimal(65,12) NOT NULL, MODIFY `unit_amount` decimal(65,12) NOT NULL, MODIFY `amount` decimal(65,12) NOT NULL",
  "ALTER TABLE `checkout_sessions` MODIFY `amount_due` decimal(65,12) NOT NULL",
  "ALTER TABLE `subscriptions` ADD `billing_error` varchar(500) NULL DEFAULT NULL, ADD `billing_attempts` int NOT NULL DEFAULT 0, ADD `billing_failed_at` datetime(3) NULL DEFAULT NULL, ADD `billing_retry_at` datetime(3) NULL DEFAULT NULL",
  "CREATE INDEX `ix_usage_events_env_name` ON `usage_events` (`environment_id`, `event_name`)",
];
/** Fails (strict mode) on a value that no longer fits, rather than cutting it. */
const MYSQL_DOWN = [
  "DROP INDEX `ix_usage_events_env_name` ON `usage_events`",
  "ALTER TABLE `subscriptions` DROP COLUMN `billing_error`, DROP COLUMN `billing_attempts`, DROP COLUMN `billing_failed_at`, DROP COLUMN `billing_retry_at`",
  "ALTER TABLE `checkout_sessions` MODIFY `amount_due` decimal(38,12) NOT NULL",
  "ALTER TABLE `invoice_lines` MODIFY `quantity` decimal(38,12) NOT NULL, MODIFY `unit_amount` decimal(38,12) NOT NULL, MODIFY `amount` decimal(38,12) NOT NULL",
  "ALTER TABLE `invoices` MODIFY `total` decimal(38,12) NOT NULL",
  "ALTER TABLE `usage_rollups_minute` MODIFY `sum_value` decimal(38,12) NOT NULL",
  "ALTER TABLE `usage_rollups` MODIFY `sum_value` decimal(38,12) NOT NULL",
];
const SQLITE_UP = [
  'ALTER TABLE "subscriptions" ADD COLUMN "billing_error" varchar(500)',
  'ALTER TABLE "subscriptions" ADD COLUMN "billing_attempts" integer NOT NULL DEFAULT (0)',
  'ALTER TABLE "subscriptions" ADD COLUMN "billing_failed_at" datetime(3)',
  'ALTER TABLE "subscriptions" ADD COLUMN "billing_retry_at" datetime(3)',
  'CREATE INDEX "ix_usage_events_env_name" ON "usage_events" ("environment_id", "event_name")',
];
const SQLITE_DOWN = [
  'DROP INDEX "ix_usage_events_env_name"',
  'ALTER TABLE "subscriptions" DROP COLUMN "billing_retry_at"',
  'ALTER TABLE "subscriptions" DROP COLUMN "billing_failed_at"',
  'ALTER TABLE "subscriptions" DROP COLUMN "billing_attempts"',
  'ALTER TABLE "subscriptions" DROP COLUMN "billing_error"',
];

export class BillingLimits1795000000009 implements MigrationInterface {
  name = "BillingLimits1795000000009";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_UP, SQLITE_UP);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
