import type { MigrationInterface, QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";
import { binaryCollation, dropTables, runFor } from "./dialect.js";

/**
 * DESIGN §16: payment providers and dunning.
 * - payment_settings: an environment's provider ("test" or "stripe"), its Stripe secrets sealed
 *   with the server's SECRETS_ENCRYPTION_KEY (AES-256-GCM; never in clear), the retry schedule and
 *   what follows the last failed attempt. No row: the test provider and the default dunning.
 * - invoices.attempt_count, next_payment_attempt (dunning scans ix_invoices_status_next_attempt)
 *   and payment_state (JSON: the provider's payment reference, a pending action's URL, the last
 *   failure).
 * - payment_methods.provider, provider_ref (Stripe `pm_…`), customer_ref (`cus_…`).
 * - provider_customers: the subject's customer at a provider, one per (environment, subject, provider).
 * - provider_events: a provider's webhook events already processed, by their id: a repeat changes nothing.
 */
const mysql = (collation: string) => [
  `CREATE TABLE \`payment_settings\` (\`environment_id\` varchar(32) NOT NULL, \`provider\` varchar(16) NOT NULL, \`stripe_secret_key_sealed\` varchar(1000) NULL, \`stripe_secret_key_last4\` varchar(8) NULL, \`stripe_webhook_secret_sealed\` varchar(1000) NULL, \`retry_schedule_days\` mediumtext NOT NULL, \`after_last_attempt\` varchar(16) NOT NULL, \`mark_uncollectible\` tinyint NOT NULL, \`updated_at\` datetime(3) NOT NULL, PRIMARY KEY (\`environment_id\`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}`,
  "ALTER TABLE `invoices` ADD `attempt_count` int NOT NULL DEFAULT 0, ADD `next_payment_attempt` datetime(3) NULL, ADD `payment_state` mediumtext NULL DEFAULT NULL",
  "CREATE INDEX `ix_invoices_status_next_attempt` ON `invoices` (`status`, `next_payment_attempt`)",
  "ALTER TABLE `payment_methods` ADD `provider` varchar(16) NOT NULL DEFAULT 'test', ADD `provider_ref` varchar(255) NULL, ADD `customer_ref` varchar(255) NULL",
  `CREATE TABLE \`provider_customers\` (\`environment_id\` varchar(32) NOT NULL, \`subject_id\` varchar(32) NOT NULL, \`provider\` varchar(16) NOT NULL, \`customer_ref\` varchar(255) NOT NULL, \`created_at\` datetime(3) NOT NULL, PRIMARY KEY (\`environment_id\`, \`subject_id\`, \`provider\`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}`,
  `CREATE TABLE \`provider_events\` (\`environment_id\` varchar(32) NOT NULL, \`provider\` varchar(16) NOT NULL, \`event_id\` varchar(255) NOT NULL, \`event_type\` varchar(100) NOT NULL, \`received_at\` datetime(3) NOT NULL, PRIMARY KEY (\`environment_id\`, \`provider\`, \`event_id\`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}`,
];
const MYSQL_DOWN = [
  "ALTER TABLE `payment_methods` DROP COLUMN `provider`, DROP COLUMN `provider_ref`, DROP COLUMN `customer_ref`",
  "DROP INDEX `ix_invoices_status_next_attempt` ON `invoices`",
  "ALTER TABLE `invoices` DROP COLUMN `attempt_count`, DROP COLUMN `next_payment_attempt`, DROP COLUMN `payment_state`",
];
const SQLITE_UP = [
  'CREATE TABLE "payment_settings" ("environment_id" varchar(32) PRIMARY KEY NOT NULL, "provider" varchar(16) NOT NULL, "stripe_secret_key_sealed" varchar(1000), "stripe_secret_key_last4" varchar(8), "stripe_webhook_secret_sealed" varchar(1000), "retry_schedule_days" text NOT NULL, "after_last_attempt" varchar(16) NOT NULL, "mark_uncollectible" boolean NOT NULL, "updated_at" datetime(3) NOT NULL)',
  'ALTER TABLE "invoices" ADD COLUMN "attempt_count" integer NOT NULL DEFAULT (0)',
  'ALTER TABLE "invoices" ADD COLUMN "next_payment_attempt" datetime(3)',
  'ALTER TABLE "invoices" ADD COLUMN "payment_state" text',
  'CREATE INDEX "ix_invoices_status_next_attempt" ON "invoices" ("status", "next_payment_attempt")',
  `ALTER TABLE "payment_methods" ADD COLUMN "provider" varchar(16) NOT NULL DEFAULT ('test')`,
  'ALTER TABLE "payment_methods" ADD COLUMN "provider_ref" varchar(255)',
  'ALTER TABLE "payment_methods" ADD COLUMN "customer_ref" varchar(255)',
  'CREATE TABLE "provider_customers" ("environment_id" varchar(32) NOT NULL, "subject_id" varchar(32) NOT NULL, "provider" varchar(16) NOT NULL, "customer_ref" varchar(255) NOT NULL, "created_at" datetime(3) NOT NULL, PRIMARY KEY ("environment_id", "subject_id", "provider"))',
  'CREATE TABLE "provider_events" ("environment_id" varchar(32) NOT NULL, "provider" varchar(16) NOT NULL, "event_id" varchar(255) NOT NULL, "event_type" varchar(100) NOT NULL, "received_at" datetime(3) NOT NULL, PRIMARY KEY ("environment_id", "provider", "event_id"))',
];
const SQLITE_DOWN = [
  'ALTER TABLE "payment_methods" DROP COLUMN "customer_ref"',
  'ALTER TABLE "payment_methods" DROP COLUMN "provider_ref"',
  'ALTER TABLE "payment_methods" DROP COLUMN "provider"',
  'DROP INDEX "ix_invoices_status_next_attempt"',
  'ALTER TABLE "invoices" DROP COLUMN "payment_state"',
  'ALTER TABLE "invoices" DROP COLUMN "next_payment_attempt"',
  'ALTER TABLE "invoices" DROP COLUMN "attempt_count"',
];

export class Payments1795000000030 implements MigrationInterface {
  name = "Payments1795000000030";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, isMysql(q.connection.driver.options.type) ? mysql(await binaryCollation(q)) : [], SQLITE_UP);
  }

  async down(q: QueryRunner): Promise<void> {
    await dropTables(q, ["provider_events", "provider_customers", "payment_settings"]);
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
