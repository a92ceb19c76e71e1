import type { MigrationInterface, QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";
import { binaryCollation, runFor } from "./dialect.js";

/**
 * The operator dashboard (issue 19): its sessions (the SHA-256 of the cookie's token, never the
 * token; the key it was opened with, so a revoked key ends them; the CSRF token of its forms; the
 * expiry), and the indexes of the dashboard's lists across subjects: invoices by status and
 * subscriptions by status, newest first, paginated, an environment's test clocks, the
 * overview's revenue (finalized invoices by finalization time) and its set-aside subscriptions,
 * an environment's newest usage events, and its events accepted per hour of arrival
 * (environment_ingest_hours: one row per environment and hour, added to in each ingest transaction). On MySQL the new table's default is the
 * server's binary no-pad collation (migration 8's rule), as in migration 11.
 */
const mysql = (collation: string) => [
  "CREATE TABLE `dashboard_sessions` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `key_id` varchar(32) NOT NULL, `token_hash` varchar(64) NOT NULL, `csrf_token` varchar(64) NOT NULL, `expires_at` datetime(3) NOT NULL, `created_at` datetime(3) NOT NULL, INDEX `ix_dashboard_sessions_expires` (`expires_at`), UNIQUE INDEX `uq_dashboard_sessions_id` (`id`), UNIQUE INDEX `uq_dashboard_sessions_token_hash` (`token_hash`), PRIMARY KEY (`seq`)) " +
    `ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}`,
  "CREATE INDEX `ix_invoices_env_status_seq` ON `invoices` (`environment_id`, `status`, `seq`)",
  "CREATE INDEX `ix_subscriptions_env_status_seq` ON `subscriptions` (`environment_id`, `status`, `seq`)",
  "CREATE INDEX `ix_test_clocks_env_seq` ON `test_clocks` (`environment_id`, `seq`)",
  "CREATE INDEX `ix_invoices_env_finalized` ON `invoices` (`environment_id`, `finalized_at`)",
  "CREATE INDEX `ix_subscriptions_env_retry` ON `subscriptions` (`environment_id`, `billing_retry_at`)",
  "CREATE INDEX `ix_usage_events_env_seq` ON `usage_events` (`environment_id`, `seq`)",
  "CREATE TABLE `environment_ingest_hours` (`environment_id` varchar(32) NOT NULL, `hour` datetime(3) NOT NULL, `accepted` bigint NOT NULL, PRIMARY KEY (`environment_id`, `hour`)) " +
    `ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}`,
];
const MYSQL_DOWN = [
  "DROP TABLE `environment_ingest_hours`",
  "DROP INDEX `ix_usage_events_env_seq` ON `usage_events`",
  "DROP INDEX `ix_subscriptions_env_retry` ON `subscriptions`",
  "DROP INDEX `ix_invoices_env_finalized` ON `invoices`",
  "DROP INDEX `ix_test_clocks_env_seq` ON `test_clocks`",
  "DROP INDEX `ix_subscriptions_env_status_seq` ON `subscriptions`",
  "DROP INDEX `ix_invoices_env_status_seq` ON `invoices`",
  "DROP TABLE `dashboard_sessions`",
];

const SQLITE = [
  'CREATE TABLE "dashboard_sessions" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "key_id" varchar(32) NOT NULL, "token_hash" varchar(64) NOT NULL, "csrf_token" varchar(64) NOT NULL, "expires_at" datetime(3) NOT NULL, "created_at" datetime(3) NOT NULL, CONSTRAINT "uq_dashboard_sessions_id" UNIQUE ("id"), CONSTRAINT "uq_dashboard_sessions_token_hash" UNIQUE ("token_hash"))',
  'CREATE INDEX "ix_dashboard_sessions_expires" ON "dashboard_sessions" ("expires_at")',
  'CREATE INDEX "ix_invoices_env_status_seq" ON "invoices" ("environment_id", "status", "seq")',
  'CREATE INDEX "ix_subscriptions_env_status_seq" ON "subscriptions" ("environment_id", "status", "seq")',
  'CREATE INDEX "ix_test_clocks_env_seq" ON "test_clocks" ("environment_id", "seq")',
  'CREATE INDEX "ix_invoices_env_finalized" ON "invoices" ("environment_id", "finalized_at")',
  'CREATE INDEX "ix_subscriptions_env_retry" ON "subscriptions" ("environment_id", "billing_retry_at")',
  'CREATE INDEX "ix_usage_events_env_seq" ON "usage_events" ("environment_id", "seq")',
  'CREATE TABLE "environment_ingest_hours" ("environment_id" varchar(32) NOT NULL, "hour" datetime(3) NOT NULL, "accepted" bigint NOT NULL, PRIMARY KEY ("environment_id", "hour"))',
];
const SQLITE_DOWN = [
  'DROP TABLE "environment_ingest_hours"',
  'DROP INDEX "ix_usage_events_env_seq"',
  'DROP INDEX "ix_subscriptions_env_retry"',
  'DROP INDEX "ix_invoices_env_finalized"',
  'DROP INDEX "ix_test_clocks_env_seq"',
  'DROP INDEX "ix_subscriptions_env_status_seq"',
  'DROP INDEX "ix_invoices_env_status_seq"',
  'DROP INDEX "ix_dashboard_sessions_expires"',
  'DROP TABLE "dashboard_sessions"',
];

export class DashboardSessions1795000000015 implements MigrationInterface {
  name = "DashboardSessions1795000000015";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, isMysql(q.connection.driver.options.type) ? mysql(await binaryCollation(q)) : [], SQLITE);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
