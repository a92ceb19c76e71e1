import type { MigrationInterface, QueryRunner } from "typeorm";

/** DESIGN §14: credits applied to invoices and the amount due; a subscription's minimum commitment. */
export class CreditApplications1795000000025 implements MigrationInterface {
  name = "CreditApplications1795000000025";

  async up(_q: QueryRunner): Promise<void> {}

  async down(_q: QueryRunner): Promise<void> {}
}
