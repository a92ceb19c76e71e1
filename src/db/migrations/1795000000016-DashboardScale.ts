import type { MigrationInterface, QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";
import { binaryCollation, runFor } from "./dialect.js";

/**
 * The operator dashboard, continued (issue 19): rejected usage events with their reasons (one row
 * per rejected event, written by the ingest request that was refused, the fields as sent cut to
 * the columns' lengths; an environment keeps its newest 10,000, older ones are pruned), read
 * newest first per environment (ix_rejected_usage_events_env_seq); and the webhook endpoints
 * needing attention (their deliveries being retried, and those that failed lately: ix_webhook_deliveries_endpoint_status).
 * And the subjects list at any offset (bench:dashboard found a page at offset 50,000 reading
 * 50,000 whole rows): its page's seqs are read from ix_subjects_env_live_seq (environment,
 * deleted_at, seq) alone, then only that page's rows.
 * On MySQL the new table's default is the server's binary no-pad collation (migration 8's rule).
 */
const mysql = (collation: string) => [
  "CREATE TABLE `rejected_usage_events` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `environment_id` varchar(32) NOT NULL, `received_at` datetime(3) NOT NULL, `idempotency_key` varchar(255) NOT NULL, `subject_id` varchar(255) NOT NULL, `event_name` varchar(255) NOT NULL, `event_time` varchar(64) NULL DEFAULT NULL, `reason` varchar(64) NOT NULL, `message` varchar(1000) NOT NULL, `field` varchar(255) NULL DEFAULT NULL, INDEX `ix_rejected_usage_events_env_seq` (`environment_id`, `seq`), PRIMARY KEY (`seq`)) " +
    `ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}`,
  "CREATE INDEX `ix_webhook_deliveries_endpoint_status` ON `webhook_deliveries` (`endpoint_id`, `status`, `updated_at`)",
  "CREATE INDEX `ix_subjects_env_live_seq` ON `subjects` (`environment_id`, `deleted_at`, `seq`)",
];
const MYSQL_DOWN = ["DROP INDEX `ix_subjects_env_live_seq` ON `subjects`", "DROP INDEX `ix_webhook_deliveries_endpoint_status` ON `webhook_deliveries`", "DROP TABLE `rejected_usage_events`"];

const SQLITE = [
  'CREATE TABLE "rejected_usage_events" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "environment_id" varchar(32) NOT NULL, "received_at" datetime(3) NOT NULL, "idempotency_key" varchar(255) NOT NULL, "subject_id" varchar(255) NOT NULL, "event_name" varchar(255) NOT NULL, "event_time" varchar(64), "reason" varchar(64) NOT NULL, "message" varchar(1000) NOT NULL, "field" varchar(255))',
  'CREATE INDEX "ix_rejected_usage_events_env_seq" ON "rejected_usage_events" ("environment_id", "seq")',
  'CREATE INDEX "ix_webhook_deliveries_endpoint_status" ON "webhook_deliveries" ("endpoint_id", "status", "updated_at")',
  'CREATE INDEX "ix_subjects_env_live_seq" ON "subjects" ("environment_id", "deleted_at", "seq")',
];
const SQLITE_DOWN = [
  'DROP INDEX "ix_subjects_env_live_seq"',
  'DROP INDEX "ix_webhook_deliveries_endpoint_status"',
  'DROP INDEX "ix_rejected_usage_events_env_seq"',
  'DROP TABLE "rejected_usage_events"',
];

export class DashboardScale1795000000016 implements MigrationInterface {
  name = "DashboardScale1795000000016";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, isMysql(q.connection.driver.options.type) ? mysql(await binaryCollation(q)) : [], SQLITE);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
