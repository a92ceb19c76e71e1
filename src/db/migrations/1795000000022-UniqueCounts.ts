import type { MigrationInterface, QueryRunner } from "typeorm";

/** DESIGN §13: unique_count metrics: the distinct values each subject sent per day. */
export class UniqueCounts1795000000022 implements MigrationInterface {
  name = "UniqueCounts1795000000022";

  async up(_q: QueryRunner): Promise<void> {}

  async down(_q: QueryRunner): Promise<void> {}
}
