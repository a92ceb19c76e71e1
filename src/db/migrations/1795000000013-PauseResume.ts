import type { MigrationInterface, QueryRunner } from "typeorm";
import { runFor } from "./dialect.js";

/**
 * Pausing and resuming subscriptions (DESIGN §8, issue 20): when a subscription was paused and
 * when it resumes by itself (the scheduler's due list reads paused rows by resumes_at), and the
 * cycle epoch — a resume starts cycles afresh from the resume instant, and the epoch keeps their
 * invoices' (subscription, period) keys apart from the cycles before the pause.
 */
const MYSQL_UP = [
  "ALTER TABLE `subscriptions` ADD `paused_at` datetime(3) NULL DEFAULT NULL, ADD `resumes_at` datetime(3) NULL DEFAULT NULL, ADD `cycle_epoch` int NOT NULL DEFAULT 0",
  "CREATE INDEX `ix_subscriptions_resumes` ON `subscriptions` (`status`, `test_clock_id`, `resumes_at`)",
];
const MYSQL_DOWN = ["DROP INDEX `ix_subscriptions_resumes` ON `subscriptions`", "ALTER TABLE `subscriptions` DROP COLUMN `paused_at`, DROP COLUMN `resumes_at`, DROP COLUMN `cycle_epoch`"];
const SQLITE_UP = [
  'ALTER TABLE "subscriptions" ADD COLUMN "paused_at" datetime(3)',
  'ALTER TABLE "subscriptions" ADD COLUMN "resumes_at" datetime(3)',
  'ALTER TABLE "subscriptions" ADD COLUMN "cycle_epoch" integer NOT NULL DEFAULT (0)',
  'CREATE INDEX "ix_subscriptions_resumes" ON "subscriptions" ("status", "test_clock_id", "resumes_at")',
];
const SQLITE_DOWN = [
  'DROP INDEX "ix_subscriptions_resumes"',
  'ALTER TABLE "subscriptions" DROP COLUMN "cycle_epoch"',
  'ALTER TABLE "subscriptions" DROP COLUMN "resumes_at"',
  'ALTER TABLE "subscriptions" DROP COLUMN "paused_at"',
];

export class PauseResume1795000000013 implements MigrationInterface {
  name = "PauseResume1795000000013";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_UP, SQLITE_UP);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
