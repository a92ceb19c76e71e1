import type { MigrationInterface, QueryRunner } from "typeorm";
import { runFor } from "./dialect.js";

/**
 * Test clocks' advance status (Stripe's `ready` | `advancing`): an advance moves `frozen_time` and
 * sets `advancing` with `advance_started_at` in one UPDATE, and sets `ready` once everything due by
 * the new time has run. An advance cut short (the server died) stays `advancing`; the scheduler
 * finds it by ix_test_clocks_status_started once its lease ran out and finishes it. Existing
 * clocks are `ready`.
 */
const MYSQL_UP = [
  "ALTER TABLE `test_clocks` ADD `status` varchar(16) NOT NULL DEFAULT 'ready', ADD `advance_started_at` datetime(3) NULL",
  "CREATE INDEX `ix_test_clocks_status_started` ON `test_clocks` (`status`, `advance_started_at`)",
];
const MYSQL_DOWN = ["DROP INDEX `ix_test_clocks_status_started` ON `test_clocks`", "ALTER TABLE `test_clocks` DROP COLUMN `status`, DROP COLUMN `advance_started_at`"];
const SQLITE_UP = [
  `ALTER TABLE "test_clocks" ADD COLUMN "status" varchar(16) NOT NULL DEFAULT ('ready')`,
  'ALTER TABLE "test_clocks" ADD COLUMN "advance_started_at" datetime(3)',
  'CREATE INDEX "ix_test_clocks_status_started" ON "test_clocks" ("status", "advance_started_at")',
];
const SQLITE_DOWN = ['DROP INDEX "ix_test_clocks_status_started"', 'ALTER TABLE "test_clocks" DROP COLUMN "advance_started_at"', 'ALTER TABLE "test_clocks" DROP COLUMN "status"'];

export class TestClockStatus1795000000031 implements MigrationInterface {
  name = "TestClockStatus1795000000031";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_UP, SQLITE_UP);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
