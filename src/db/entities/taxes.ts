/**
 * Tables of taxes (DESIGN §15): an environment's tax rates. A subject's billing details live on
 * its row (subjects.billing_details) and a rate card's default tax rates on the card's
 * (rate_cards.default_tax_rate_ids), both JSON.
 */
import { EntitySchema } from "typeorm";
import { type Dialect, type ExactText, decimalColumn, idColumn, jsonColumn, seqColumn, textColumn, timeColumn } from "../columns.js";

export interface TaxRateRow {
  seq?: string;
  id: string;
  environment_id: string;
  display_name: string;
  percentage: string;
  inclusive: boolean;
  country: string | null;
  region: string | null;
  description: string | null;
  metadata: Record<string, string>;
  created_at: Date;
  archived_at: Date | null;
}

export function taxesEntities(dialect: Dialect, exact: ExactText) {
  const TaxRate = new EntitySchema<TaxRateRow>({
    name: "TaxRate",
    tableName: "tax_rates",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      display_name: textColumn(50, false),
      percentage: decimalColumn(dialect),
      inclusive: { type: "boolean", nullable: false },
      country: textColumn(2),
      region: textColumn(3),
      description: textColumn(500),
      metadata: jsonColumn(dialect),
      created_at: timeColumn(),
      archived_at: timeColumn(true),
    }),
    uniques: [{ name: "uq_tax_rates_id", columns: ["id"] }],
    indices: [{ name: "ix_tax_rates_env_seq", columns: ["environment_id", "seq"] }],
  });

  return { TaxRate };
}
