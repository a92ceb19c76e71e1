import type { MigrationInterface, QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";
import { binaryCollation, dropTables, runFor } from "./dialect.js";

/**
 * Customer portal sessions (issue 15): the unguessable token of a hosted portal URL, its subject,
 * where its return link goes and when it expires. SQL generated from the entity per dialect, then
 * reviewed. On MySQL the table's default is the server's binary no-pad collation (migration 8's
 * rule: tokens and IDs compare byte for byte, as on SQLite), so every text column, and any added
 * later, has it.
 */
const mysql = (collation: string) => [
  "CREATE TABLE `customer_portal_sessions` (`seq` bigint UNSIGNED NOT NULL AUTO_INCREMENT, `id` varchar(32) NOT NULL, `environment_id` varchar(32) NOT NULL, `token` varchar(64) NOT NULL, `subject_id` varchar(32) NOT NULL, `return_url` varchar(2000) NOT NULL, `expires_at` datetime(3) NOT NULL, `created_at` datetime(3) NOT NULL, UNIQUE INDEX `uq_customer_portal_sessions_id` (`id`), UNIQUE INDEX `uq_customer_portal_sessions_token` (`token`), PRIMARY KEY (`seq`)) " +
    `ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}`,
];

const SQLITE = [
  'CREATE TABLE "customer_portal_sessions" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "token" varchar(64) NOT NULL, "subject_id" varchar(32) NOT NULL, "return_url" varchar(2000) NOT NULL, "expires_at" datetime(3) NOT NULL, "created_at" datetime(3) NOT NULL, CONSTRAINT "uq_customer_portal_sessions_id" UNIQUE ("id"), CONSTRAINT "uq_customer_portal_sessions_token" UNIQUE ("token"))',
];

export class CustomerPortal1795000000011 implements MigrationInterface {
  name = "CustomerPortal1795000000011";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, isMysql(q.connection.driver.options.type) ? mysql(await binaryCollation(q)) : [], SQLITE);
  }

  async down(q: QueryRunner): Promise<void> {
    await dropTables(q, ["customer_portal_sessions"]);
  }
}
