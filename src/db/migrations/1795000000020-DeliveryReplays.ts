import type { MigrationInterface, QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";
import { binaryCollation, runFor } from "./dialect.js";

/**
 * A replay is a delivery of its own (Standard Webhooks: `webhook-id` is the delivery's id, which a
 * receiver dedupes by, and a replay is meant to be processed again): `replay_of` names the delivery
 * it replays ('' for an event's first delivery to the endpoint). The unique key becomes (endpoint,
 * event, replay_of): one first delivery per endpoint and event (the fan-out and a replay that came
 * before it still make one between them), and one replay of each delivery. SQLite cannot drop a
 * table constraint, so there the table is rebuilt (as TypeORM's schema diff writes it).
 */
const mysql = (collation: string) => [
  `ALTER TABLE \`webhook_deliveries\` ADD \`replay_of\` varchar(32) CHARACTER SET utf8mb4 COLLATE ${collation} NOT NULL DEFAULT ''`,
  "CREATE UNIQUE INDEX `uq_webhook_deliveries_endpoint_event_replay` ON `webhook_deliveries` (`endpoint_id`, `event_id`, `replay_of`)",
  "DROP INDEX `uq_webhook_deliveries_endpoint_event` ON `webhook_deliveries`",
];
const MYSQL_DOWN = [
  // Replays are dropped first: the older key allows one delivery per endpoint and event.
  "DELETE FROM `webhook_deliveries` WHERE `replay_of` <> ''",
  "CREATE UNIQUE INDEX `uq_webhook_deliveries_endpoint_event` ON `webhook_deliveries` (`endpoint_id`, `event_id`)",
  "DROP INDEX `uq_webhook_deliveries_endpoint_event_replay` ON `webhook_deliveries`",
  "ALTER TABLE `webhook_deliveries` DROP COLUMN `replay_of`",
];

const COLUMNS =
  '"seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "endpoint_id" varchar(32) NOT NULL, "event_id" varchar(32) NOT NULL, "event_created_at" datetime(3) NOT NULL, "status" varchar(12) NOT NULL, "attempts" integer NOT NULL, "next_attempt_at" datetime(3) NOT NULL, "lease_token" varchar(32), "last_attempt_at" datetime(3), "last_status_code" integer, "last_error" varchar(500), "created_at" datetime(3) NOT NULL, "updated_at" datetime(3) NOT NULL';
const COPIED =
  '"seq", "id", "environment_id", "endpoint_id", "event_id", "event_created_at", "status", "attempts", "next_attempt_at", "lease_token", "last_attempt_at", "last_status_code", "last_error", "created_at", "updated_at"';
const INDEXES = [
  'CREATE INDEX "ix_webhook_deliveries_endpoint_status" ON "webhook_deliveries" ("endpoint_id", "status", "updated_at")',
  'CREATE INDEX "ix_webhook_deliveries_endpoint_seq" ON "webhook_deliveries" ("endpoint_id", "seq")',
  'CREATE INDEX "ix_webhook_deliveries_due" ON "webhook_deliveries" ("status", "next_attempt_at")',
];
const rebuild = (table: string, where: string) => [
  'DROP INDEX "ix_webhook_deliveries_endpoint_status"',
  'DROP INDEX "ix_webhook_deliveries_endpoint_seq"',
  'DROP INDEX "ix_webhook_deliveries_due"',
  table,
  `INSERT INTO "temporary_webhook_deliveries" (${COPIED}) SELECT ${COPIED} FROM "webhook_deliveries"${where}`,
  'DROP TABLE "webhook_deliveries"',
  'ALTER TABLE "temporary_webhook_deliveries" RENAME TO "webhook_deliveries"',
  ...INDEXES,
];
const SQLITE = rebuild(
  `CREATE TABLE "temporary_webhook_deliveries" (${COLUMNS}, "replay_of" varchar(32) NOT NULL DEFAULT (''), CONSTRAINT "uq_webhook_deliveries_id" UNIQUE ("id"), CONSTRAINT "uq_webhook_deliveries_endpoint_event_replay" UNIQUE ("endpoint_id", "event_id", "replay_of"))`,
  "",
);
const SQLITE_DOWN = rebuild(
  `CREATE TABLE "temporary_webhook_deliveries" (${COLUMNS}, CONSTRAINT "uq_webhook_deliveries_id" UNIQUE ("id"), CONSTRAINT "uq_webhook_deliveries_endpoint_event" UNIQUE ("endpoint_id", "event_id"))`,
  ` WHERE "replay_of" = ''`,
);

export class DeliveryReplays1795000000020 implements MigrationInterface {
  name = "DeliveryReplays1795000000020";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, isMysql(q.connection.driver.options.type) ? mysql(await binaryCollation(q)) : [], SQLITE);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
