/** Tables of payment providers and dunning (DESIGN §16; migration 30). */
import { EntitySchema } from "typeorm";
import { type Dialect, type ExactText, idColumn, jsonColumn, sumColumn, textColumn, timeColumn } from "../columns.js";

export interface PaymentSettingsRow {
  environment_id: string;
  provider: string;
  /** Sealed with the server's SECRETS_ENCRYPTION_KEY (src/billing/payments/secret-box.ts). */
  stripe_secret_key_sealed: string | null;
  stripe_secret_key_last4: string | null;
  stripe_webhook_secret_sealed: string | null;
  retry_schedule_days: number[];
  after_last_attempt: string;
  mark_uncollectible: boolean;
  updated_at: Date;
}

export interface ProviderCustomerRow {
  environment_id: string;
  subject_id: string;
  provider: string;
  customer_ref: string;
  created_at: Date;
}

export interface ProviderEventRow {
  environment_id: string;
  provider: string;
  event_id: string;
  event_type: string;
  received_at: Date;
}

/**
 * An invoice's amount due below the provider's minimum charge (Stripe's amount_too_small),
 * settled by carrying it to the subject's next invoice in its currency (payments/carries.ts;
 * migration 41): one row per such invoice (its ID is the key, so a retried or raced attempt
 * carries it once), taken by the next invoice that finalizes (applied_invoice_id, set by one
 * conditional UPDATE).
 */
export interface CarriedDebitRow {
  source_invoice_id: string;
  environment_id: string;
  subject_id: string;
  currency: string;
  amount: string;
  source_number: string | null;
  applied_invoice_id: string | null;
  created_at: Date;
  applied_at: Date | null;
}

export function paymentsEntities(dialect: Dialect, exact: ExactText) {
  const PaymentSettings = new EntitySchema<PaymentSettingsRow>({
    name: "PaymentSettings",
    tableName: "payment_settings",
    columns: exact({
      environment_id: idColumn(true),
      provider: textColumn(16, false),
      stripe_secret_key_sealed: textColumn(1000),
      stripe_secret_key_last4: textColumn(8),
      stripe_webhook_secret_sealed: textColumn(1000),
      retry_schedule_days: jsonColumn(dialect),
      after_last_attempt: textColumn(16, false),
      mark_uncollectible: { type: dialect === "mysql" ? "tinyint" : "boolean", nullable: false },
      updated_at: timeColumn(),
    }),
  });

  const ProviderCustomer = new EntitySchema<ProviderCustomerRow>({
    name: "ProviderCustomer",
    tableName: "provider_customers",
    columns: exact({
      environment_id: idColumn(true),
      subject_id: idColumn(true),
      provider: { ...textColumn(16, false), primary: true },
      customer_ref: textColumn(255, false),
      created_at: timeColumn(),
    }),
  });

  const ProviderEvent = new EntitySchema<ProviderEventRow>({
    name: "ProviderEvent",
    tableName: "provider_events",
    columns: exact({
      environment_id: idColumn(true),
      provider: { ...textColumn(16, false), primary: true },
      event_id: { ...textColumn(255, false), primary: true },
      event_type: textColumn(100, false),
      received_at: timeColumn(),
    }),
  });

  const CarriedDebit = new EntitySchema<CarriedDebitRow>({
    name: "CarriedDebit",
    tableName: "carried_debits",
    columns: exact({
      source_invoice_id: idColumn(true),
      environment_id: idColumn(),
      subject_id: idColumn(),
      currency: textColumn(3, false),
      amount: sumColumn(dialect),
      source_number: textColumn(40),
      applied_invoice_id: textColumn(32),
      created_at: timeColumn(),
      applied_at: timeColumn(true),
    }),
    indices: [{ name: "ix_carried_debits_subject", columns: ["environment_id", "subject_id", "currency", "applied_invoice_id"] }],
  });

  return { PaymentSettings, ProviderCustomer, ProviderEvent, CarriedDebit };
}
