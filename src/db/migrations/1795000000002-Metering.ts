import type { MigrationInterface, QueryRunner } from "typeorm";
import { dropTables, runFor } from "./dialect.js";

/**
 * Metering: usage events (append-only, unique per environment and idempotency key) and exact
 * hourly totals per metric, subject and dimension combination. SQL generated from the entities
 * per dialect, then reviewed.
 */
const MYSQL = [
  "CREATE TABLE `usage_events` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `idempotency_key` varchar(255) NOT NULL, `fingerprint` varchar(64) NOT NULL, `subject_id` varchar(32) NOT NULL, `event_name` varchar(255) NOT NULL, `occurred_at` datetime(3) NOT NULL, `data` text NOT NULL, `created_at` datetime(3) NOT NULL, INDEX `ix_usage_events_subject_name_time` (`subject_id`, `event_name`, `occurred_at`), UNIQUE INDEX `uq_usage_events_env_key` (`environment_id`, `idempotency_key`), PRIMARY KEY (`seq`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
  "CREATE TABLE `usage_rollups` (`metric_id` varchar(32) NOT NULL, `subject_id` varchar(32) NOT NULL, `bucket_start` datetime(3) NOT NULL, `dims_hash` varchar(64) NOT NULL, `dims` text NOT NULL, `sum_value` decimal(38,12) NOT NULL, `event_count` bigint NOT NULL, `max_value` decimal(38,12) NULL, `last_value` decimal(38,12) NULL, `last_at` datetime(3) NULL, `last_key` varchar(255) NULL, PRIMARY KEY (`metric_id`, `subject_id`, `bucket_start`, `dims_hash`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
];

const SQLITE = [
  'CREATE TABLE "usage_events" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "idempotency_key" varchar(255) NOT NULL, "fingerprint" varchar(64) NOT NULL, "subject_id" varchar(32) NOT NULL, "event_name" varchar(255) NOT NULL, "occurred_at" datetime(3) NOT NULL, "data" text NOT NULL, "created_at" datetime(3) NOT NULL, CONSTRAINT "uq_usage_events_env_key" UNIQUE ("environment_id", "idempotency_key"))',
  'CREATE INDEX "ix_usage_events_subject_name_time" ON "usage_events" ("subject_id", "event_name", "occurred_at")',
  'CREATE TABLE "usage_rollups" ("metric_id" varchar(32) NOT NULL, "subject_id" varchar(32) NOT NULL, "bucket_start" datetime(3) NOT NULL, "dims_hash" varchar(64) NOT NULL, "dims" text NOT NULL, "sum_value" text NOT NULL, "event_count" bigint NOT NULL, "max_value" text, "last_value" text, "last_at" datetime(3), "last_key" varchar(255), PRIMARY KEY ("metric_id", "subject_id", "bucket_start", "dims_hash"))',
];

const TABLES = ["usage_rollups", "usage_events"];

export class Metering1795000000002 implements MigrationInterface {
  name = "Metering1795000000002";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL, SQLITE);
  }

  async down(q: QueryRunner): Promise<void> {
    await dropTables(q, TABLES);
  }
}
