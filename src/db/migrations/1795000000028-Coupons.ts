import type { MigrationInterface, QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";
import { binaryCollation, dropTables, runFor } from "./dialect.js";

/**
 * DESIGN §15: coupons and the discounts that apply them (src/db/entities/coupons.ts).
 * - coupons: percent_off or amount_off (with amount_currency); times_redeemed never passes
 *   max_redemptions: a CHECK on both stores (MariaDB enforces CHECK; TypeORM does not model it on
 *   MySQL, so it lives here only), besides the one conditional UPDATE that redeems.
 * - discounts: a coupon applied to a subscription, or to a subject (subscription_id NULL).
 * On MySQL each table's default is the server's binary no-pad collation (migration 8's rule).
 */
const mysql = (collation: string) =>
  [
    "CREATE TABLE `coupons` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `name` varchar(100) NOT NULL, `percent_off` decimal(38,12) NULL DEFAULT NULL, `amount_currency` varchar(3) NULL DEFAULT NULL, `amount_off` decimal(38,12) NULL DEFAULT NULL, `duration` varchar(16) NOT NULL, `duration_in_months` int NULL DEFAULT NULL, `max_redemptions` int NULL DEFAULT NULL, `redeem_by` datetime(3) NULL DEFAULT NULL, `applies_to_rate_codes` mediumtext NOT NULL, `times_redeemed` int NOT NULL, `metadata` mediumtext NOT NULL, `created_at` datetime(3) NOT NULL, `archived_at` datetime(3) NULL DEFAULT NULL, INDEX `ix_coupons_env_seq` (`environment_id`, `seq`), UNIQUE INDEX `uq_coupons_id` (`id`), PRIMARY KEY (`seq`), CONSTRAINT `ck_coupons_redemptions` CHECK (`max_redemptions` IS NULL OR `times_redeemed` <= `max_redemptions`))",
    "CREATE TABLE `discounts` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `coupon_id` varchar(32) NOT NULL, `subscription_id` varchar(32) NULL DEFAULT NULL, `subject_id` varchar(32) NOT NULL, `starts_at` datetime(3) NOT NULL, `ends_at` datetime(3) NULL DEFAULT NULL, `status` varchar(16) NOT NULL, `invoices_discounted` int NOT NULL, `removed_at` datetime(3) NULL DEFAULT NULL, INDEX `ix_discounts_subscription` (`subscription_id`, `status`), INDEX `ix_discounts_subject` (`subject_id`, `status`), UNIQUE INDEX `uq_discounts_id` (`id`), PRIMARY KEY (`seq`))",
  ].map((sql) => `${sql} ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}`);

const SQLITE = [
  'CREATE TABLE "coupons" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "name" varchar(100) NOT NULL, "percent_off" text, "amount_currency" varchar(3), "amount_off" text, "duration" varchar(16) NOT NULL, "duration_in_months" integer, "max_redemptions" integer, "redeem_by" datetime(3), "applies_to_rate_codes" text NOT NULL, "times_redeemed" integer NOT NULL, "metadata" text NOT NULL, "created_at" datetime(3) NOT NULL, "archived_at" datetime(3), CONSTRAINT "uq_coupons_id" UNIQUE ("id"), CONSTRAINT "ck_coupons_redemptions" CHECK (max_redemptions IS NULL OR times_redeemed <= max_redemptions))',
  'CREATE INDEX "ix_coupons_env_seq" ON "coupons" ("environment_id", "seq")',
  'CREATE TABLE "discounts" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "coupon_id" varchar(32) NOT NULL, "subscription_id" varchar(32), "subject_id" varchar(32) NOT NULL, "starts_at" datetime(3) NOT NULL, "ends_at" datetime(3), "status" varchar(16) NOT NULL, "invoices_discounted" integer NOT NULL, "removed_at" datetime(3), CONSTRAINT "uq_discounts_id" UNIQUE ("id"))',
  'CREATE INDEX "ix_discounts_subscription" ON "discounts" ("subscription_id", "status")',
  'CREATE INDEX "ix_discounts_subject" ON "discounts" ("subject_id", "status")',
];

export class Coupons1795000000028 implements MigrationInterface {
  name = "Coupons1795000000028";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, isMysql(q.connection.driver.options.type) ? mysql(await binaryCollation(q)) : [], SQLITE);
  }

  async down(q: QueryRunner): Promise<void> {
    await dropTables(q, ["discounts", "coupons"]);
  }
}
