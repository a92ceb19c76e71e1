import type { MigrationInterface, QueryRunner } from "typeorm";
import { runFor } from "./dialect.js";

/**
 * The finance exports (DESIGN §15, src/cli): credit notes are read by their date
 * (ix_credit_notes_env_created, environment_id, created_at) and keep when they were voided with
 * their invoice (credit_notes.voided_at, ix_credit_notes_env_voided), and an invoice keeps when it was
 * voided or marked uncollectible (invoices.voided_at, marked_uncollectible_at, each with its
 * index by environment), so a void or a write-off is exported in the range it happened in, not
 * only as the status of an invoice exported earlier. Invoices already void or uncollectible take
 * their updated_at, which the move to that status set and nothing changes after it.
 */
const MYSQL_UP = [
  "CREATE INDEX `ix_credit_notes_env_created` ON `credit_notes` (`environment_id`, `created_at`)",
  "ALTER TABLE `credit_notes` ADD `voided_at` datetime(3) NULL DEFAULT NULL",
  "CREATE INDEX `ix_credit_notes_env_voided` ON `credit_notes` (`environment_id`, `voided_at`)",
  "ALTER TABLE `invoices` ADD `voided_at` datetime(3) NULL DEFAULT NULL, ADD `marked_uncollectible_at` datetime(3) NULL DEFAULT NULL",
  "UPDATE `invoices` SET `voided_at` = `updated_at` WHERE `status` = 'void'",
  "UPDATE `invoices` SET `marked_uncollectible_at` = `updated_at` WHERE `status` = 'uncollectible'",
  "CREATE INDEX `ix_invoices_env_voided` ON `invoices` (`environment_id`, `voided_at`)",
  "CREATE INDEX `ix_invoices_env_uncollectible` ON `invoices` (`environment_id`, `marked_uncollectible_at`)",
];
const MYSQL_DOWN = [
  "DROP INDEX `ix_invoices_env_uncollectible` ON `invoices`",
  "DROP INDEX `ix_invoices_env_voided` ON `invoices`",
  "ALTER TABLE `invoices` DROP COLUMN `marked_uncollectible_at`, DROP COLUMN `voided_at`",
  "DROP INDEX `ix_credit_notes_env_voided` ON `credit_notes`",
  "ALTER TABLE `credit_notes` DROP COLUMN `voided_at`",
  "DROP INDEX `ix_credit_notes_env_created` ON `credit_notes`",
];
const SQLITE_UP = [
  'CREATE INDEX "ix_credit_notes_env_created" ON "credit_notes" ("environment_id", "created_at")',
  'ALTER TABLE "credit_notes" ADD COLUMN "voided_at" datetime(3)',
  'CREATE INDEX "ix_credit_notes_env_voided" ON "credit_notes" ("environment_id", "voided_at")',
  'ALTER TABLE "invoices" ADD COLUMN "voided_at" datetime(3)',
  'ALTER TABLE "invoices" ADD COLUMN "marked_uncollectible_at" datetime(3)',
  `UPDATE "invoices" SET "voided_at" = "updated_at" WHERE "status" = 'void'`,
  `UPDATE "invoices" SET "marked_uncollectible_at" = "updated_at" WHERE "status" = 'uncollectible'`,
  'CREATE INDEX "ix_invoices_env_voided" ON "invoices" ("environment_id", "voided_at")',
  'CREATE INDEX "ix_invoices_env_uncollectible" ON "invoices" ("environment_id", "marked_uncollectible_at")',
];
const SQLITE_DOWN = [
  'DROP INDEX "ix_invoices_env_uncollectible"',
  'DROP INDEX "ix_invoices_env_voided"',
  'ALTER TABLE "invoices" DROP COLUMN "marked_uncollectible_at"',
  'ALTER TABLE "invoices" DROP COLUMN "voided_at"',
  'DROP INDEX "ix_credit_notes_env_voided"',
  'ALTER TABLE "credit_notes" DROP COLUMN "voided_at"',
  'DROP INDEX "ix_credit_notes_env_created"',
];

export class FinanceExports1795000000037 implements MigrationInterface {
  name = "FinanceExports1795000000037";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_UP, SQLITE_UP);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
