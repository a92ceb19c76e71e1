/** Payment settings (DESIGN §16) between the wire and the domain: secrets go in, never out. */
import { create } from "@bufbuild/protobuf";
import type { PaymentSettingsView, UpdatePaymentSettingsInput } from "../../billing/payments/settings.js";
import { type PaymentSettings as PaymentSettingsPb, PaymentSettingsSchema } from "../../gen/billing/v1/payment_settings_pb.js";
import type { UpdatePaymentSettingsRequest } from "../../gen/billing/v1/payment_settings_service_pb.js";

export function paymentSettingsToPb(s: PaymentSettingsView): PaymentSettingsPb {
  return create(PaymentSettingsSchema, {
    provider: s.provider,
    stripeSecretKeySet: s.stripeSecretKeySet,
    stripeSecretKeyLast4: s.stripeSecretKeyLast4 ?? undefined,
    stripeWebhookSecretSet: s.stripeWebhookSecretSet,
    stripeWebhookUrl: s.stripeWebhookUrl,
    retryScheduleDays: s.retryScheduleDays,
    afterLastAttempt: s.afterLastAttempt,
    markUncollectible: s.markUncollectible,
  });
}

/** The change asked for: the schedule is replaced when `set_retry_schedule` is true or a non-empty list is given. */
export function updatePaymentSettingsInput(req: UpdatePaymentSettingsRequest): UpdatePaymentSettingsInput {
  return {
    provider: req.provider,
    stripeSecretKey: req.stripeSecretKey,
    stripeWebhookSecret: req.stripeWebhookSecret,
    retryScheduleDays: req.setRetrySchedule || req.retryScheduleDays.length > 0 ? [...req.retryScheduleDays] : undefined,
    afterLastAttempt: req.afterLastAttempt,
    markUncollectible: req.markUncollectible,
  };
}
