import type { MigrationInterface, QueryRunner } from "typeorm";
import { runFor } from "./dialect.js";

/**
 * DESIGN §13: mid-cycle seat changes. A decrease (or the unused time of a pause, credited at
 * resume) that the next invoice cannot take is carried on the subscription as proration
 * credits, each a line's description and the amount left (JSON, NULL: none), until later
 * invoices take it.
 */
const MYSQL_UP = ["ALTER TABLE `subscriptions` ADD `proration_credits` mediumtext NULL DEFAULT NULL"];
const MYSQL_DOWN = ["ALTER TABLE `subscriptions` DROP COLUMN `proration_credits`"];
const SQLITE_UP = ['ALTER TABLE "subscriptions" ADD COLUMN "proration_credits" text'];
const SQLITE_DOWN = ['ALTER TABLE "subscriptions" DROP COLUMN "proration_credits"'];

export class SeatChanges1795000000023 implements MigrationInterface {
  name = "SeatChanges1795000000023";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_UP, SQLITE_UP);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
