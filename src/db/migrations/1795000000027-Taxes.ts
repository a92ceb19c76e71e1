import type { MigrationInterface, QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";
import { binaryCollation, dropTables, runFor } from "./dialect.js";

/**
 * DESIGN §15: taxes.
 * - tax_rates: an environment's tax rates (src/db/entities/taxes.ts); archived_at NULL while active.
 * - subjects.billing_details: the subject's billing details (JSON; NULL: never set).
 * - rate_cards.default_tax_rate_ids: the card's default tax rates (JSON array; NULL on cards made before: none).
 * On MySQL the new table's default is the server's binary no-pad collation (migration 8's rule).
 */
const mysql = (collation: string) => [
  `CREATE TABLE \`tax_rates\` (\`seq\` bigint UNSIGNED NOT NULL AUTO_INCREMENT, \`id\` varchar(32) NOT NULL, \`environment_id\` varchar(32) NOT NULL, \`display_name\` varchar(50) NOT NULL, \`percentage\` decimal(38,12) NOT NULL, \`inclusive\` tinyint NOT NULL, \`country\` varchar(2) NULL DEFAULT NULL, \`region\` varchar(3) NULL DEFAULT NULL, \`description\` varchar(500) NULL DEFAULT NULL, \`metadata\` mediumtext NOT NULL, \`created_at\` datetime(3) NOT NULL, \`archived_at\` datetime(3) NULL DEFAULT NULL, INDEX \`ix_tax_rates_env_seq\` (\`environment_id\`, \`seq\`), UNIQUE INDEX \`uq_tax_rates_id\` (\`id\`), PRIMARY KEY (\`seq\`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}`,
  "ALTER TABLE `subjects` ADD `billing_details` mediumtext NULL DEFAULT NULL",
  "ALTER TABLE `rate_cards` ADD `default_tax_rate_ids` mediumtext NULL DEFAULT NULL",
];
const MYSQL_DOWN = ["ALTER TABLE `rate_cards` DROP COLUMN `default_tax_rate_ids`", "ALTER TABLE `subjects` DROP COLUMN `billing_details`"];
const SQLITE_UP = [
  'CREATE TABLE "tax_rates" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "display_name" varchar(50) NOT NULL, "percentage" text NOT NULL, "inclusive" boolean NOT NULL, "country" varchar(2), "region" varchar(3), "description" varchar(500), "metadata" text NOT NULL, "created_at" datetime(3) NOT NULL, "archived_at" datetime(3), CONSTRAINT "uq_tax_rates_id" UNIQUE ("id"))',
  'CREATE INDEX "ix_tax_rates_env_seq" ON "tax_rates" ("environment_id", "seq")',
  'ALTER TABLE "subjects" ADD COLUMN "billing_details" text',
  'ALTER TABLE "rate_cards" ADD COLUMN "default_tax_rate_ids" text',
];
const SQLITE_DOWN = ['ALTER TABLE "rate_cards" DROP COLUMN "default_tax_rate_ids"', 'ALTER TABLE "subjects" DROP COLUMN "billing_details"'];

export class Taxes1795000000027 implements MigrationInterface {
  name = "Taxes1795000000027";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, isMysql(q.connection.driver.options.type) ? mysql(await binaryCollation(q)) : [], SQLITE_UP);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
    await dropTables(q, ["tax_rates"]);
  }
}
