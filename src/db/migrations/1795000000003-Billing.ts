import type { MigrationInterface, QueryRunner } from "typeorm";
import { dropTables, quoted, runFor } from "./dialect.js";

/**
 * Billing: subscriptions, invoices and their lines (unique per subscription and period),
 * payment methods, hosted checkouts, test clocks; subjects gain a test clock and a payment
 * method. SQL generated from the entities per dialect, then reviewed.
 */
const MYSQL = [
  "CREATE TABLE `subscriptions` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `subject_id` varchar(32) NOT NULL, `rate_card_id` varchar(32) NOT NULL, `status` varchar(12) NOT NULL, `cancels_at_end_of_cycle` tinyint NOT NULL, `anchor` datetime(3) NOT NULL, `cycle_index` int NOT NULL, `period_start` datetime(3) NOT NULL, `period_end` datetime(3) NOT NULL, `usage_since` datetime(3) NOT NULL, `fixed_rate_quantities` text NOT NULL, `rate_multipliers` text NOT NULL, `metadata` text NOT NULL, `test_clock_id` varchar(32) NULL, `timeline_id` varchar(32) NULL, `cancelled_at` datetime(3) NULL, `cancel_reason` varchar(500) NULL, `created_at` datetime(3) NOT NULL, `updated_at` datetime(3) NOT NULL, INDEX `ix_subscriptions_env_seq` (`environment_id`, `seq`), INDEX `ix_subscriptions_subject` (`subject_id`, `status`), INDEX `ix_subscriptions_due` (`status`, `test_clock_id`, `period_end`), UNIQUE INDEX `uq_subscriptions_id` (`id`), PRIMARY KEY (`seq`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
  "CREATE TABLE `invoices` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `subject_id` varchar(32) NOT NULL, `subscription_id` varchar(32) NOT NULL, `period_key` varchar(40) NOT NULL, `status` varchar(16) NOT NULL, `currency` varchar(3) NOT NULL, `total` decimal(38,12) NOT NULL, `hosted_token` varchar(64) NOT NULL, `period_start` datetime(3) NOT NULL, `period_end` datetime(3) NOT NULL, `created_at` datetime(3) NOT NULL, `updated_at` datetime(3) NOT NULL, INDEX `ix_invoices_subject_seq` (`subject_id`, `seq`), UNIQUE INDEX `uq_invoices_id` (`id`), UNIQUE INDEX `uq_invoices_subscription_period` (`subscription_id`, `period_key`), UNIQUE INDEX `uq_invoices_hosted_token` (`hosted_token`), PRIMARY KEY (`seq`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
  "CREATE TABLE `invoice_lines` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `invoice_id` varchar(32) NOT NULL, `position` int NOT NULL, `description` varchar(1000) NOT NULL, `quantity` decimal(38,12) NOT NULL, `unit_amount` decimal(38,12) NOT NULL, `amount` decimal(38,12) NOT NULL, INDEX `ix_invoice_lines_invoice` (`invoice_id`, `position`), PRIMARY KEY (`seq`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
  "CREATE TABLE `payment_methods` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `subject_id` varchar(32) NOT NULL, `brand` varchar(20) NOT NULL, `last4` varchar(4) NOT NULL, `behavior` varchar(20) NOT NULL, `created_at` datetime(3) NOT NULL, UNIQUE INDEX `uq_payment_methods_id` (`id`), PRIMARY KEY (`seq`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
  "CREATE TABLE `checkout_sessions` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `token` varchar(64) NOT NULL, `subject_id` varchar(32) NOT NULL, `kind` varchar(12) NOT NULL, `payload` text NOT NULL, `success_url` varchar(2000) NOT NULL, `cancelled_url` varchar(2000) NOT NULL, `status` varchar(12) NOT NULL, `amount_due` decimal(38,12) NOT NULL, `currency` varchar(3) NOT NULL, `description` varchar(500) NOT NULL, `expires_at` datetime(3) NOT NULL, `created_at` datetime(3) NOT NULL, UNIQUE INDEX `uq_checkout_sessions_id` (`id`), UNIQUE INDEX `uq_checkout_sessions_token` (`token`), PRIMARY KEY (`seq`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
  "CREATE TABLE `test_clocks` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `name` varchar(255) NOT NULL, `frozen_time` datetime(3) NOT NULL, `created_at` datetime(3) NOT NULL, UNIQUE INDEX `uq_test_clocks_id` (`id`), PRIMARY KEY (`seq`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
  "ALTER TABLE `subjects` ADD `test_clock_id` varchar(32) NULL",
  "ALTER TABLE `subjects` ADD `payment_method_id` varchar(32) NULL",
];

const SQLITE = [
  'CREATE TABLE "subscriptions" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "subject_id" varchar(32) NOT NULL, "rate_card_id" varchar(32) NOT NULL, "status" varchar(12) NOT NULL, "cancels_at_end_of_cycle" boolean NOT NULL, "anchor" datetime(3) NOT NULL, "cycle_index" integer NOT NULL, "period_start" datetime(3) NOT NULL, "period_end" datetime(3) NOT NULL, "usage_since" datetime(3) NOT NULL, "fixed_rate_quantities" text NOT NULL, "rate_multipliers" text NOT NULL, "metadata" text NOT NULL, "test_clock_id" varchar(32), "timeline_id" varchar(32), "cancelled_at" datetime(3), "cancel_reason" varchar(500), "created_at" datetime(3) NOT NULL, "updated_at" datetime(3) NOT NULL, CONSTRAINT "uq_subscriptions_id" UNIQUE ("id"))',
  'CREATE INDEX "ix_subscriptions_env_seq" ON "subscriptions" ("environment_id", "seq")',
  'CREATE INDEX "ix_subscriptions_subject" ON "subscriptions" ("subject_id", "status")',
  'CREATE INDEX "ix_subscriptions_due" ON "subscriptions" ("status", "test_clock_id", "period_end")',
  'CREATE TABLE "invoices" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "subject_id" varchar(32) NOT NULL, "subscription_id" varchar(32) NOT NULL, "period_key" varchar(40) NOT NULL, "status" varchar(16) NOT NULL, "currency" varchar(3) NOT NULL, "total" text NOT NULL, "hosted_token" varchar(64) NOT NULL, "period_start" datetime(3) NOT NULL, "period_end" datetime(3) NOT NULL, "created_at" datetime(3) NOT NULL, "updated_at" datetime(3) NOT NULL, CONSTRAINT "uq_invoices_id" UNIQUE ("id"), CONSTRAINT "uq_invoices_subscription_period" UNIQUE ("subscription_id", "period_key"), CONSTRAINT "uq_invoices_hosted_token" UNIQUE ("hosted_token"))',
  'CREATE INDEX "ix_invoices_subject_seq" ON "invoices" ("subject_id", "seq")',
  'CREATE TABLE "invoice_lines" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "invoice_id" varchar(32) NOT NULL, "position" integer NOT NULL, "description" varchar(1000) NOT NULL, "quantity" text NOT NULL, "unit_amount" text NOT NULL, "amount" text NOT NULL)',
  'CREATE INDEX "ix_invoice_lines_invoice" ON "invoice_lines" ("invoice_id", "position")',
  'CREATE TABLE "payment_methods" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "subject_id" varchar(32) NOT NULL, "brand" varchar(20) NOT NULL, "last4" varchar(4) NOT NULL, "behavior" varchar(20) NOT NULL, "created_at" datetime(3) NOT NULL, CONSTRAINT "uq_payment_methods_id" UNIQUE ("id"))',
  'CREATE TABLE "checkout_sessions" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "token" varchar(64) NOT NULL, "subject_id" varchar(32) NOT NULL, "kind" varchar(12) NOT NULL, "payload" text NOT NULL, "success_url" varchar(2000) NOT NULL, "cancelled_url" varchar(2000) NOT NULL, "status" varchar(12) NOT NULL, "amount_due" text NOT NULL, "currency" varchar(3) NOT NULL, "description" varchar(500) NOT NULL, "expires_at" datetime(3) NOT NULL, "created_at" datetime(3) NOT NULL, CONSTRAINT "uq_checkout_sessions_id" UNIQUE ("id"), CONSTRAINT "uq_checkout_sessions_token" UNIQUE ("token"))',
  'CREATE TABLE "test_clocks" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "name" varchar(255) NOT NULL, "frozen_time" datetime(3) NOT NULL, "created_at" datetime(3) NOT NULL, CONSTRAINT "uq_test_clocks_id" UNIQUE ("id"))',
  'DROP INDEX "ix_subjects_env_seq"',
  'CREATE TABLE "temporary_subjects" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "external_id" varchar(255), "external_id_key" varchar(255), "email" varchar(254), "name" varchar(255), "metadata" text NOT NULL, "created_at" datetime(3) NOT NULL, "updated_at" datetime(3) NOT NULL, "deleted_at" datetime(3), "test_clock_id" varchar(32), "payment_method_id" varchar(32), CONSTRAINT "uq_subjects_env_external_id" UNIQUE ("environment_id", "external_id_key"), CONSTRAINT "uq_subjects_id" UNIQUE ("id"))',
  'INSERT INTO "temporary_subjects"("seq", "id", "environment_id", "external_id", "external_id_key", "email", "name", "metadata", "created_at", "updated_at", "deleted_at") SELECT "seq", "id", "environment_id", "external_id", "external_id_key", "email", "name", "metadata", "created_at", "updated_at", "deleted_at" FROM "subjects"',
  'DROP TABLE "subjects"',
  'ALTER TABLE "temporary_subjects" RENAME TO "subjects"',
  'CREATE INDEX "ix_subjects_env_seq" ON "subjects" ("environment_id", "seq")',
];

const TABLES = ["test_clocks", "checkout_sessions", "payment_methods", "invoice_lines", "invoices", "subscriptions"];

export class Billing1795000000003 implements MigrationInterface {
  name = "Billing1795000000003";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL, SQLITE);
  }

  async down(q: QueryRunner): Promise<void> {
    await dropTables(q, TABLES);
    for (const column of ["payment_method_id", "test_clock_id"]) {
      await q.query(`ALTER TABLE ${quoted(q, "subjects")} DROP COLUMN ${quoted(q, column)}`);
    }
  }
}
