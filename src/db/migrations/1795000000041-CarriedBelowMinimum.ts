import type { MigrationInterface, QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";
import { binaryCollation, dropTables, runFor } from "./dialect.js";

/**
 * DESIGN §16: an amount due below the provider's minimum charge (Stripe's amount_too_small, USD
 * 0.50) is carried to the subject's next invoice, as Stripe Billing does (src/db/entities/payments.ts
 * CarriedDebitRow). The source invoice's ID is the primary key: a retried attempt, or two workers
 * racing on one invoice, carry it once. The next invoice takes it by a conditional UPDATE of
 * applied_invoice_id (still NULL), so two finalizations never both take it. SQL generated from the
 * entity per dialect, then reviewed; on MySQL the table's default is the server's binary no-pad
 * collation (migration 8's rule).
 */
const mysql = (collation: string) => [
  `CREATE TABLE \`carried_debits\` (\`source_invoice_id\` varchar(32) NOT NULL, \`environment_id\` varchar(32) NOT NULL, \`subject_id\` varchar(32) NOT NULL, \`currency\` varchar(3) NOT NULL, \`amount\` decimal(65,12) NOT NULL, \`source_number\` varchar(40) NULL DEFAULT NULL, \`applied_invoice_id\` varchar(32) NULL DEFAULT NULL, \`created_at\` datetime(3) NOT NULL, \`applied_at\` datetime(3) NULL DEFAULT NULL, INDEX \`ix_carried_debits_subject\` (\`environment_id\`, \`subject_id\`, \`currency\`, \`applied_invoice_id\`), PRIMARY KEY (\`source_invoice_id\`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}`,
];

const SQLITE = [
  'CREATE TABLE "carried_debits" ("source_invoice_id" varchar(32) PRIMARY KEY NOT NULL, "environment_id" varchar(32) NOT NULL, "subject_id" varchar(32) NOT NULL, "currency" varchar(3) NOT NULL, "amount" text NOT NULL, "source_number" varchar(40), "applied_invoice_id" varchar(32), "created_at" datetime(3) NOT NULL, "applied_at" datetime(3))',
  'CREATE INDEX "ix_carried_debits_subject" ON "carried_debits" ("environment_id", "subject_id", "currency", "applied_invoice_id")',
];

export class CarriedBelowMinimum1795000000041 implements MigrationInterface {
  name = "CarriedBelowMinimum1795000000041";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, isMysql(q.connection.driver.options.type) ? mysql(await binaryCollation(q)) : [], SQLITE);
  }

  async down(q: QueryRunner): Promise<void> {
    await dropTables(q, ["carried_debits"]);
  }
}
