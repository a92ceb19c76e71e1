/** Registers every service on one router: the single list of what the server serves. */
import type { DescFile, DescMethod, DescService } from "@bufbuild/protobuf";
import { type ConnectRouter, type ServiceImpl, type ServiceImplSpec, createServiceImplSpec } from "@connectrpc/connect";
import type { UniversalHandlerOptions } from "@connectrpc/connect/protocol";
import type { PricingMetricService as Metrics } from "../billing/catalog/metrics.js";
import type { RateCardService as Cards } from "../billing/catalog/rate-cards.js";
import type { RateCatalogService as Catalogs } from "../billing/catalog/rate-catalogs.js";
import type { IngestService as Ingest, SummaryService as Summaries } from "../billing/metering/usage.js";
import type { WebhookEndpoints } from "../billing/events/endpoints.js";
import type { EventFeed } from "../billing/events/feed.js";
import type { SubjectService as Subjects } from "../billing/subjects.js";
import type { BillingStates } from "../billing/subscriptions/billing-state.js";
import type { SubscriptionChanges as Changes } from "../billing/subscriptions/changes.js";
import type { Invoices } from "../billing/subscriptions/invoices.js";
import type { Pauses } from "../billing/subscriptions/pauses.js";
import type { CustomerPortal } from "../billing/subscriptions/portal.js";
import type { Subscriptions } from "../billing/subscriptions/subscribe.js";
import type { TestClocks } from "../billing/subscriptions/test-clocks.js";
import type { TimelineService as Timelines } from "../billing/subscriptions/timelines.js";
import { SubscriptionTimelineService, file_billing_v1_subscription_timeline_service } from "../gen/billing/v1/subscription_timeline_service_pb.js";
import { CustomerAccessService, file_billing_v1_customer_access_service } from "../gen/billing/v1/customer_access_service_pb.js";
import { CustomerPortalService, file_billing_v1_customer_portal_service } from "../gen/billing/v1/customer_portal_service_pb.js";
import { CheckoutService, file_billing_v1_checkout_service } from "../gen/billing/v1/checkout_service_pb.js";
import { InvoiceService, file_billing_v1_invoice_service } from "../gen/billing/v1/invoice_service_pb.js";
import { SubscriptionService, file_billing_v1_subscription_service } from "../gen/billing/v1/subscription_service_pb.js";
import { TestClockService, file_billing_v1_test_clock_service } from "../gen/billing/v1/test_clock_service_pb.js";
import { UsageEventService, file_billing_v1_usage_event_service } from "../gen/billing/v1/usage_event_service_pb.js";
import { HealthService, file_billing_v1_health_service } from "../gen/billing/v1/health_service_pb.js";
import { PricingMetricService, file_billing_v1_pricing_metric_service } from "../gen/billing/v1/pricing_metric_service_pb.js";
import { RateCardService, file_billing_v1_rate_card_service } from "../gen/billing/v1/rate_card_service_pb.js";
import { RateCatalogService, file_billing_v1_rate_catalog_service } from "../gen/billing/v1/rate_catalog_service_pb.js";
import { SubjectService, file_billing_v1_subject_service } from "../gen/billing/v1/subject_service_pb.js";
import { EventService, file_billing_v1_event_service } from "../gen/billing/v1/event_service_pb.js";
import { WebhookEndpointService, file_billing_v1_webhook_endpoint_service } from "../gen/billing/v1/webhook_endpoint_service_pb.js";
import { CreditService, file_billing_v1_credit_service } from "../gen/billing/v1/credit_service_pb.js";
import { CreditNoteService, file_billing_v1_credit_note_service } from "../gen/billing/v1/credit_note_service_pb.js";
import { TaxRateService, file_billing_v1_tax_rate_service } from "../gen/billing/v1/tax_rate_service_pb.js";
import { CouponService, file_billing_v1_coupon_service } from "../gen/billing/v1/coupon_service_pb.js";
import { PaymentSettingsService, file_billing_v1_payment_settings_service } from "../gen/billing/v1/payment_settings_service_pb.js";
import { ServerReflection, file_grpc_reflection_v1_reflection } from "../gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ServerReflectionV1alpha, file_grpc_reflection_v1alpha_reflection } from "../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { Health, file_grpc_health_v1_health } from "../gen/grpc/health/v1/health_pb.js";
import { file_google_rpc_error_details } from "../gen/google/rpc/error_details_pb.js";
import { file_google_rpc_status } from "../gen/google/rpc/status_pb.js";
import { nullsEncoder } from "./json-out.js";
import { reflectionServices } from "./reflection.js";
import { type HealthOptions, grpcHealthService } from "./services/grpc-health.js";
import { pricingMetricService, rateCardService, rateCatalogService } from "./services/catalog-services.js";
import { invoiceService, subscriptionService, testClockService } from "./services/billing-services.js";
import { customerAccessService } from "./services/customer-access-service.js";
import { healthService } from "./services/health-service.js";
import { checkoutService, customerPortalService } from "./services/portal-services.js";
import { eventService, webhookEndpointService } from "./services/event-services.js";
import { subjectService } from "./services/subject-service.js";
import { creditService } from "./services/credit-services.js";
import type { Credits } from "../billing/credits/grants.js";
import { creditNoteService } from "./services/credit-note-services.js";
import type { CreditNotes } from "../billing/credit-notes/credit-notes.js";
import { taxRateService } from "./services/tax-services.js";
import type { TaxRates } from "../billing/taxes/rates.js";
import type { InvoiceSettingsService } from "../billing/taxes/settings.js";
import { couponService } from "./services/coupon-services.js";
import type { Coupons } from "../billing/coupons/coupons.js";
import { paymentSettingsService } from "./services/payment-settings-services.js";
import type { PaymentSettingsService as PaymentSettings } from "../billing/payments/settings.js";
import { subscriptionTimelineService } from "./services/timeline-service.js";
import { usageEventService } from "./services/usage-service.js";

export interface Services {
  timelines: Timelines;
  subscriptions: Subscriptions;
  changes: Changes;
  pauses: Pauses;
  invoices: Invoices;
  billingStates: BillingStates;
  portal: CustomerPortal;
  clocks: TestClocks;
  ingest: Ingest;
  summaries: Summaries;
  subjects: Subjects;
  metrics: Metrics;
  cards: Cards;
  catalogs: Catalogs;
  webhookEndpoints: WebhookEndpoints;
  events: EventFeed;
  credits: Credits;
  creditNotes: CreditNotes;
  taxRates: TaxRates;
  invoiceSettings: InvoiceSettingsService;
  coupons: Coupons;
  paymentSettings: PaymentSettings;
}

/** The contract files whose services are served (reflection reads these). */
export const servedFiles: DescFile[] = [
  file_billing_v1_subject_service,
  file_billing_v1_pricing_metric_service,
  file_billing_v1_rate_card_service,
  file_billing_v1_rate_catalog_service,
  file_billing_v1_usage_event_service,
  file_billing_v1_subscription_service,
  file_billing_v1_subscription_timeline_service,
  file_billing_v1_invoice_service,
  file_billing_v1_customer_access_service,
  file_billing_v1_customer_portal_service,
  file_billing_v1_checkout_service,
  file_billing_v1_test_clock_service,
  file_billing_v1_health_service,
  file_billing_v1_webhook_endpoint_service,
  file_billing_v1_event_service,
  file_billing_v1_credit_service,
  file_billing_v1_credit_note_service,
  file_billing_v1_tax_rate_service,
  file_billing_v1_coupon_service,
  file_billing_v1_payment_settings_service,
  file_grpc_health_v1_health,
  file_grpc_reflection_v1_reflection,
  file_grpc_reflection_v1alpha_reflection,
];

/** Files of types the server sends but serves no service of: the error details (reflection resolves them). */
export const typeFiles: DescFile[] = [file_google_rpc_status, file_google_rpc_error_details];

/** Every served service's full name (what grpc.health.v1 knows besides ""). */
export const servedServiceNames: string[] = servedFiles.flatMap((f) => f.services.map((s) => s.typeName));

/** The services whose google.api.http annotations become REST routes: the contract's own (billing.v1), in servedFiles' order. */
export const restServices: DescService[] = servedFiles.flatMap((f) => f.services).filter((s) => s.typeName.startsWith("billing.v1."));

/** A service with its implementation, checked against the service's methods. */
const spec = <T extends DescService>(service: T, impl: ServiceImpl<T>): ServiceImplSpec => createServiceImplSpec(service, impl as never);

/**
 * Every served service with its implementation: the one list both the router and the REST bridge
 * use. grpc.health.v1 is served when `health` is given.
 */
export function implementations(services: Services, health?: Omit<HealthOptions, "services">): ServiceImplSpec[] {
  const reflection = reflectionServices(servedFiles, typeFiles);
  return [
    spec(HealthService, healthService()),
    spec(SubjectService, subjectService(services.subjects)),
    spec(PricingMetricService, pricingMetricService(services.metrics, services.summaries)),
    spec(UsageEventService, usageEventService(services.ingest)),
    spec(
      SubscriptionService,
      subscriptionService(services.subscriptions, services.changes, services.pauses, (i) => services.invoices.hostedInvoiceUrl(i)),
    ),
    spec(SubscriptionTimelineService, subscriptionTimelineService(services.timelines)),
    spec(InvoiceService, invoiceService(services.invoices, services.invoiceSettings)),
    spec(CustomerAccessService, customerAccessService(services.billingStates)),
    spec(CustomerPortalService, customerPortalService(services.portal)),
    spec(CheckoutService, checkoutService(services.subscriptions)),
    spec(TestClockService, testClockService(services.clocks)),
    spec(RateCardService, rateCardService(services.cards)),
    spec(RateCatalogService, rateCatalogService(services.catalogs)),
    spec(WebhookEndpointService, webhookEndpointService(services.webhookEndpoints)),
    spec(EventService, eventService(services.events, health?.stopped)),
    spec(CreditService, creditService(services.credits)),
    spec(CreditNoteService, creditNoteService(services.creditNotes)),
    spec(TaxRateService, taxRateService(services.taxRates)),
    spec(CouponService, couponService(services.coupons)),
    spec(PaymentSettingsService, paymentSettingsService(services.paymentSettings)),
    spec(ServerReflection, reflection.v1),
    spec(ServerReflectionV1alpha, reflection.v1alpha),
    ...(health ? [spec(Health, grpcHealthService({ ...health, services: servedServiceNames }))] : []),
  ];
}

/**
 * `readMaxBytes`: each method's body bound (each message's, for a client stream), if not the router's.
 * `jsonOptions`: the router's; each method gets them with the text encoder of its output
 * (json-out.ts nullsEncoder), so that JSON responses write `null` for unset optional fields.
 */
export function routes(specs: ServiceImplSpec[], readMaxBytes?: (method: DescMethod) => number, jsonOptions?: UniversalHandlerOptions["jsonOptions"]) {
  return (router: ConnectRouter) => {
    for (const spec of specs) {
      for (const m of Object.values(spec.methods)) {
        const options = {
          ...(readMaxBytes ? { readMaxBytes: readMaxBytes(m.method) } : {}),
          ...(jsonOptions ? { jsonOptions: { ...jsonOptions, textEncoder: nullsEncoder(m.method.output) } } : {}),
        };
        router.rpc(m.method, m.impl as never, Object.keys(options).length > 0 ? options : undefined);
      }
    }
  };
}
