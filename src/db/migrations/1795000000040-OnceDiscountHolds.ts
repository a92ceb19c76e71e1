import type { MigrationInterface, QueryRunner } from "typeorm";
import { runFor } from "./dialect.js";

/**
 * DESIGN §15: a "once" discount split by an upgrade whose change lines net to a credit
 * (src/billing/subscriptions/change-credit.ts): the change lines' part goes to the balance with
 * them and the rest is held for the invoice that keeps the other lines (the change's draft).
 * discounts.held_for_invoice_id is that invoice (no other is discounted by it) and
 * discounts.once_taken what the change lines took of an amount off (the draft is offered the rest),
 * so booking the draft again (late usage, its finalization) never takes the coupon's whole amount
 * a second time. NULL on every existing row: held for none, nothing taken.
 */
const MYSQL_UP = ["ALTER TABLE `discounts` ADD `held_for_invoice_id` varchar(32) NULL DEFAULT NULL, ADD `once_taken` decimal(38,12) NULL DEFAULT NULL"];
const MYSQL_DOWN = ["ALTER TABLE `discounts` DROP COLUMN `held_for_invoice_id`, DROP COLUMN `once_taken`"];
const SQLITE_UP = ['ALTER TABLE "discounts" ADD COLUMN "held_for_invoice_id" varchar(32)', 'ALTER TABLE "discounts" ADD COLUMN "once_taken" text'];
const SQLITE_DOWN = ['ALTER TABLE "discounts" DROP COLUMN "once_taken"', 'ALTER TABLE "discounts" DROP COLUMN "held_for_invoice_id"'];

export class OnceDiscountHolds1795000000040 implements MigrationInterface {
  name = "OnceDiscountHolds1795000000040";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_UP, SQLITE_UP);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
