import type { MigrationInterface, QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";
import { binaryCollation, dropTables, runFor } from "./dialect.js";

/**
 * Outgoing events and webhooks (DESIGN §10, issue 16): the outbox of events (written in the
 * transaction of the change; `seq` is the stream's order), webhook endpoints, one delivery per
 * (endpoint, event) that a delivery worker claims (a row lock, then a lease until
 * next_attempt_at) and retries, the log of every attempt, and the usage thresholds already
 * announced (unique per subscription, period, rate and percentage). SQL generated from the entities per
 * dialect, then reviewed. On MySQL each table's default is the server's binary no-pad collation
 * (migration 8's rule), so every text column compares byte for byte.
 */
const mysql = (collation: string) =>
  [
    "CREATE TABLE `events` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `type` varchar(64) NOT NULL, `data` mediumtext NOT NULL, `created_at` datetime(3) NOT NULL, INDEX `ix_events_env_seq` (`environment_id`, `seq`), UNIQUE INDEX `uq_events_id` (`id`), PRIMARY KEY (`seq`))",
    "CREATE TABLE `webhook_endpoints` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `url` varchar(2000) NOT NULL, `description` varchar(255) NULL, `event_types` mediumtext NOT NULL, `secret` varchar(100) NOT NULL, `status` varchar(12) NOT NULL, `failing_since` datetime(3) NULL, `created_at` datetime(3) NOT NULL, `updated_at` datetime(3) NOT NULL, `deleted_at` datetime(3) NULL, INDEX `ix_webhook_endpoints_env_seq` (`environment_id`, `seq`), UNIQUE INDEX `uq_webhook_endpoints_id` (`id`), PRIMARY KEY (`seq`))",
    "CREATE TABLE `webhook_deliveries` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `endpoint_id` varchar(32) NOT NULL, `event_id` varchar(32) NOT NULL, `event_created_at` datetime(3) NOT NULL, `status` varchar(12) NOT NULL, `attempts` int NOT NULL, `next_attempt_at` datetime(3) NOT NULL, `lease_token` varchar(32) NULL, `last_attempt_at` datetime(3) NULL, `last_status_code` int NULL, `last_error` varchar(500) NULL, `created_at` datetime(3) NOT NULL, `updated_at` datetime(3) NOT NULL, INDEX `ix_webhook_deliveries_due` (`status`, `next_attempt_at`), INDEX `ix_webhook_deliveries_endpoint_seq` (`endpoint_id`, `seq`), UNIQUE INDEX `uq_webhook_deliveries_id` (`id`), UNIQUE INDEX `uq_webhook_deliveries_endpoint_event` (`endpoint_id`, `event_id`), PRIMARY KEY (`seq`))",
    "CREATE TABLE `webhook_attempts` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `delivery_id` varchar(32) NOT NULL, `endpoint_id` varchar(32) NOT NULL, `event_id` varchar(32) NOT NULL, `attempted_at` datetime(3) NOT NULL, `succeeded` tinyint NOT NULL, `status_code` int NULL, `latency_ms` int NOT NULL, `response_excerpt` varchar(1000) NULL, `error` varchar(500) NULL, INDEX `ix_webhook_attempts_endpoint_seq` (`endpoint_id`, `seq`), UNIQUE INDEX `uq_webhook_attempts_id` (`id`), PRIMARY KEY (`seq`))",
    "CREATE TABLE `usage_threshold_marks` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `subscription_id` varchar(32) NOT NULL, `period_key` varchar(64) NOT NULL, `rate_code` varchar(100) NOT NULL, `percent` int NOT NULL, `event_id` varchar(32) NOT NULL, `created_at` datetime(3) NOT NULL, UNIQUE INDEX `uq_usage_threshold_marks` (`subscription_id`, `period_key`, `rate_code`, `percent`), PRIMARY KEY (`seq`))",
  ].map((sql) => `${sql} ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}`);

const SQLITE = [
  'CREATE TABLE "events" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "type" varchar(64) NOT NULL, "data" text NOT NULL, "created_at" datetime(3) NOT NULL, CONSTRAINT "uq_events_id" UNIQUE ("id"))',
  'CREATE INDEX "ix_events_env_seq" ON "events" ("environment_id", "seq")',
  'CREATE TABLE "webhook_endpoints" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "url" varchar(2000) NOT NULL, "description" varchar(255), "event_types" text NOT NULL, "secret" varchar(100) NOT NULL, "status" varchar(12) NOT NULL, "failing_since" datetime(3), "created_at" datetime(3) NOT NULL, "updated_at" datetime(3) NOT NULL, "deleted_at" datetime(3), CONSTRAINT "uq_webhook_endpoints_id" UNIQUE ("id"))',
  'CREATE INDEX "ix_webhook_endpoints_env_seq" ON "webhook_endpoints" ("environment_id", "seq")',
  'CREATE TABLE "webhook_deliveries" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "endpoint_id" varchar(32) NOT NULL, "event_id" varchar(32) NOT NULL, "event_created_at" datetime(3) NOT NULL, "status" varchar(12) NOT NULL, "attempts" integer NOT NULL, "next_attempt_at" datetime(3) NOT NULL, "lease_token" varchar(32), "last_attempt_at" datetime(3), "last_status_code" integer, "last_error" varchar(500), "created_at" datetime(3) NOT NULL, "updated_at" datetime(3) NOT NULL, CONSTRAINT "uq_webhook_deliveries_id" UNIQUE ("id"), CONSTRAINT "uq_webhook_deliveries_endpoint_event" UNIQUE ("endpoint_id", "event_id"))',
  'CREATE INDEX "ix_webhook_deliveries_due" ON "webhook_deliveries" ("status", "next_attempt_at")',
  'CREATE INDEX "ix_webhook_deliveries_endpoint_seq" ON "webhook_deliveries" ("endpoint_id", "seq")',
  'CREATE TABLE "webhook_attempts" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "delivery_id" varchar(32) NOT NULL, "endpoint_id" varchar(32) NOT NULL, "event_id" varchar(32) NOT NULL, "attempted_at" datetime(3) NOT NULL, "succeeded" boolean NOT NULL, "status_code" integer, "latency_ms" integer NOT NULL, "response_excerpt" varchar(1000), "error" varchar(500), CONSTRAINT "uq_webhook_attempts_id" UNIQUE ("id"))',
  'CREATE INDEX "ix_webhook_attempts_endpoint_seq" ON "webhook_attempts" ("endpoint_id", "seq")',
  'CREATE TABLE "usage_threshold_marks" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "subscription_id" varchar(32) NOT NULL, "period_key" varchar(64) NOT NULL, "rate_code" varchar(100) NOT NULL, "percent" integer NOT NULL, "event_id" varchar(32) NOT NULL, "created_at" datetime(3) NOT NULL, CONSTRAINT "uq_usage_threshold_marks" UNIQUE ("subscription_id", "period_key", "rate_code", "percent"))',
];

export class Webhooks1795000000014 implements MigrationInterface {
  name = "Webhooks1795000000014";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, isMysql(q.connection.driver.options.type) ? mysql(await binaryCollation(q)) : [], SQLITE);
  }

  async down(q: QueryRunner): Promise<void> {
    await dropTables(q, ["usage_threshold_marks", "webhook_attempts", "webhook_deliveries", "webhook_endpoints", "events"]);
  }
}
