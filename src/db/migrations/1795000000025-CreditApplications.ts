import { type MigrationInterface, type QueryRunner, TableColumn } from "typeorm";
import { isMysql } from "../columns.js";
import { runFor } from "./dialect.js";

/**
 * DESIGN §14: credits applied to invoices and the amount due; a subscription's minimum commitment.
 * - invoices.credits_applied: the grants spent on it, in order (JSON list; NULL: none).
 * - invoices.amount_due: total less credits applied; existing rows are due their total.
 * - subscriptions.commitment: the minimum commitment per period in effect and the one pending
 *   for the next period (JSON; NULL: none).
 * - invoice_lines.kind widens to 24 characters ("commitment_true_up" is 18).
 */
const MYSQL_UP = [
  "ALTER TABLE `invoices` ADD `credits_applied` mediumtext NULL DEFAULT NULL, ADD `amount_due` decimal(65,12) NULL DEFAULT NULL",
  "UPDATE `invoices` SET `amount_due` = `total`",
  "ALTER TABLE `subscriptions` ADD `commitment` mediumtext NULL DEFAULT NULL",
  "ALTER TABLE `invoice_lines` MODIFY `kind` varchar(24) NOT NULL DEFAULT 'charge'",
];
const MYSQL_DOWN = [
  "ALTER TABLE `invoice_lines` MODIFY `kind` varchar(16) NOT NULL DEFAULT 'charge'",
  "ALTER TABLE `subscriptions` DROP COLUMN `commitment`",
  "ALTER TABLE `invoices` DROP COLUMN `credits_applied`, DROP COLUMN `amount_due`",
];
const SQLITE_UP = [
  'ALTER TABLE "invoices" ADD COLUMN "credits_applied" text',
  'ALTER TABLE "invoices" ADD COLUMN "amount_due" text',
  'UPDATE "invoices" SET "amount_due" = "total"',
  'ALTER TABLE "subscriptions" ADD COLUMN "commitment" text',
];
const SQLITE_DOWN = ['ALTER TABLE "subscriptions" DROP COLUMN "commitment"', 'ALTER TABLE "invoices" DROP COLUMN "amount_due"', 'ALTER TABLE "invoices" DROP COLUMN "credits_applied"'];

/** invoice_lines.kind at `length` on SQLite (which keeps the declared length in its schema only: TypeORM rebuilds the table). */
async function sqliteKindLength(q: QueryRunner, length: number): Promise<void> {
  if (isMysql(q.connection.driver.options.type)) return;
  await q.changeColumn("invoice_lines", "kind", new TableColumn({ name: "kind", type: "varchar", length: String(length), isNullable: false, default: "'charge'" }));
}

export class CreditApplications1795000000025 implements MigrationInterface {
  name = "CreditApplications1795000000025";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_UP, SQLITE_UP);
    await sqliteKindLength(q, 24);
  }

  async down(q: QueryRunner): Promise<void> {
    await sqliteKindLength(q, 16);
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
