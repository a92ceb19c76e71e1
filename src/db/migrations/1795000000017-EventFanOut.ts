import type { MigrationInterface, QueryRunner } from "typeorm";
import { runFor } from "./dialect.js";

/**
 * Webhook fan-out in the delivery worker (issue 16): a change's transaction writes its events
 * only, marked `fanout = 1`; the worker claims marked events (a row lock, SKIP LOCKED on MySQL),
 * writes one delivery per endpoint that takes them and clears the mark, in one transaction.
 * Events written before this migration already have their deliveries, so the mark defaults to 0.
 */
const MYSQL_UP = ["ALTER TABLE `events` ADD `fanout` int NOT NULL DEFAULT 0", "CREATE INDEX `ix_events_fanout` ON `events` (`fanout`, `seq`)"];
const MYSQL_DOWN = ["DROP INDEX `ix_events_fanout` ON `events`", "ALTER TABLE `events` DROP COLUMN `fanout`"];
const SQLITE_UP = ['ALTER TABLE "events" ADD COLUMN "fanout" integer NOT NULL DEFAULT (0)', 'CREATE INDEX "ix_events_fanout" ON "events" ("fanout", "seq")'];
const SQLITE_DOWN = ['DROP INDEX "ix_events_fanout"', 'ALTER TABLE "events" DROP COLUMN "fanout"'];

export class EventFanOut1795000000017 implements MigrationInterface {
  name = "EventFanOut1795000000017";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_UP, SQLITE_UP);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
