/** Registers every service on one router: the single list of what the server serves. */
import type { DescMethod, DescService } from "@bufbuild/protobuf";
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
import { SubscriptionTimelineService } from "../gen/billing/v1/subscription_timeline_service_pb.js";
import { CustomerAccessService } from "../gen/billing/v1/customer_access_service_pb.js";
import { CustomerPortalService } from "../gen/billing/v1/customer_portal_service_pb.js";
import { CheckoutService } from "../gen/billing/v1/checkout_service_pb.js";
import { InvoiceService } from "../gen/billing/v1/invoice_service_pb.js";
import { SubscriptionService } from "../gen/billing/v1/subscription_service_pb.js";
import { TestClockService } from "../gen/billing/v1/test_clock_service_pb.js";
import { UsageEventService } from "../gen/billing/v1/usage_event_service_pb.js";
import { HealthService } from "../gen/billing/v1/health_service_pb.js";
import { PricingMetricService } from "../gen/billing/v1/pricing_metric_service_pb.js";
import { RateCardService } from "../gen/billing/v1/rate_card_service_pb.js";
import { RateCatalogService } from "../gen/billing/v1/rate_catalog_service_pb.js";
import { SubjectService } from "../gen/billing/v1/subject_service_pb.js";
import { EventService } from "../gen/billing/v1/event_service_pb.js";
import { WebhookEndpointService } from "../gen/billing/v1/webhook_endpoint_service_pb.js";
import { CreditService } from "../gen/billing/v1/credit_service_pb.js";
import { CreditNoteService } from "../gen/billing/v1/credit_note_service_pb.js";
import { TaxRateService } from "../gen/billing/v1/tax_rate_service_pb.js";
import { CouponService } from "../gen/billing/v1/coupon_service_pb.js";
import { PaymentSettingsService } from "../gen/billing/v1/payment_settings_service_pb.js";
import { ServerReflection } from "../gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ServerReflectionV1alpha } from "../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { Health as GrpcHealth } from "../gen/grpc/health/v1/health_pb.js";
import { file_google_rpc_error_details } from "../gen/google/rpc/error_details_pb.js";
import { file_google_rpc_status } from "../gen/google/rpc/status_pb.js";
import { nullsEncoder } from "./json-out.js";
import { reflectionServices } from "./reflection.js";
import { type HealthOptions, grpcHealthService } from "./services/grpc-health.js";
import { pricingMetricService, rateCardService, rateCatalogService } from "./services/catalog-services.js";
import { checkoutService, customerAccessService, customerPortalService, invoiceService, subscriptionService, testClockService } from "./services/billing-services.js";
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

type Health = Omit<HealthOptions, "services">;

/** A service with the making of its implementation, checked against the service's methods; none: not served. */
type Entry = { service: DescService; make: (s: Services, health?: Health) => object | undefined };
const entry = <T extends DescService>(service: T, make: (s: Services, health?: Health) => ServiceImpl<T> | undefined): Entry => ({ service, make });

/** Every served service, in the order reflection lists them and REST routes them. */
const served: Entry[] = [
  entry(SubjectService, (s) => subjectService(s.subjects)),
  entry(PricingMetricService, (s) => pricingMetricService(s.metrics, s.summaries)),
  entry(RateCardService, (s) => rateCardService(s.cards)),
  entry(RateCatalogService, (s) => rateCatalogService(s.catalogs)),
  entry(UsageEventService, (s) => usageEventService(s.ingest)),
  entry(SubscriptionService, (s) => subscriptionService(s.subscriptions, s.changes, s.pauses, (i) => s.invoices.hostedInvoiceUrl(i))),
  entry(SubscriptionTimelineService, (s) => subscriptionTimelineService(s.timelines)),
  entry(InvoiceService, (s) => invoiceService(s.invoices, s.invoiceSettings)),
  entry(CustomerAccessService, (s) => customerAccessService(s.billingStates)),
  entry(CustomerPortalService, (s) => customerPortalService(s.portal)),
  entry(CheckoutService, (s) => checkoutService(s.subscriptions)),
  entry(TestClockService, (s) => testClockService(s.clocks)),
  entry(HealthService, () => ({ ping: () => ({ ok: true }) })),
  entry(WebhookEndpointService, (s) => webhookEndpointService(s.webhookEndpoints)),
  entry(EventService, (s, health) => eventService(s.events, health?.stopped)),
  entry(CreditService, (s) => creditService(s.credits)),
  entry(CreditNoteService, (s) => creditNoteService(s.creditNotes)),
  entry(TaxRateService, (s) => taxRateService(s.taxRates)),
  entry(CouponService, (s) => couponService(s.coupons)),
  entry(PaymentSettingsService, (s) => paymentSettingsService(s.paymentSettings)),
  // Served when `health` is given.
  entry(GrpcHealth, (_, health) => health && grpcHealthService({ ...health, services: served.map((e) => e.service.typeName) })),
  entry(ServerReflection, () => reflection.v1),
  entry(ServerReflectionV1alpha, () => reflection.v1alpha),
];

const servedServices: DescService[] = served.map((e) => e.service);

// Reflection also resolves the error details' files, whose types the server sends without serving them.
const reflection = reflectionServices(servedServices, [file_google_rpc_status, file_google_rpc_error_details]);

/** The services whose google.api.http annotations become REST routes: the contract's own (billing.v1). */
export const restServices: DescService[] = servedServices.filter((s) => s.typeName.startsWith("billing.v1."));

/** Every served service with its implementation: the one list both the router and the REST bridge use. */
export function implementations(services: Services, health?: Health): ServiceImplSpec[] {
  return served.flatMap((e) => {
    const impl = e.make(services, health);
    return impl ? [createServiceImplSpec(e.service, impl as never)] : [];
  });
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
