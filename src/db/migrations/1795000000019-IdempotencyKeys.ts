import type { MigrationInterface, QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";
import { binaryCollation, runFor } from "./dialect.js";

/**
 * Idempotency keys of mutating calls (DESIGN §12): one row per environment and key, its primary
 * key what makes two calls with one key meet in the database; the outcome stored once the first
 * call ends; swept after `expires_at` (its index). On MySQL the table's default is the server's
 * binary no-pad collation (migration 8's rule): keys compare byte for byte.
 */
const mysql = (collation: string) => [
  "CREATE TABLE `idempotency_keys` (`environment_id` varchar(32) NOT NULL, `idem_key` varchar(255) NOT NULL, `fingerprint` varchar(64) NOT NULL, `rpc` varchar(200) NOT NULL, `state` varchar(12) NOT NULL, `claim_token` varchar(32) NOT NULL, `changed` int NOT NULL, `locked_until` datetime(3) NOT NULL, `outcome` mediumtext NULL, `created_at` datetime(3) NOT NULL, `expires_at` datetime(3) NOT NULL, INDEX `ix_idempotency_keys_expires` (`expires_at`), PRIMARY KEY (`environment_id`, `idem_key`)) " +
    `ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}`,
];
const MYSQL_DOWN = ["DROP TABLE `idempotency_keys`"];
const SQLITE = [
  'CREATE TABLE "idempotency_keys" ("environment_id" varchar(32) NOT NULL, "idem_key" varchar(255) NOT NULL, "fingerprint" varchar(64) NOT NULL, "rpc" varchar(200) NOT NULL, "state" varchar(12) NOT NULL, "claim_token" varchar(32) NOT NULL, "changed" integer NOT NULL, "locked_until" datetime(3) NOT NULL, "outcome" text, "created_at" datetime(3) NOT NULL, "expires_at" datetime(3) NOT NULL, PRIMARY KEY ("environment_id", "idem_key"))',
  'CREATE INDEX "ix_idempotency_keys_expires" ON "idempotency_keys" ("expires_at")',
];
const SQLITE_DOWN = ['DROP INDEX "ix_idempotency_keys_expires"', 'DROP TABLE "idempotency_keys"'];

export class IdempotencyKeys1795000000019 implements MigrationInterface {
  name = "IdempotencyKeys1795000000019";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, isMysql(q.connection.driver.options.type) ? mysql(await binaryCollation(q)) : [], SQLITE);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
