import type { MigrationInterface, QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";
import { dropTables, runFor } from "./dialect.js";
import { type MetricRow, backfillTotals, metricFromLookupRow } from "../stores/usage-store.js";

/**
 * Minute totals beside the hourly ones, so a read of a period whose edges fall inside an hour
 * takes the whole minutes from them and only the partial minutes from raw events. The events
 * already stored are added to them here. SQL generated from the entities per dialect, then reviewed.
 */
const MYSQL = [
  "CREATE TABLE `usage_rollups_minute` (`metric_id` varchar(32) NOT NULL, `subject_id` varchar(32) NOT NULL, `bucket_start` datetime(3) NOT NULL, `dims_hash` varchar(64) NOT NULL, `dims` text NOT NULL, `sum_value` decimal(38,12) NOT NULL, `event_count` bigint NOT NULL, `max_value` decimal(38,12) NULL, `last_value` decimal(38,12) NULL, `last_at` datetime(3) NULL, `last_key` varchar(255) NULL, PRIMARY KEY (`metric_id`, `subject_id`, `bucket_start`, `dims_hash`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
];

const SQLITE = [
  'CREATE TABLE "usage_rollups_minute" ("metric_id" varchar(32) NOT NULL, "subject_id" varchar(32) NOT NULL, "bucket_start" datetime(3) NOT NULL, "dims_hash" varchar(64) NOT NULL, "dims" text NOT NULL, "sum_value" text NOT NULL, "event_count" bigint NOT NULL, "max_value" text, "last_value" text, "last_at" datetime(3), "last_key" varchar(255), PRIMARY KEY ("metric_id", "subject_id", "bucket_start", "dims_hash"))',
];

export class MinuteTotals1795000000005 implements MigrationInterface {
  name = "MinuteTotals1795000000005";

  async up(q: QueryRunner): Promise<void> {
    const mysql = isMysql(q.connection.driver.options.type);
    await runFor(q, MYSQL, SQLITE);
    // The minute totals of the events already stored, per pricing metric reading them.
    const metrics: MetricRow[] = await q.query("SELECT id, environment_id, event_name, dimensions, aggregation_type, value_field FROM pricing_metrics");
    for (const metric of metrics.map(metricFromLookupRow)) await backfillTotals(q.manager, mysql ? "mysql" : "sqlite", metric, ["minute"]);
  }

  async down(q: QueryRunner): Promise<void> {
    await dropTables(q, ["usage_rollups_minute"]);
  }
}
