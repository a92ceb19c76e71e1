import type { MigrationInterface, QueryRunner } from "typeorm";
import { runFor } from "./dialect.js";

/**
 * The scheduler ends open checkouts past their expiry (subscriptions/checkout-expiry.ts): its
 * sweep reads them by status and expiry, oldest first, across environments.
 */
const MYSQL_UP = ["CREATE INDEX `ix_checkout_sessions_status_expires` ON `checkout_sessions` (`status`, `expires_at`)"];
const MYSQL_DOWN = ["DROP INDEX `ix_checkout_sessions_status_expires` ON `checkout_sessions`"];
const SQLITE_UP = ['CREATE INDEX "ix_checkout_sessions_status_expires" ON "checkout_sessions" ("status", "expires_at")'];
const SQLITE_DOWN = ['DROP INDEX "ix_checkout_sessions_status_expires"'];

export class CheckoutExpiry1795000000036 implements MigrationInterface {
  name = "CheckoutExpiry1795000000036";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_UP, SQLITE_UP);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
