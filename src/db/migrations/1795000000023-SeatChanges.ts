import type { MigrationInterface, QueryRunner } from "typeorm";

/** DESIGN §13: mid-cycle seat changes: proration credits carried to the next invoices. */
export class SeatChanges1795000000023 implements MigrationInterface {
  name = "SeatChanges1795000000023";

  async up(_q: QueryRunner): Promise<void> {}

  async down(_q: QueryRunner): Promise<void> {}
}
