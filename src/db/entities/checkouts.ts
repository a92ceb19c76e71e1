/** Tables of hosted checkout sessions. */
import { EntitySchema } from "typeorm";
import { type Dialect, type ExactText, idColumn, jsonColumn, seqColumn, sumColumn, textColumn, timeColumn } from "../columns.js";

export interface CheckoutRow {
  seq?: string;
  id: string;
  environment_id: string;
  token: string;
  subject_id: string;
  kind: string;
  payload: Record<string, unknown>;
  success_url: string;
  cancelled_url: string;
  status: string;
  amount_due: string;
  currency: string;
  description: string;
  expires_at: Date;
  created_at: Date;
}

export function checkoutsEntities(dialect: Dialect, exact: ExactText) {
  const Checkout = new EntitySchema<CheckoutRow>({
    name: "Checkout",
    tableName: "checkout_sessions",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      token: textColumn(64, false),
      subject_id: idColumn(),
      kind: textColumn(12, false),
      payload: jsonColumn(dialect),
      success_url: textColumn(2000, false),
      cancelled_url: textColumn(2000, false),
      status: textColumn(12, false),
      amount_due: sumColumn(dialect),
      currency: textColumn(3, false),
      description: textColumn(500, false),
      expires_at: timeColumn(),
      created_at: timeColumn(),
    }),
    uniques: [
      { name: "uq_checkout_sessions_id", columns: ["id"] },
      { name: "uq_checkout_sessions_token", columns: ["token"] },
    ],
    indices: [{ name: "ix_checkout_sessions_status_expires", columns: ["status", "expires_at"] }],
  });

  return { Checkout };
}
