import type { MigrationInterface, QueryRunner } from "typeorm";
import { runFor } from "./dialect.js";

/**
 * DESIGN §14, §15: a credit-ledger entry's `invoice_id` is an invoice's ID. A refund credit note
 * on a credit purchase wrote its "void" entry with the note's ID (`cn_…`) there, to keep partial
 * refunds of one purchase apart under uq_credit_ledger_movement (grant_id, invoice_id,
 * entry_type). Now the entry names the purchase's invoice, and `credit_ledger.credit_note_id`
 * (the note that made the entry, '' for none) keeps them apart: the unique key gains it.
 * Existing rows are repaired: a "void" entry whose invoice_id is a credit note's ID gets that
 * note's invoice, the note's ID in credit_note_id and "Refunded by credit note <number>" as its
 * description; a "credit_note" entry gets the note that made its grant. On SQLite a table
 * constraint cannot be dropped: the table is rebuilt with the new key (rows and seq kept).
 */
const MYSQL_UP = [
  "ALTER TABLE `credit_ledger` ADD `credit_note_id` varchar(32) NOT NULL DEFAULT '' AFTER `invoice_id`",
  "ALTER TABLE `credit_ledger` ALTER `credit_note_id` DROP DEFAULT, DROP INDEX `uq_credit_ledger_movement`, ADD UNIQUE INDEX `uq_credit_ledger_movement` (`grant_id`, `invoice_id`, `entry_type`, `credit_note_id`)",
  "UPDATE `credit_ledger` l JOIN `credit_notes` n ON n.`environment_id` = l.`environment_id` AND n.`id` = l.`invoice_id` SET l.`credit_note_id` = n.`id`, l.`invoice_id` = n.`invoice_id`, l.`description` = CONCAT('Refunded by credit note ', n.`number`) WHERE l.`entry_type` = 'void' AND LEFT(l.`invoice_id`, 3) = 'cn_'",
  "UPDATE `credit_ledger` l JOIN `credit_notes` n ON n.`environment_id` = l.`environment_id` AND n.`credit_grant_id` = l.`grant_id` SET l.`credit_note_id` = n.`id` WHERE l.`entry_type` = 'credit_note'",
];
/** Back: the refund entries' invoice_id is their note's ID again (the old key needs it), then the old key. */
const MYSQL_DOWN = [
  "UPDATE `credit_ledger` SET `invoice_id` = `credit_note_id` WHERE `entry_type` = 'void' AND `credit_note_id` <> ''",
  "ALTER TABLE `credit_ledger` DROP INDEX `uq_credit_ledger_movement`, ADD UNIQUE INDEX `uq_credit_ledger_movement` (`grant_id`, `invoice_id`, `entry_type`), DROP COLUMN `credit_note_id`",
];

const COLUMNS = '"seq", "id", "environment_id", "subject_id", "grant_id", "entry_type", "currency", "amount", "invoice_id", "description", "created_at"';
/** credit_ledger as migration 24 made it, with `extra` columns and the unique key on `key`. */
const sqliteTable = (name: string, extra: string, key: string) =>
  `CREATE TABLE "${name}" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "subject_id" varchar(32) NOT NULL, "grant_id" varchar(32) NOT NULL, "entry_type" varchar(16) NOT NULL, "currency" varchar(3) NOT NULL, "amount" text NOT NULL, "invoice_id" varchar(32) NOT NULL, ${extra}"description" varchar(1000) NOT NULL, "created_at" datetime(3) NOT NULL, CONSTRAINT "uq_credit_ledger_id" UNIQUE ("id"), CONSTRAINT "uq_credit_ledger_movement" UNIQUE (${key}))`;
/** The rows of credit_ledger into the rebuilt table (`into`, `from`: its columns and what fills them), then the rebuilt table in its place. */
const sqliteRebuild = (table: string, into: string, from: string) => [
  `INSERT INTO "${table}" (${into}) SELECT ${from} FROM "credit_ledger" ORDER BY "seq"`,
  'DROP TABLE "credit_ledger"',
  `ALTER TABLE "${table}" RENAME TO "credit_ledger"`,
  'CREATE INDEX "ix_credit_ledger_subject_seq" ON "credit_ledger" ("subject_id", "seq")',
];
const NOTE = 'FROM "credit_notes" n WHERE n."environment_id" = "credit_ledger"."environment_id"';
const SQLITE_UP = [
  sqliteTable("credit_ledger_next", '"credit_note_id" varchar(32) NOT NULL, ', '"grant_id", "invoice_id", "entry_type", "credit_note_id"'),
  ...sqliteRebuild("credit_ledger_next", `${COLUMNS}, "credit_note_id"`, `${COLUMNS}, ''`),
  // Every SET reads the row as it was: invoice_id is still the note's ID in each subquery.
  `UPDATE "credit_ledger" SET "credit_note_id" = "invoice_id", "invoice_id" = (SELECT n."invoice_id" ${NOTE} AND n."id" = "credit_ledger"."invoice_id"), "description" = 'Refunded by credit note ' || (SELECT n."number" ${NOTE} AND n."id" = "credit_ledger"."invoice_id") WHERE "entry_type" = 'void' AND substr("invoice_id", 1, 3) = 'cn_' AND EXISTS (SELECT 1 ${NOTE} AND n."id" = "credit_ledger"."invoice_id")`,
  `UPDATE "credit_ledger" SET "credit_note_id" = (SELECT n."id" ${NOTE} AND n."credit_grant_id" = "credit_ledger"."grant_id") WHERE "entry_type" = 'credit_note' AND EXISTS (SELECT 1 ${NOTE} AND n."credit_grant_id" = "credit_ledger"."grant_id")`,
];
const SQLITE_DOWN = [
  `UPDATE "credit_ledger" SET "invoice_id" = "credit_note_id" WHERE "entry_type" = 'void' AND "credit_note_id" <> ''`,
  sqliteTable("credit_ledger_previous", "", '"grant_id", "invoice_id", "entry_type"'),
  ...sqliteRebuild("credit_ledger_previous", COLUMNS, COLUMNS),
];

export class LedgerCreditNotes1795000000032 implements MigrationInterface {
  name = "LedgerCreditNotes1795000000032";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_UP, SQLITE_UP);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
