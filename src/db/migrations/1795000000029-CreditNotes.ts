import type { MigrationInterface, QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";
import { binaryCollation, dropTables, runFor } from "./dialect.js";

/**
 * DESIGN §15: credit notes (src/db/entities/credit-notes.ts). SQL generated from the entity per
 * dialect, then reviewed. A note's number is unique per environment (uq_credit_notes_env_number);
 * its lines are JSON; its amounts are sums, DECIMAL(65,12). What all of an invoice's notes credit
 * is kept on the invoice (invoices.amount_credited, migration 26), which the store only ever
 * raises with a conditional UPDATE that keeps it within the invoice's total. On MySQL the table's
 * default is the server's binary no-pad collation (migration 8's rule).
 */
const mysql = (collation: string) => [
  `CREATE TABLE \`credit_notes\` (\`seq\` bigint UNSIGNED NOT NULL AUTO_INCREMENT, \`id\` varchar(32) NOT NULL, \`environment_id\` varchar(32) NOT NULL, \`number\` varchar(40) NOT NULL, \`invoice_id\` varchar(32) NOT NULL, \`invoice_number\` varchar(40) NOT NULL, \`subject_id\` varchar(32) NOT NULL, \`currency\` varchar(3) NOT NULL, \`reason\` varchar(32) NOT NULL, \`memo\` varchar(1000) NULL, \`outcome\` varchar(32) NOT NULL, \`lines\` mediumtext NOT NULL, \`subtotal\` decimal(65,12) NOT NULL, \`total_tax\` decimal(65,12) NOT NULL, \`total\` decimal(65,12) NOT NULL, \`status\` varchar(16) NOT NULL, \`credit_grant_id\` varchar(32) NULL, \`refund_id\` varchar(255) NULL, \`metadata\` mediumtext NOT NULL, \`created_at\` datetime(3) NOT NULL, INDEX \`ix_credit_notes_env_seq\` (\`environment_id\`, \`seq\`), INDEX \`ix_credit_notes_invoice_seq\` (\`invoice_id\`, \`seq\`), INDEX \`ix_credit_notes_subject_seq\` (\`subject_id\`, \`seq\`), UNIQUE INDEX \`uq_credit_notes_id\` (\`id\`), UNIQUE INDEX \`uq_credit_notes_env_number\` (\`environment_id\`, \`number\`), PRIMARY KEY (\`seq\`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}`,
];

const SQLITE = [
  'CREATE TABLE "credit_notes" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "number" varchar(40) NOT NULL, "invoice_id" varchar(32) NOT NULL, "invoice_number" varchar(40) NOT NULL, "subject_id" varchar(32) NOT NULL, "currency" varchar(3) NOT NULL, "reason" varchar(32) NOT NULL, "memo" varchar(1000), "outcome" varchar(32) NOT NULL, "lines" text NOT NULL, "subtotal" text NOT NULL, "total_tax" text NOT NULL, "total" text NOT NULL, "status" varchar(16) NOT NULL, "credit_grant_id" varchar(32), "refund_id" varchar(255), "metadata" text NOT NULL, "created_at" datetime(3) NOT NULL, CONSTRAINT "uq_credit_notes_id" UNIQUE ("id"), CONSTRAINT "uq_credit_notes_env_number" UNIQUE ("environment_id", "number"))',
  'CREATE INDEX "ix_credit_notes_env_seq" ON "credit_notes" ("environment_id", "seq")',
  'CREATE INDEX "ix_credit_notes_invoice_seq" ON "credit_notes" ("invoice_id", "seq")',
  'CREATE INDEX "ix_credit_notes_subject_seq" ON "credit_notes" ("subject_id", "seq")',
];

export class CreditNotes1795000000029 implements MigrationInterface {
  name = "CreditNotes1795000000029";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, isMysql(q.connection.driver.options.type) ? mysql(await binaryCollation(q)) : [], SQLITE);
  }

  async down(q: QueryRunner): Promise<void> {
    await dropTables(q, ["credit_notes"]);
  }
}
