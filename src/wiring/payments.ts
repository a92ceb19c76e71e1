/**
 * Payments (DESIGN §16) wired: each environment's payment settings (secrets sealed with the
 * configured SECRETS_ENCRYPTION_KEY) and the providers chosen from them: the built-in test
 * provider, or Stripe built by `stripe` for the environment's key. With tracing on, each charge
 * and refund is a span of its own.
 */
import { PaymentSettingsService } from "../billing/payments/settings.js";
import type { SecretKeys } from "../billing/payments/secret-box.js";
import { type StripeFactory, builtInPaymentProviders } from "../billing/subscriptions/payments.js";
import type { Database } from "../db/datasource.js";
import { SqlPaymentSettingsStore } from "../db/stores/payment-settings-store.js";
import { type Tracing, tracedProvider } from "../ops/tracing.js";

/** Until the Stripe adapter (src/providers/stripe/provider.ts) is wired here: an environment set to Stripe cannot be served. */
export const stripeNotBuilt: StripeFactory = () => {
  throw new Error("the Stripe payment provider is not built into this server yet (src/providers/stripe/provider.ts)");
};

export interface PaymentOptions {
  secrets?: SecretKeys | undefined;
  tracing?: Tracing | undefined;
  /** Builds an environment's Stripe provider from its secret key. */
  stripe?: StripeFactory;
  /** How long an environment's provider is kept before its settings are read again (ms). */
  providerTtlMs?: number;
}

export function wirePayments(db: Database, publicBaseUrl: () => string, now: () => Date, options: PaymentOptions = {}) {
  const { tracing } = options;
  const wrap = tracing && ((p: Parameters<typeof tracedProvider>[0], name: string) => tracedProvider(p, tracing, name));
  const paymentSettings = new PaymentSettingsService(new SqlPaymentSettingsStore(db.sql, db.entities), options.secrets, publicBaseUrl, now);
  const payments = builtInPaymentProviders(wrap).configure({
    settings: paymentSettings,
    stripe: options.stripe ?? stripeNotBuilt,
    wrap,
    ttlMs: options.providerTtlMs,
  });
  // A change in this process is seen at once; other servers see it within the TTL.
  paymentSettings.changed = (environmentId) => payments.invalidate(environmentId);
  return { payments, paymentSettings };
}
