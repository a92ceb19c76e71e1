/** Connect implementation of the payment settings service (DESIGN §16): wire ⇄ domain only. */
import type { ServiceImpl } from "@connectrpc/connect";
import type { PaymentSettingsService as Settings } from "../../billing/payments/settings.js";
import type { PaymentSettingsService } from "../../gen/billing/v1/payment_settings_service_pb.js";
import { callerOf } from "../context.js";
import { paymentSettingsToPb, updatePaymentSettingsInput } from "../convert/payments.js";

export function paymentSettingsService(settings: Settings): ServiceImpl<typeof PaymentSettingsService> {
  return {
    async getPaymentSettings(_req, ctx) {
      return { paymentSettings: paymentSettingsToPb(await settings.get(callerOf(ctx))) };
    },
    async updatePaymentSettings(req, ctx) {
      return { paymentSettings: paymentSettingsToPb(await settings.update(callerOf(ctx), updatePaymentSettingsInput(req))) };
    },
  };
}
