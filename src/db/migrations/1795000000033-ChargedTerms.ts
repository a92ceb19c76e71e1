import type { MigrationInterface, QueryRunner } from "typeorm";
import { runFor } from "./dialect.js";

/**
 * DESIGN §13: a change of seats or multipliers with proration_behavior none applies from the next
 * cycle's charges, so the current period keeps the terms its fixed charges were billed at:
 * subscriptions.charged_terms holds them where they differ from the row's terms (JSON; NULL: the
 * row's terms, as every existing row was billed). Prorations, a pause's unused time and a change
 * of rate card are computed from them.
 */
const MYSQL_UP = ["ALTER TABLE `subscriptions` ADD `charged_terms` mediumtext NULL DEFAULT NULL"];
const MYSQL_DOWN = ["ALTER TABLE `subscriptions` DROP COLUMN `charged_terms`"];
const SQLITE_UP = ['ALTER TABLE "subscriptions" ADD COLUMN "charged_terms" text'];
const SQLITE_DOWN = ['ALTER TABLE "subscriptions" DROP COLUMN "charged_terms"'];

export class ChargedTerms1795000000033 implements MigrationInterface {
  name = "ChargedTerms1795000000033";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_UP, SQLITE_UP);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
