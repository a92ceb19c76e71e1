import type { MigrationInterface, QueryRunner } from "typeorm";
import { dropTables, runFor } from "./dialect.js";

/** Subscription timelines and their items. SQL generated from the entities per dialect, then reviewed. */
const MYSQL = [
  "CREATE TABLE `subscription_timelines` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `subject_id` varchar(32) NOT NULL, `rate_card_id` varchar(32) NOT NULL, `subscription_id` varchar(32) NULL, `status` varchar(12) NOT NULL, `effective_at` datetime(3) NULL, `next_transition_at` datetime(3) NULL, `test_clock_id` varchar(32) NULL, `created_at` datetime(3) NOT NULL, `updated_at` datetime(3) NOT NULL, INDEX `ix_subscription_timelines_env_seq` (`environment_id`, `seq`), INDEX `ix_subscription_timelines_due` (`status`, `test_clock_id`, `next_transition_at`), UNIQUE INDEX `uq_subscription_timelines_id` (`id`), PRIMARY KEY (`seq`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
  "CREATE TABLE `timeline_items` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `timeline_id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `period_start` datetime(3) NOT NULL, `period_end` datetime(3) NULL, `rate_card_id` varchar(32) NOT NULL, `fixed_rate_quantities` text NOT NULL, `rate_multipliers` text NOT NULL, `created_at` datetime(3) NOT NULL, INDEX `ix_timeline_items_timeline_start` (`timeline_id`, `period_start`), UNIQUE INDEX `uq_timeline_items_id` (`id`), PRIMARY KEY (`seq`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
];

const SQLITE = [
  'CREATE TABLE "subscription_timelines" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "subject_id" varchar(32) NOT NULL, "rate_card_id" varchar(32) NOT NULL, "subscription_id" varchar(32), "status" varchar(12) NOT NULL, "effective_at" datetime(3), "next_transition_at" datetime(3), "test_clock_id" varchar(32), "created_at" datetime(3) NOT NULL, "updated_at" datetime(3) NOT NULL, CONSTRAINT "uq_subscription_timelines_id" UNIQUE ("id"))',
  'CREATE INDEX "ix_subscription_timelines_env_seq" ON "subscription_timelines" ("environment_id", "seq")',
  'CREATE INDEX "ix_subscription_timelines_due" ON "subscription_timelines" ("status", "test_clock_id", "next_transition_at")',
  'CREATE TABLE "timeline_items" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "timeline_id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "period_start" datetime(3) NOT NULL, "period_end" datetime(3), "rate_card_id" varchar(32) NOT NULL, "fixed_rate_quantities" text NOT NULL, "rate_multipliers" text NOT NULL, "created_at" datetime(3) NOT NULL, CONSTRAINT "uq_timeline_items_id" UNIQUE ("id"))',
  'CREATE INDEX "ix_timeline_items_timeline_start" ON "timeline_items" ("timeline_id", "period_start")',
];

const TABLES = ["timeline_items", "subscription_timelines"];

export class Timelines1795000000004 implements MigrationInterface {
  name = "Timelines1795000000004";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL, SQLITE);
  }

  async down(q: QueryRunner): Promise<void> {
    await dropTables(q, TABLES);
  }
}
