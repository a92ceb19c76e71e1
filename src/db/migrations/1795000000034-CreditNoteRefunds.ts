import type { MigrationInterface, QueryRunner } from "typeorm";
import { runFor } from "./dialect.js";

/**
 * DESIGN §15, §16: a refund note keeps where its provider's refund stands
 * (credit_notes.refund_status: 'pending', 'succeeded' or 'failed'; NULL for other outcomes) and
 * why it failed (refund_failure_reason), moved by the provider's refund webhooks, which find the
 * note by its refund ID within its environment (ix_credit_notes_env_refund). Existing refund
 * notes are backfilled 'succeeded': the code before recorded a refund only once the provider had
 * made it, and had no way to learn that one failed later.
 */
const BACKFILL = "UPDATE credit_notes SET refund_status = 'succeeded' WHERE outcome = 'refund'";
const MYSQL_UP = [
  "ALTER TABLE `credit_notes` ADD `refund_status` varchar(16) NULL DEFAULT NULL, ADD `refund_failure_reason` varchar(255) NULL DEFAULT NULL",
  "CREATE INDEX `ix_credit_notes_env_refund` ON `credit_notes` (`environment_id`, `refund_id`)",
  BACKFILL,
];
const MYSQL_DOWN = ["DROP INDEX `ix_credit_notes_env_refund` ON `credit_notes`", "ALTER TABLE `credit_notes` DROP COLUMN `refund_failure_reason`, DROP COLUMN `refund_status`"];
const SQLITE_UP = [
  'ALTER TABLE "credit_notes" ADD COLUMN "refund_status" varchar(16)',
  'ALTER TABLE "credit_notes" ADD COLUMN "refund_failure_reason" varchar(255)',
  'CREATE INDEX "ix_credit_notes_env_refund" ON "credit_notes" ("environment_id", "refund_id")',
  BACKFILL,
];
const SQLITE_DOWN = ['DROP INDEX "ix_credit_notes_env_refund"', 'ALTER TABLE "credit_notes" DROP COLUMN "refund_failure_reason"', 'ALTER TABLE "credit_notes" DROP COLUMN "refund_status"'];

export class CreditNoteRefunds1795000000034 implements MigrationInterface {
  name = "CreditNoteRefunds1795000000034";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_UP, SQLITE_UP);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
