import type { MigrationInterface, QueryRunner } from "typeorm";
import { isMysql } from "../columns.js";
import { binaryCollation, runFor } from "./dialect.js";

/**
 * DESIGN §13: tiered and percentage prices, per-period minimum and maximum, archived rate cards
 * and pricing metrics.
 * - Prices (rates and matrix cells): `price_type` widens to 10 characters ("percentage");
 *   `tiers_mode`; `tiers`, a JSON list of `{up_to, unit_amount, flat_amount}` holding canonical
 *   decimal text (their currency is `price_currency`); `percent` and `fixed_per_event`, decimals.
 * - Rates: `minimum_amount`, `maximum_amount` (decimals) and `limits_currency`.
 * - Rate cards and pricing metrics: `archived_at`, null while not archived.
 * SQLite cannot widen a column in place, so there `rates` and `rate_cells` are rebuilt (as
 * TypeORM's schema diff writes it); the other columns are added.
 */
const PRICE_MYSQL = (c: string) =>
  `MODIFY \`price_type\` varchar(10) CHARACTER SET utf8mb4 COLLATE ${c} NULL DEFAULT NULL, ADD \`tiers_mode\` varchar(10) CHARACTER SET utf8mb4 COLLATE ${c} NULL DEFAULT NULL, ADD \`tiers\` mediumtext NULL, ADD \`percent\` decimal(38,12) NULL DEFAULT NULL, ADD \`fixed_per_event\` decimal(38,12) NULL DEFAULT NULL`;
const mysqlUp = (c: string) => [
  `ALTER TABLE \`rates\` ${PRICE_MYSQL(c)}, ADD \`minimum_amount\` decimal(38,12) NULL DEFAULT NULL, ADD \`maximum_amount\` decimal(38,12) NULL DEFAULT NULL, ADD \`limits_currency\` varchar(3) CHARACTER SET utf8mb4 COLLATE ${c} NULL DEFAULT NULL`,
  `ALTER TABLE \`rate_cells\` ${PRICE_MYSQL(c)}`,
  "ALTER TABLE `rate_cards` ADD `archived_at` datetime(3) NULL DEFAULT NULL",
  "ALTER TABLE `pricing_metrics` ADD `archived_at` datetime(3) NULL DEFAULT NULL",
];
const PRICE_MYSQL_DOWN = (c: string) =>
  `MODIFY \`price_type\` varchar(8) CHARACTER SET utf8mb4 COLLATE ${c} NULL DEFAULT NULL, DROP COLUMN \`tiers_mode\`, DROP COLUMN \`tiers\`, DROP COLUMN \`percent\`, DROP COLUMN \`fixed_per_event\``;
const mysqlDown = (c: string) => [
  "ALTER TABLE `pricing_metrics` DROP COLUMN `archived_at`",
  "ALTER TABLE `rate_cards` DROP COLUMN `archived_at`",
  `ALTER TABLE \`rate_cells\` ${PRICE_MYSQL_DOWN(c)}`,
  `ALTER TABLE \`rates\` ${PRICE_MYSQL_DOWN(c)}, DROP COLUMN \`minimum_amount\`, DROP COLUMN \`maximum_amount\`, DROP COLUMN \`limits_currency\``,
];

const RATES_OLD =
  '"seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "id" varchar(32) NOT NULL, "environment_id" varchar(32) NOT NULL, "owner_kind" varchar(8) NOT NULL, "owner_id" varchar(32) NOT NULL, "billing_interval" varchar(8) NOT NULL, "kind" varchar(12) NOT NULL, "code" varchar(100) NOT NULL, "name" varchar(255) NOT NULL, "description" varchar(2000), "pricing_metric_id" varchar(32), "usage_type" varchar(12), "included_units" text, "dimensions" text, "created_at" datetime(3) NOT NULL';
const RATES_COPIED =
  '"seq", "id", "environment_id", "owner_kind", "owner_id", "billing_interval", "kind", "code", "name", "description", "pricing_metric_id", "usage_type", "included_units", "dimensions", "created_at", "price_type", "price_currency", "price_value", "package_units", "rounding_behavior"';
const RATES_KEYS = 'CONSTRAINT "uq_rates_id" UNIQUE ("id"), CONSTRAINT "uq_rates_owner_interval_code" UNIQUE ("owner_id", "billing_interval", "code")';
const CELLS_OLD =
  '"seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "rate_id" varchar(32) NOT NULL, "owner_id" varchar(32) NOT NULL, "coordinates" text NOT NULL, "coordinates_hash" varchar(64) NOT NULL';
const CELLS_COPIED = '"seq", "rate_id", "owner_id", "coordinates", "coordinates_hash", "price_type", "price_currency", "price_value", "package_units", "rounding_behavior"';
const CELLS_KEYS = 'CONSTRAINT "uq_rate_cells_rate_coordinates" UNIQUE ("rate_id", "coordinates_hash")';
const price = (typeLength: number) => `"price_type" varchar(${typeLength}), "price_currency" varchar(3), "price_value" text, "package_units" text, "rounding_behavior" varchar(10)`;
const NEW_PRICE = '"tiers_mode" varchar(10), "tiers" text, "percent" text, "fixed_per_event" text';
const LIMITS = '"minimum_amount" text, "maximum_amount" text, "limits_currency" varchar(3)';

/** Rebuilds `table` with `columns`, copying `copied`, and its one index. */
const rebuild = (table: string, columns: string, copied: string, index: string) => [
  `DROP INDEX "${index.split(" ")[0]}"`,
  `CREATE TABLE "temporary_${table}" (${columns})`,
  `INSERT INTO "temporary_${table}" (${copied}) SELECT ${copied} FROM "${table}"`,
  `DROP TABLE "${table}"`,
  `ALTER TABLE "temporary_${table}" RENAME TO "${table}"`,
  `CREATE INDEX "${index.split(" ")[0]}" ON "${table}" ${index.slice(index.indexOf(" ") + 1)}`,
];
const RATES_INDEX = 'ix_rates_owner_seq ("owner_id", "seq")';
const CELLS_INDEX = 'ix_rate_cells_owner_seq ("owner_id", "seq")';

const SQLITE_UP = [
  ...rebuild("rates", `${RATES_OLD}, ${price(10)}, ${NEW_PRICE}, ${LIMITS}, ${RATES_KEYS}`, RATES_COPIED, RATES_INDEX),
  ...rebuild("rate_cells", `${CELLS_OLD}, ${price(10)}, ${NEW_PRICE}, ${CELLS_KEYS}`, CELLS_COPIED, CELLS_INDEX),
  'ALTER TABLE "rate_cards" ADD COLUMN "archived_at" datetime(3)',
  'ALTER TABLE "pricing_metrics" ADD COLUMN "archived_at" datetime(3)',
];
const SQLITE_DOWN = [
  'ALTER TABLE "pricing_metrics" DROP COLUMN "archived_at"',
  'ALTER TABLE "rate_cards" DROP COLUMN "archived_at"',
  ...rebuild("rate_cells", `${CELLS_OLD}, ${price(8)}, ${CELLS_KEYS}`, CELLS_COPIED, CELLS_INDEX),
  ...rebuild("rates", `${RATES_OLD}, ${price(8)}, ${RATES_KEYS}`, RATES_COPIED, RATES_INDEX),
];

/** Rates and cells the older schema cannot hold (tiered or percentage prices, a minimum or maximum). */
const NEWER_PRICES = [
  "SELECT COUNT(*) AS n FROM rates WHERE price_type IN ('tiered', 'percentage') OR minimum_amount IS NOT NULL OR maximum_amount IS NOT NULL",
  "SELECT COUNT(*) AS n FROM rate_cells WHERE price_type IN ('tiered', 'percentage')",
];

export class PricesAndArchive1795000000021 implements MigrationInterface {
  name = "PricesAndArchive1795000000021";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, isMysql(q.connection.driver.options.type) ? mysqlUp(await binaryCollation(q)) : [], SQLITE_UP);
  }

  /**
   * Refuses, changing nothing, while a rate or cell holds a price or limit the older schema has
   * no columns for (dropping them would change what those rate cards bill); archiving times are
   * dropped (the older schema has no archiving).
   */
  async down(q: QueryRunner): Promise<void> {
    for (const sql of NEWER_PRICES) {
      const [{ n }] = (await q.query(sql)) as { n: unknown }[];
      if (Number(n) > 0) throw new Error("cannot undo the prices migration: rates use tiered or percentage prices or a minimum or maximum; delete those rate cards and catalog rates first");
    }
    await runFor(q, isMysql(q.connection.driver.options.type) ? mysqlDown(await binaryCollation(q)) : [], SQLITE_DOWN);
  }
}
