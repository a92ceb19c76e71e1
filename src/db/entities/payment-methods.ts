/** Tables of saved payment methods. */
import { EntitySchema } from "typeorm";
import { type Dialect, type ExactText, idColumn, seqColumn, textColumn, timeColumn } from "../columns.js";

export interface PaymentMethodRow {
  seq?: string;
  id: string;
  environment_id: string;
  subject_id: string;
  brand: string;
  last4: string;
  behavior: string;
  created_at: Date;
  /** DESIGN §16 (migration 30): the provider that saved it, its id there and the customer's. */
  provider?: string;
  provider_ref?: string | null;
  customer_ref?: string | null;
}

export function paymentMethodsEntities(dialect: Dialect, exact: ExactText) {
  const PaymentMethod = new EntitySchema<PaymentMethodRow>({
    name: "PaymentMethod",
    tableName: "payment_methods",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      subject_id: idColumn(),
      brand: textColumn(20, false),
      last4: textColumn(4, false),
      behavior: textColumn(20, false),
      created_at: timeColumn(),
      provider: { type: "varchar", length: 16, nullable: false, default: "test" },
      provider_ref: textColumn(255),
      customer_ref: textColumn(255),
    }),
    uniques: [{ name: "uq_payment_methods_id", columns: ["id"] }],
  });

  return { PaymentMethod };
}
