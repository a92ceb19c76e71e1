import type { MigrationInterface, QueryRunner } from "typeorm";
import { runFor } from "./dialect.js";

/**
 * The invoice lifecycle (DESIGN §8, issue 15):
 * - an environment's draft grace period (seconds; default one hour, 0 finalizes at once);
 * - an invoice that bills a usage window keeps the window and what it was priced from (card,
 *   quantities, multipliers), so a draft can be recomputed when it finalizes and late usage of a
 *   finalized window can be billed as an adjustment; a draft finalizes at `finalizes_at` on its
 *   subscription's clock (`clock_id`, NULL for real time);
 * - each line says what it is (fixed, usage, adjustment) and, for usage and adjustments, which
 *   rate (and cell) it prices and which invoice's window it adjusts;
 * - a subscription keeps the event counts its finalized windows were last reconciled with (the
 *   cheap check that tells whether late usage arrived) and when an ended one was last checked.
 * Invoices written before this have no window: nothing of them is recomputed or adjusted.
 */
const MYSQL_UP = [
  "ALTER TABLE `environments` ADD `invoice_grace_seconds` int NOT NULL DEFAULT 3600",
  "ALTER TABLE `invoices` ADD `finalizes_at` datetime(3) NULL DEFAULT NULL, ADD `finalized_at` datetime(3) NULL DEFAULT NULL, ADD `clock_id` varchar(32) NULL DEFAULT NULL, ADD `usage_from` datetime(3) NULL DEFAULT NULL, ADD `usage_to` datetime(3) NULL DEFAULT NULL, ADD `basis` mediumtext NULL",
  "CREATE INDEX `ix_invoices_status_finalizes` ON `invoices` (`status`, `finalizes_at`)",
  "CREATE INDEX `ix_invoices_subscription_seq` ON `invoices` (`subscription_id`, `seq`)",
  "ALTER TABLE `invoice_lines` ADD `kind` varchar(16) NOT NULL DEFAULT 'charge', ADD `line_key` varchar(1000) NULL DEFAULT NULL, ADD `window_invoice_id` varchar(32) NULL DEFAULT NULL",
  "CREATE INDEX `ix_invoice_lines_window` ON `invoice_lines` (`window_invoice_id`)",
  "ALTER TABLE `subscriptions` ADD `usage_check` mediumtext NULL, ADD `usage_checked_at` datetime(3) NULL DEFAULT NULL",
  "CREATE INDEX `ix_subscriptions_status_checked` ON `subscriptions` (`status`, `usage_checked_at`)",
];
const MYSQL_DOWN = [
  "DROP INDEX `ix_subscriptions_status_checked` ON `subscriptions`",
  "ALTER TABLE `subscriptions` DROP COLUMN `usage_check`, DROP COLUMN `usage_checked_at`",
  "DROP INDEX `ix_invoice_lines_window` ON `invoice_lines`",
  "ALTER TABLE `invoice_lines` DROP COLUMN `kind`, DROP COLUMN `line_key`, DROP COLUMN `window_invoice_id`",
  "DROP INDEX `ix_invoices_subscription_seq` ON `invoices`",
  "DROP INDEX `ix_invoices_status_finalizes` ON `invoices`",
  "ALTER TABLE `invoices` DROP COLUMN `finalizes_at`, DROP COLUMN `finalized_at`, DROP COLUMN `clock_id`, DROP COLUMN `usage_from`, DROP COLUMN `usage_to`, DROP COLUMN `basis`",
  "ALTER TABLE `environments` DROP COLUMN `invoice_grace_seconds`",
];
const SQLITE_UP = [
  'ALTER TABLE "environments" ADD COLUMN "invoice_grace_seconds" integer NOT NULL DEFAULT (3600)',
  'ALTER TABLE "invoices" ADD COLUMN "finalizes_at" datetime(3)',
  'ALTER TABLE "invoices" ADD COLUMN "finalized_at" datetime(3)',
  'ALTER TABLE "invoices" ADD COLUMN "clock_id" varchar(32)',
  'ALTER TABLE "invoices" ADD COLUMN "usage_from" datetime(3)',
  'ALTER TABLE "invoices" ADD COLUMN "usage_to" datetime(3)',
  'ALTER TABLE "invoices" ADD COLUMN "basis" text',
  'CREATE INDEX "ix_invoices_status_finalizes" ON "invoices" ("status", "finalizes_at")',
  'CREATE INDEX "ix_invoices_subscription_seq" ON "invoices" ("subscription_id", "seq")',
  `ALTER TABLE "invoice_lines" ADD COLUMN "kind" varchar(16) NOT NULL DEFAULT ('charge')`,
  'ALTER TABLE "invoice_lines" ADD COLUMN "line_key" varchar(1000)',
  'ALTER TABLE "invoice_lines" ADD COLUMN "window_invoice_id" varchar(32)',
  'CREATE INDEX "ix_invoice_lines_window" ON "invoice_lines" ("window_invoice_id")',
  'ALTER TABLE "subscriptions" ADD COLUMN "usage_check" text',
  'ALTER TABLE "subscriptions" ADD COLUMN "usage_checked_at" datetime(3)',
  'CREATE INDEX "ix_subscriptions_status_checked" ON "subscriptions" ("status", "usage_checked_at")',
];
const SQLITE_DOWN = [
  'DROP INDEX "ix_subscriptions_status_checked"',
  'ALTER TABLE "subscriptions" DROP COLUMN "usage_checked_at"',
  'ALTER TABLE "subscriptions" DROP COLUMN "usage_check"',
  'DROP INDEX "ix_invoice_lines_window"',
  'ALTER TABLE "invoice_lines" DROP COLUMN "window_invoice_id"',
  'ALTER TABLE "invoice_lines" DROP COLUMN "line_key"',
  'ALTER TABLE "invoice_lines" DROP COLUMN "kind"',
  'DROP INDEX "ix_invoices_subscription_seq"',
  'DROP INDEX "ix_invoices_status_finalizes"',
  'ALTER TABLE "invoices" DROP COLUMN "basis"',
  'ALTER TABLE "invoices" DROP COLUMN "usage_to"',
  'ALTER TABLE "invoices" DROP COLUMN "usage_from"',
  'ALTER TABLE "invoices" DROP COLUMN "clock_id"',
  'ALTER TABLE "invoices" DROP COLUMN "finalized_at"',
  'ALTER TABLE "invoices" DROP COLUMN "finalizes_at"',
  'ALTER TABLE "environments" DROP COLUMN "invoice_grace_seconds"',
];

export class InvoiceLifecycle1795000000012 implements MigrationInterface {
  name = "InvoiceLifecycle1795000000012";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_UP, SQLITE_UP);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
