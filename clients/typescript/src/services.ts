/**
 * Every service of billing.v1, by the name a client object gives it. A service added to the
 * contract is added here too (test/clients/typescript-package.test.ts checks that none is missing).
 */
import type { Client, Interceptor, Transport } from "@connectrpc/connect";
import { createClient } from "@connectrpc/connect";
import { CheckoutService } from "./gen/billing/v1/checkout_service_pb.js";
import { CouponService } from "./gen/billing/v1/coupon_service_pb.js";
import { CreditNoteService } from "./gen/billing/v1/credit_note_service_pb.js";
import { CreditService } from "./gen/billing/v1/credit_service_pb.js";
import { CustomerAccessService } from "./gen/billing/v1/customer_access_service_pb.js";
import { CustomerPortalService } from "./gen/billing/v1/customer_portal_service_pb.js";
import { EventService } from "./gen/billing/v1/event_service_pb.js";
import { HealthService } from "./gen/billing/v1/health_service_pb.js";
import { InvoiceService } from "./gen/billing/v1/invoice_service_pb.js";
import { PaymentSettingsService } from "./gen/billing/v1/payment_settings_service_pb.js";
import { PricingMetricService } from "./gen/billing/v1/pricing_metric_service_pb.js";
import { RateCardService } from "./gen/billing/v1/rate_card_service_pb.js";
import { RateCatalogService } from "./gen/billing/v1/rate_catalog_service_pb.js";
import { SubjectService } from "./gen/billing/v1/subject_service_pb.js";
import { SubscriptionService } from "./gen/billing/v1/subscription_service_pb.js";
import { SubscriptionTimelineService } from "./gen/billing/v1/subscription_timeline_service_pb.js";
import { TaxRateService } from "./gen/billing/v1/tax_rate_service_pb.js";
import { TestClockService } from "./gen/billing/v1/test_clock_service_pb.js";
import { UsageEventService } from "./gen/billing/v1/usage_event_service_pb.js";
import { WebhookEndpointService } from "./gen/billing/v1/webhook_endpoint_service_pb.js";

export const services = {
  checkout: CheckoutService,
  coupons: CouponService,
  creditNotes: CreditNoteService,
  credits: CreditService,
  customerAccess: CustomerAccessService,
  customerPortal: CustomerPortalService,
  events: EventService,
  health: HealthService,
  invoices: InvoiceService,
  paymentSettings: PaymentSettingsService,
  pricingMetrics: PricingMetricService,
  rateCards: RateCardService,
  rateCatalogs: RateCatalogService,
  subjects: SubjectService,
  subscriptions: SubscriptionService,
  subscriptionTimelines: SubscriptionTimelineService,
  taxRates: TaxRateService,
  testClocks: TestClockService,
  usageEvents: UsageEventService,
  webhookEndpoints: WebhookEndpointService,
} as const;

/** One connect-es client per billing.v1 service, all over one transport. */
export type BillingClient = { [K in keyof typeof services]: Client<(typeof services)[K]> };

/** Sends the API key as `X-API-Key` on every call, whatever the protocol. */
export function apiKeyInterceptor(apiKey: string): Interceptor {
  return (next) => (req) => {
    req.header.set("X-API-Key", apiKey);
    return next(req);
  };
}

/** The clients of every service over `transport`. */
export function clientsOver(transport: Transport): BillingClient {
  const entries = Object.entries(services).map(([name, service]) => [name, createClient(service, transport)]);
  return Object.fromEntries(entries) as BillingClient;
}
