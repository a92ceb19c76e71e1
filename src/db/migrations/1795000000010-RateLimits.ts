import type { MigrationInterface, QueryRunner } from "typeorm";
import { runFor } from "./dialect.js";

/**
 * Per-key rate limits (issue 12): an environment may override the server's default rate of its
 * keys' usage-ingest and API buckets (requests a second; NULL: the default, 0: unlimited).
 */
const MYSQL_UP = ["ALTER TABLE `environments` ADD `rate_limit_ingest_rps` int NULL DEFAULT NULL, ADD `rate_limit_api_rps` int NULL DEFAULT NULL"];
const MYSQL_DOWN = ["ALTER TABLE `environments` DROP COLUMN `rate_limit_ingest_rps`, DROP COLUMN `rate_limit_api_rps`"];
const SQLITE_UP = ['ALTER TABLE "environments" ADD COLUMN "rate_limit_ingest_rps" integer', 'ALTER TABLE "environments" ADD COLUMN "rate_limit_api_rps" integer'];
const SQLITE_DOWN = ['ALTER TABLE "environments" DROP COLUMN "rate_limit_api_rps"', 'ALTER TABLE "environments" DROP COLUMN "rate_limit_ingest_rps"'];

export class RateLimits1795000000010 implements MigrationInterface {
  name = "RateLimits1795000000010";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_UP, SQLITE_UP);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
