import { type MigrationInterface, type QueryRunner, TableUnique } from "typeorm";
import { isMysql } from "../columns.js";
import { binaryCollation, dropTables, runFor } from "./dialect.js";

/**
 * DESIGN §15: invoices finance can book.
 * - invoices.number: `PREFIX-000001`, assigned at finalization; unique per environment (NULL on
 *   drafts and on empty invoices kept internal, which the unique index allows many of).
 * - invoices.subtotal, total_discount, total_tax, amount_credited: the booked totals (NULL on rows
 *   written before: the total, 0, 0, 0); invoices.booking: discounts, tax per rate, notes and the
 *   buyer and seller as printed (JSON).
 * - invoice_lines.booking: a line's discount and tax amounts (JSON; NULL: none).
 * - invoice_sequences: the last number given per (environment, kind), one row locked by the
 *   finalizing transaction, so numbers are gapless (a rolled back finalization gives its number back).
 * - environments.invoice_prefix (default "INV") and environments.seller (JSON).
 */
/** Existing environments get their two sequences at 0 (new ones get them when created: auth-store.ts). */
const SEQUENCES_OF_EXISTING = [
  "INSERT INTO invoice_sequences (environment_id, kind, last_number) SELECT id, 'invoice', 0 FROM environments",
  "INSERT INTO invoice_sequences (environment_id, kind, last_number) SELECT id, 'credit_note', 0 FROM environments",
];

const mysql = (collation: string) => [
  "ALTER TABLE `invoices` ADD `number` varchar(40) NULL DEFAULT NULL, ADD `subtotal` decimal(65,12) NULL DEFAULT NULL, ADD `total_discount` decimal(65,12) NULL DEFAULT NULL, ADD `total_tax` decimal(65,12) NULL DEFAULT NULL, ADD `amount_credited` decimal(65,12) NULL DEFAULT NULL, ADD `booking` mediumtext NULL DEFAULT NULL",
  "CREATE UNIQUE INDEX `uq_invoices_env_number` ON `invoices` (`environment_id`, `number`)",
  "CREATE INDEX `ix_invoices_env_created` ON `invoices` (`environment_id`, `created_at`)",
  "ALTER TABLE `invoice_lines` ADD `booking` mediumtext NULL DEFAULT NULL",
  `CREATE TABLE \`invoice_sequences\` (\`environment_id\` varchar(32) NOT NULL, \`kind\` varchar(16) NOT NULL, \`last_number\` bigint NOT NULL, PRIMARY KEY (\`environment_id\`, \`kind\`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}`,
  "ALTER TABLE `environments` ADD `invoice_prefix` varchar(12) NOT NULL DEFAULT 'INV', ADD `seller` mediumtext NULL DEFAULT NULL",
  ...SEQUENCES_OF_EXISTING,
];
const MYSQL_DOWN = [
  "ALTER TABLE `environments` DROP COLUMN `invoice_prefix`, DROP COLUMN `seller`",
  "ALTER TABLE `invoice_lines` DROP COLUMN `booking`",
  "DROP INDEX `ix_invoices_env_created` ON `invoices`",
  "DROP INDEX `uq_invoices_env_number` ON `invoices`",
  "ALTER TABLE `invoices` DROP COLUMN `number`, DROP COLUMN `subtotal`, DROP COLUMN `total_discount`, DROP COLUMN `total_tax`, DROP COLUMN `amount_credited`, DROP COLUMN `booking`",
];
const SQLITE_UP = [
  'ALTER TABLE "invoices" ADD COLUMN "number" varchar(40)',
  'ALTER TABLE "invoices" ADD COLUMN "subtotal" text',
  'ALTER TABLE "invoices" ADD COLUMN "total_discount" text',
  'ALTER TABLE "invoices" ADD COLUMN "total_tax" text',
  'ALTER TABLE "invoices" ADD COLUMN "amount_credited" text',
  'ALTER TABLE "invoices" ADD COLUMN "booking" text',
  'CREATE INDEX "ix_invoices_env_created" ON "invoices" ("environment_id", "created_at")',
  'ALTER TABLE "invoice_lines" ADD COLUMN "booking" text',
  'CREATE TABLE "invoice_sequences" ("environment_id" varchar(32) NOT NULL, "kind" varchar(16) NOT NULL, "last_number" bigint NOT NULL, PRIMARY KEY ("environment_id", "kind"))',
  `ALTER TABLE "environments" ADD COLUMN "invoice_prefix" varchar(12) NOT NULL DEFAULT 'INV'`,
  'ALTER TABLE "environments" ADD COLUMN "seller" text',
  ...SEQUENCES_OF_EXISTING,
];
const SQLITE_DOWN = [
  'ALTER TABLE "environments" DROP COLUMN "seller"',
  'ALTER TABLE "environments" DROP COLUMN "invoice_prefix"',
  'ALTER TABLE "invoice_lines" DROP COLUMN "booking"',
  'DROP INDEX "ix_invoices_env_created"',
  ...["booking", "amount_credited", "total_tax", "total_discount", "subtotal", "number"].map((c) => `ALTER TABLE "invoices" DROP COLUMN "${c}"`),
];

const UNIQUE_NUMBER = new TableUnique({ name: "uq_invoices_env_number", columnNames: ["environment_id", "number"] });

export class InvoiceBooking1795000000026 implements MigrationInterface {
  name = "InvoiceBooking1795000000026";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, isMysql(q.connection.driver.options.type) ? mysql(await binaryCollation(q)) : [], SQLITE_UP);
    // SQLite keeps a unique key as a table constraint (TypeORM rebuilds the table for it).
    if (!isMysql(q.connection.driver.options.type)) await q.createUniqueConstraint("invoices", UNIQUE_NUMBER);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, []);
    if (!isMysql(q.connection.driver.options.type)) {
      await q.dropUniqueConstraint("invoices", UNIQUE_NUMBER);
      await dropTables(q, ["invoice_sequences"]);
      await runFor(q, [], SQLITE_DOWN);
    } else await dropTables(q, ["invoice_sequences"]);
  }
}
