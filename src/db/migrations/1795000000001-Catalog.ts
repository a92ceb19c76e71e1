import type { MigrationInterface, QueryRunner } from "typeorm";
import { dropTables, runFor } from "./dialect.js";

/**
 * The catalog: pricing metrics, rate cards, rate catalogs, their rates and matrix cells.
 * SQL generated from the entities per dialect, then reviewed.
 */
const MYSQL = [
  "CREATE TABLE `pricing_metrics` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `event_name` varchar(255) NOT NULL, `name` varchar(255) NOT NULL, `unit` varchar(255) NOT NULL, `dimensions` text NOT NULL, `aggregation_type` varchar(8) NOT NULL, `value_field` varchar(100) NULL, `created_at` datetime(3) NOT NULL, INDEX `ix_pricing_metrics_env_seq` (`environment_id`, `seq`), INDEX `ix_pricing_metrics_env_event` (`environment_id`, `event_name`), UNIQUE INDEX `uq_pricing_metrics_id` (`id`), PRIMARY KEY (`seq`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
  "CREATE TABLE `rate_cards` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `name` varchar(255) NOT NULL, `description` varchar(2000) NULL, `billing_interval` varchar(8) NOT NULL, `currency` varchar(3) NULL, `metadata` text NOT NULL, `rate_catalog_id` varchar(32) NULL, `created_at` datetime(3) NOT NULL, `updated_at` datetime(3) NOT NULL, INDEX `ix_rate_cards_env_seq` (`environment_id`, `seq`), UNIQUE INDEX `uq_rate_cards_id` (`id`), PRIMARY KEY (`seq`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
  "CREATE TABLE `rate_catalogs` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `name` varchar(255) NOT NULL, `description` varchar(2000) NOT NULL, `rate_count` int NOT NULL, `currency` varchar(3) NULL, `created_at` datetime(3) NOT NULL, INDEX `ix_rate_catalogs_env_seq` (`environment_id`, `seq`), UNIQUE INDEX `uq_rate_catalogs_id` (`id`), PRIMARY KEY (`seq`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
  "CREATE TABLE `rates` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `owner_kind` varchar(8) NOT NULL, `owner_id` varchar(32) NOT NULL, `billing_interval` varchar(8) NOT NULL, `kind` varchar(12) NOT NULL, `code` varchar(100) NOT NULL, `name` varchar(255) NOT NULL, `description` varchar(2000) NULL, `pricing_metric_id` varchar(32) NULL, `usage_type` varchar(12) NULL, `included_units` decimal(38,12) NULL, `dimensions` text NULL, `created_at` datetime(3) NOT NULL, `price_type` varchar(8) NULL, `price_currency` varchar(3) NULL, `price_value` decimal(38,12) NULL, `package_units` decimal(38,12) NULL, `rounding_behavior` varchar(10) NULL, INDEX `ix_rates_owner_seq` (`owner_id`, `seq`), UNIQUE INDEX `uq_rates_id` (`id`), UNIQUE INDEX `uq_rates_owner_interval_code` (`owner_id`, `billing_interval`, `code`), PRIMARY KEY (`seq`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
  "CREATE TABLE `rate_cells` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `rate_id` varchar(32) NOT NULL, `owner_id` varchar(32) NOT NULL, `coordinates` text NOT NULL, `coordinates_hash` varchar(64) NOT NULL, `price_type` varchar(8) NULL, `price_currency` varchar(3) NULL, `price_value` decimal(38,12) NULL, `package_units` decimal(38,12) NULL, `rounding_behavior` varchar(10) NULL, INDEX `ix_rate_cells_owner_seq` (`owner_id`, `seq`), UNIQUE INDEX `uq_rate_cells_rate_coordinates` (`rate_id`, `coordinates_hash`), PRIMARY KEY (`seq`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
];

const SQLITE = [
  'CREATE TABLE "pricing_metrics" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "event_name" varchar(255) NOT NULL, "name" varchar(255) NOT NULL, "unit" varchar(255) NOT NULL, "dimensions" text NOT NULL, "aggregation_type" varchar(8) NOT NULL, "value_field" varchar(100), "created_at" datetime(3) NOT NULL, CONSTRAINT "uq_pricing_metrics_id" UNIQUE ("id"))',
  'CREATE INDEX "ix_pricing_metrics_env_seq" ON "pricing_metrics" ("environment_id", "seq")',
  'CREATE INDEX "ix_pricing_metrics_env_event" ON "pricing_metrics" ("environment_id", "event_name")',
  'CREATE TABLE "rate_cards" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "name" varchar(255) NOT NULL, "description" varchar(2000), "billing_interval" varchar(8) NOT NULL, "currency" varchar(3), "metadata" text NOT NULL, "rate_catalog_id" varchar(32), "created_at" datetime(3) NOT NULL, "updated_at" datetime(3) NOT NULL, CONSTRAINT "uq_rate_cards_id" UNIQUE ("id"))',
  'CREATE INDEX "ix_rate_cards_env_seq" ON "rate_cards" ("environment_id", "seq")',
  'CREATE TABLE "rate_catalogs" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "name" varchar(255) NOT NULL, "description" varchar(2000) NOT NULL, "rate_count" integer NOT NULL, "currency" varchar(3), "created_at" datetime(3) NOT NULL, CONSTRAINT "uq_rate_catalogs_id" UNIQUE ("id"))',
  'CREATE INDEX "ix_rate_catalogs_env_seq" ON "rate_catalogs" ("environment_id", "seq")',
  'CREATE TABLE "rates" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "owner_kind" varchar(8) NOT NULL, "owner_id" varchar(32) NOT NULL, "billing_interval" varchar(8) NOT NULL, "kind" varchar(12) NOT NULL, "code" varchar(100) NOT NULL, "name" varchar(255) NOT NULL, "description" varchar(2000), "pricing_metric_id" varchar(32), "usage_type" varchar(12), "included_units" text, "dimensions" text, "created_at" datetime(3) NOT NULL, "price_type" varchar(8), "price_currency" varchar(3), "price_value" text, "package_units" text, "rounding_behavior" varchar(10), CONSTRAINT "uq_rates_id" UNIQUE ("id"), CONSTRAINT "uq_rates_owner_interval_code" UNIQUE ("owner_id", "billing_interval", "code"))',
  'CREATE INDEX "ix_rates_owner_seq" ON "rates" ("owner_id", "seq")',
  'CREATE TABLE "rate_cells" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "rate_id" varchar(32) NOT NULL, "owner_id" varchar(32) NOT NULL, "coordinates" text NOT NULL, "coordinates_hash" varchar(64) NOT NULL, "price_type" varchar(8), "price_currency" varchar(3), "price_value" text, "package_units" text, "rounding_behavior" varchar(10), CONSTRAINT "uq_rate_cells_rate_coordinates" UNIQUE ("rate_id", "coordinates_hash"))',
  'CREATE INDEX "ix_rate_cells_owner_seq" ON "rate_cells" ("owner_id", "seq")',
];

const TABLES = ["rate_cells", "rates", "rate_catalogs", "rate_cards", "pricing_metrics"];

export class Catalog1795000000001 implements MigrationInterface {
  name = "Catalog1795000000001";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL, SQLITE);
  }

  async down(q: QueryRunner): Promise<void> {
    await dropTables(q, TABLES);
  }
}
