import type { MigrationInterface, QueryRunner } from "typeorm";
import { runFor } from "./dialect.js";

/**
 * DESIGN §14: an auto top-up buys at most once per crossing. credit_alert_state.crossings counts
 * the moves of a row below its line, incremented by the conditional UPDATE that makes the move; a
 * top-up's purchase key (and so its grant's and invoice's IDs) is derived from that number alone,
 * so a retry of one crossing finds the purchase it made. Existing rows start at 0: the keys of
 * purchases made before had another form, so no number meets one of them.
 */
const MYSQL_UP = ["ALTER TABLE `credit_alert_state` ADD `crossings` int NOT NULL DEFAULT 0"];
const MYSQL_DOWN = ["ALTER TABLE `credit_alert_state` DROP COLUMN `crossings`"];
const SQLITE_UP = ['ALTER TABLE "credit_alert_state" ADD COLUMN "crossings" integer NOT NULL DEFAULT (0)'];
const SQLITE_DOWN = ['ALTER TABLE "credit_alert_state" DROP COLUMN "crossings"'];

export class TopUpCrossings1795000000035 implements MigrationInterface {
  name = "TopUpCrossings1795000000035";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_UP, SQLITE_UP);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
