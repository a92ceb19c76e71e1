import type { MigrationInterface, QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";
import { binaryCollation, runFor } from "./dialect.js";
import { type MetricRow, backfillTotals, metricFromLookupRow } from "../stores/usage-store.js";

/**
 * DESIGN §13: unique_count metrics. The distinct values each subject sent, per metric, dimension
 * combination and bucket of 2^level UTC days (level 0…6), with the first and last instant of the
 * value's events in the bucket (src/billing/metering/unique.ts). On MySQL the table's default is
 * the server's binary no-pad collation (migration 8's rule): values compare byte for byte.
 * `pricing_metrics.aggregation_type` widens from 8 to 12 characters to hold `unique_count` (on
 * SQLite, where the length is only declared, TypeORM rebuilds the table with it). A unique_count
 * metric already there gets its events' values. SQL generated from the entities per dialect,
 * then reviewed.
 */
const mysql = (collation: string) => [
  "CREATE TABLE `usage_unique_values` (`metric_id` varchar(32) NOT NULL, `subject_id` varchar(32) NOT NULL, `level` int NOT NULL, `bucket` int NOT NULL, `dims_hash` varchar(64) NOT NULL, `value_key` varchar(65) NOT NULL, `dims` mediumtext NOT NULL, `value_text` varchar(1000) NULL, `first_at` datetime(3) NOT NULL, `last_at` datetime(3) NOT NULL, PRIMARY KEY (`metric_id`, `subject_id`, `level`, `bucket`, `dims_hash`, `value_key`)) " +
    `ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}`,
];
const SQLITE = [
  'CREATE TABLE "usage_unique_values" ("metric_id" varchar(32) NOT NULL, "subject_id" varchar(32) NOT NULL, "level" integer NOT NULL, "bucket" integer NOT NULL, "dims_hash" varchar(64) NOT NULL, "value_key" varchar(65) NOT NULL, "dims" text NOT NULL, "value_text" varchar(1000), "first_at" datetime(3) NOT NULL, "last_at" datetime(3) NOT NULL, PRIMARY KEY ("metric_id", "subject_id", "level", "bucket", "dims_hash", "value_key"))',
];

/** pricing_metrics.aggregation_type as varchar(`length`), in the connection's dialect. */
async function aggregationTypeLength(q: QueryRunner, length: number): Promise<void> {
  if (isMysql(q.connection.driver.options.type)) {
    await q.query(`ALTER TABLE \`pricing_metrics\` MODIFY \`aggregation_type\` varchar(${length}) COLLATE ${await binaryCollation(q)} NOT NULL`);
    return;
  }
  const table = await q.getTable("pricing_metrics");
  const column = table?.findColumnByName("aggregation_type");
  if (!table || !column) throw new Error("pricing_metrics.aggregation_type not found");
  const wider = column.clone();
  wider.length = String(length);
  await q.changeColumn(table, column, wider);
}

export class UniqueCounts1795000000022 implements MigrationInterface {
  name = "UniqueCounts1795000000022";

  async up(q: QueryRunner): Promise<void> {
    const my = isMysql(q.connection.driver.options.type);
    await runFor(q, my ? mysql(await binaryCollation(q)) : [], SQLITE);
    await aggregationTypeLength(q, 12);
    const metrics: MetricRow[] = await q.query("SELECT id, environment_id, event_name, dimensions, aggregation_type, value_field FROM pricing_metrics WHERE aggregation_type = 'unique_count'");
    for (const metric of metrics.map(metricFromLookupRow)) await backfillTotals(q.manager, my ? "mysql" : "sqlite", metric, ["values"]);
  }

  async down(q: QueryRunner): Promise<void> {
    // Refused on MySQL (data too long) while a unique_count metric exists.
    await aggregationTypeLength(q, 8);
    await runFor(q, ["DROP TABLE `usage_unique_values`"], ['DROP TABLE "usage_unique_values"']);
  }
}
