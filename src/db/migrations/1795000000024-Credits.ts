import type { MigrationInterface, QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";
import { binaryCollation, dropTables, runFor } from "./dialect.js";

/**
 * DESIGN §14: credit grants, the credit ledger, per-currency credit settings and the state of
 * their alerts. SQL generated from the entities per dialect (src/db/entities/credits.ts), then
 * reviewed. A grant's `remaining` stays within [0, amount]: a CHECK constraint on both stores
 * (MariaDB enforces CHECK; TypeORM does not model it on MySQL, so it lives here only). The
 * ledger's unique (grant_id, invoice_id, entry_type) makes "grant G applied to invoice I" happen
 * at most once (invoice_id '' when the entry has none). On MySQL each table's default is the
 * server's binary no-pad collation (migration 8's rule).
 */
const mysql = (collation: string) =>
  [
    "CREATE TABLE `credit_grants` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `subject_id` varchar(32) NOT NULL, `currency` varchar(3) NOT NULL, `amount` decimal(65,12) NOT NULL, `remaining` decimal(65,12) NOT NULL, `category` varchar(16) NOT NULL, `priority` int NOT NULL, `effective_at` datetime(3) NOT NULL, `expires_at` datetime(3) NULL, `applies_to_rate_codes` mediumtext NOT NULL, `metadata` mediumtext NOT NULL, `status` varchar(16) NOT NULL, `invoice_id` varchar(32) NULL, `clock_id` varchar(32) NULL, `created_at` datetime(3) NOT NULL, `voided_at` datetime(3) NULL, `expired_at` datetime(3) NULL, INDEX `ix_credit_grants_env_seq` (`environment_id`, `seq`), INDEX `ix_credit_grants_subject` (`subject_id`, `currency`, `status`), INDEX `ix_credit_grants_expiry` (`status`, `expires_at`), UNIQUE INDEX `uq_credit_grants_id` (`id`), PRIMARY KEY (`seq`), CONSTRAINT `ck_credit_grants_remaining` CHECK (`remaining` >= 0 AND `remaining` <= `amount`))",
    "CREATE TABLE `credit_ledger` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `subject_id` varchar(32) NOT NULL, `grant_id` varchar(32) NOT NULL, `entry_type` varchar(16) NOT NULL, `currency` varchar(3) NOT NULL, `amount` decimal(65,12) NOT NULL, `invoice_id` varchar(32) NOT NULL, `description` varchar(1000) NOT NULL, `created_at` datetime(3) NOT NULL, INDEX `ix_credit_ledger_subject_seq` (`subject_id`, `seq`), UNIQUE INDEX `uq_credit_ledger_id` (`id`), UNIQUE INDEX `uq_credit_ledger_movement` (`grant_id`, `invoice_id`, `entry_type`), PRIMARY KEY (`seq`))",
    "CREATE TABLE `credit_settings` (`environment_id` varchar(32) NOT NULL, `subject_id` varchar(32) NOT NULL, `currency` varchar(3) NOT NULL, `low_balance_threshold` decimal(38,12) NULL DEFAULT NULL, `top_up_threshold` decimal(38,12) NULL DEFAULT NULL, `top_up_amount` decimal(38,12) NULL DEFAULT NULL, `top_up_priority` int NULL DEFAULT NULL, `updated_at` datetime(3) NOT NULL, PRIMARY KEY (`environment_id`, `subject_id`, `currency`))",
    "CREATE TABLE `credit_alert_state` (`environment_id` varchar(32) NOT NULL, `subject_id` varchar(32) NOT NULL, `currency` varchar(3) NOT NULL, `kind` varchar(16) NOT NULL, `below` tinyint NOT NULL, `changed_at` datetime(3) NOT NULL, PRIMARY KEY (`environment_id`, `subject_id`, `currency`, `kind`))",
  ].map((sql) => `${sql} ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}`);

const SQLITE = [
  `CREATE TABLE "credit_grants" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "subject_id" varchar(32) NOT NULL, "currency" varchar(3) NOT NULL, "amount" text NOT NULL, "remaining" text NOT NULL, "category" varchar(16) NOT NULL, "priority" integer NOT NULL, "effective_at" datetime(3) NOT NULL, "expires_at" datetime(3), "applies_to_rate_codes" text NOT NULL, "metadata" text NOT NULL, "status" varchar(16) NOT NULL, "invoice_id" varchar(32), "clock_id" varchar(32), "created_at" datetime(3) NOT NULL, "voided_at" datetime(3), "expired_at" datetime(3), CONSTRAINT "uq_credit_grants_id" UNIQUE ("id"), CONSTRAINT "ck_credit_grants_remaining" CHECK (remaining NOT LIKE '-%' AND CAST(remaining AS REAL) <= CAST(amount AS REAL)))`,
  'CREATE INDEX "ix_credit_grants_env_seq" ON "credit_grants" ("environment_id", "seq")',
  'CREATE INDEX "ix_credit_grants_subject" ON "credit_grants" ("subject_id", "currency", "status")',
  'CREATE INDEX "ix_credit_grants_expiry" ON "credit_grants" ("status", "expires_at")',
  'CREATE TABLE "credit_ledger" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "subject_id" varchar(32) NOT NULL, "grant_id" varchar(32) NOT NULL, "entry_type" varchar(16) NOT NULL, "currency" varchar(3) NOT NULL, "amount" text NOT NULL, "invoice_id" varchar(32) NOT NULL, "description" varchar(1000) NOT NULL, "created_at" datetime(3) NOT NULL, CONSTRAINT "uq_credit_ledger_id" UNIQUE ("id"), CONSTRAINT "uq_credit_ledger_movement" UNIQUE ("grant_id", "invoice_id", "entry_type"))',
  'CREATE INDEX "ix_credit_ledger_subject_seq" ON "credit_ledger" ("subject_id", "seq")',
  'CREATE TABLE "credit_settings" ("environment_id" varchar(32) NOT NULL, "subject_id" varchar(32) NOT NULL, "currency" varchar(3) NOT NULL, "low_balance_threshold" text, "top_up_threshold" text, "top_up_amount" text, "top_up_priority" integer, "updated_at" datetime(3) NOT NULL, PRIMARY KEY ("environment_id", "subject_id", "currency"))',
  'CREATE TABLE "credit_alert_state" ("environment_id" varchar(32) NOT NULL, "subject_id" varchar(32) NOT NULL, "currency" varchar(3) NOT NULL, "kind" varchar(16) NOT NULL, "below" boolean NOT NULL, "changed_at" datetime(3) NOT NULL, PRIMARY KEY ("environment_id", "subject_id", "currency", "kind"))',
];

export class Credits1795000000024 implements MigrationInterface {
  name = "Credits1795000000024";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, isMysql(q.connection.driver.options.type) ? mysql(await binaryCollation(q)) : [], SQLITE);
  }

  async down(q: QueryRunner): Promise<void> {
    await dropTables(q, ["credit_alert_state", "credit_settings", "credit_ledger", "credit_grants"]);
  }
}
