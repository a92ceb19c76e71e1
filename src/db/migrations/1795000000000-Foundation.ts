import type { MigrationInterface, QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";
import { dropTables } from "./dialect.js";

/** Environments, API keys and subjects. SQL generated from the entities per dialect, then reviewed. */
export class Foundation1795000000000 implements MigrationInterface {
  name = "Foundation1795000000000";

  async up(q: QueryRunner): Promise<void> {
    if (isMysql(q.connection.driver.options.type)) {
      const tail = "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci";
      await q.query(
        `CREATE TABLE \`environments\` (\`id\` varchar(32) NOT NULL, \`name\` varchar(100) NOT NULL, \`mode\` varchar(8) NOT NULL, \`created_at\` datetime(3) NOT NULL, UNIQUE INDEX \`uq_environments_name\` (\`name\`), PRIMARY KEY (\`id\`)) ${tail}`,
      );
      await q.query(
        `CREATE TABLE \`api_keys\` (\`id\` varchar(32) NOT NULL, \`environment_id\` varchar(32) NOT NULL, \`kind\` varchar(16) NOT NULL, \`prefix\` varchar(24) NOT NULL, \`key_hash\` varchar(64) NOT NULL, \`created_at\` datetime(3) NOT NULL, \`revoked_at\` datetime(3) NULL, INDEX \`ix_api_keys_environment\` (\`environment_id\`), UNIQUE INDEX \`uq_api_keys_key_hash\` (\`key_hash\`), PRIMARY KEY (\`id\`)) ${tail}`,
      );
      await q.query(
        `CREATE TABLE \`subjects\` (\`seq\` bigint UNSIGNED NOT NULL AUTO_INCREMENT, \`id\` varchar(32) NOT NULL, \`environment_id\` varchar(32) NOT NULL, \`external_id\` varchar(255) NULL, \`external_id_key\` varchar(255) NULL, \`email\` varchar(254) NULL, \`name\` varchar(255) NULL, \`metadata\` text NOT NULL, \`created_at\` datetime(3) NOT NULL, \`updated_at\` datetime(3) NOT NULL, \`deleted_at\` datetime(3) NULL, INDEX \`ix_subjects_env_seq\` (\`environment_id\`, \`seq\`), UNIQUE INDEX \`uq_subjects_id\` (\`id\`), UNIQUE INDEX \`uq_subjects_env_external_id\` (\`environment_id\`, \`external_id_key\`), PRIMARY KEY (\`seq\`)) ${tail}`,
      );
      return;
    }
    await q.query(
      `CREATE TABLE "environments" ("id" varchar(32) PRIMARY KEY NOT NULL, "name" varchar(100) NOT NULL, "mode" varchar(8) NOT NULL, "created_at" datetime(3) NOT NULL, CONSTRAINT "uq_environments_name" UNIQUE ("name"))`,
    );
    await q.query(
      `CREATE TABLE "api_keys" ("id" varchar(32) PRIMARY KEY NOT NULL, "environment_id" varchar(32) NOT NULL, "kind" varchar(16) NOT NULL, "prefix" varchar(24) NOT NULL, "key_hash" varchar(64) NOT NULL, "created_at" datetime(3) NOT NULL, "revoked_at" datetime(3), CONSTRAINT "uq_api_keys_key_hash" UNIQUE ("key_hash"))`,
    );
    await q.query(`CREATE INDEX "ix_api_keys_environment" ON "api_keys" ("environment_id")`);
    await q.query(
      `CREATE TABLE "subjects" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "external_id" varchar(255), "external_id_key" varchar(255), "email" varchar(254), "name" varchar(255), "metadata" text NOT NULL, "created_at" datetime(3) NOT NULL, "updated_at" datetime(3) NOT NULL, "deleted_at" datetime(3), CONSTRAINT "uq_subjects_id" UNIQUE ("id"), CONSTRAINT "uq_subjects_env_external_id" UNIQUE ("environment_id", "external_id_key"))`,
    );
    await q.query(`CREATE INDEX "ix_subjects_env_seq" ON "subjects" ("environment_id", "seq")`);
  }

  async down(q: QueryRunner): Promise<void> {
    await dropTables(q, ["subjects", "api_keys", "environments"]);
  }
}
