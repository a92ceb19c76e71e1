import type { MigrationInterface, QueryRunner } from "typeorm";

/** DESIGN §14: credit grants, the credit ledger, per-currency credit settings and the state of their alerts. */
export class Credits1795000000024 implements MigrationInterface {
  name = "Credits1795000000024";

  async up(_q: QueryRunner): Promise<void> {}

  async down(_q: QueryRunner): Promise<void> {}
}
