/** Connect implementation of the payment settings service (DESIGN §16): secrets go in, never out. */
import type { ServiceImpl } from "@connectrpc/connect";
import type { PaymentSettingsView, PaymentSettingsService as Settings } from "../../billing/payments/settings.js";
import { PaymentSettingsSchema } from "../../gen/billing/v1/payment_settings_pb.js";
import type { PaymentSettingsService } from "../../gen/billing/v1/payment_settings_service_pb.js";
import { callerOf } from "../context.js";
import { toPb } from "../convert/common.js";

export function paymentSettingsService(settings: Settings): ServiceImpl<typeof PaymentSettingsService> {
  const pb = (s: PaymentSettingsView) => ({ paymentSettings: toPb(PaymentSettingsSchema, s) });
  return {
    async getPaymentSettings(_req, ctx) {
      return pb(await settings.get(callerOf(ctx)));
    },
    async updatePaymentSettings(req, ctx) {
      // The schedule is replaced when `set_retry_schedule` is true or a non-empty list is given.
      const retryScheduleDays = req.setRetrySchedule || req.retryScheduleDays.length > 0 ? [...req.retryScheduleDays] : undefined;
      return pb(await settings.update(callerOf(ctx), { ...req, retryScheduleDays }));
    },
  };
}
