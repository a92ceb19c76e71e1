/** Registers every service on one router: the single list of what the server serves. */
import type { DescFile } from "@bufbuild/protobuf";
import { configureTextEncoding, getTextEncoding } from "@bufbuild/protobuf/wire";
import type { ConnectRouter } from "@connectrpc/connect";
import type { PricingMetricService as Metrics } from "../billing/catalog/metrics.js";
import type { RateCardService as Cards } from "../billing/catalog/rate-cards.js";
import type { RateCatalogService as Catalogs } from "../billing/catalog/rate-catalogs.js";
import type { IngestService as Ingest, SummaryService as Summaries } from "../billing/metering/usage.js";
import type { SubjectService as Subjects } from "../billing/subjects.js";
import type { SubscriptionService as Subscriptions } from "../billing/subscriptions/service.js";
import type { TimelineService as Timelines } from "../billing/subscriptions/timelines.js";
import { SubscriptionTimelineService, file_billing_v1_subscription_timeline_service } from "../gen/billing/v1/subscription_timeline_service_pb.js";
import { CustomerAccessService, file_billing_v1_customer_access_service } from "../gen/billing/v1/customer_access_service_pb.js";
import { InvoiceService, file_billing_v1_invoice_service } from "../gen/billing/v1/invoice_service_pb.js";
import { SubscriptionService, file_billing_v1_subscription_service } from "../gen/billing/v1/subscription_service_pb.js";
import { TestClockService, file_billing_v1_test_clock_service } from "../gen/billing/v1/test_clock_service_pb.js";
import { UsageEventService, file_billing_v1_usage_event_service } from "../gen/billing/v1/usage_event_service_pb.js";
import { HealthService, file_billing_v1_health_service } from "../gen/billing/v1/health_service_pb.js";
import { PricingMetricService, file_billing_v1_pricing_metric_service } from "../gen/billing/v1/pricing_metric_service_pb.js";
import { RateCardService, file_billing_v1_rate_card_service } from "../gen/billing/v1/rate_card_service_pb.js";
import { RateCatalogService, file_billing_v1_rate_catalog_service } from "../gen/billing/v1/rate_catalog_service_pb.js";
import { SubjectService, file_billing_v1_subject_service } from "../gen/billing/v1/subject_service_pb.js";
import { ServerReflection, file_grpc_reflection_v1_reflection } from "../gen/grpc/reflection/v1/reflection_pb.js";
import { reflectionService } from "./reflection.js";
import { pricingMetricService, rateCardService, rateCatalogService } from "./services/catalog-services.js";
import { customerAccessService, invoiceService, subscriptionService, testClockService } from "./services/billing-services.js";
import { healthService } from "./services/health-service.js";
import { subjectService } from "./services/subject-service.js";
import { subscriptionTimelineService } from "./services/timeline-service.js";
import { usageEventService } from "./services/usage-service.js";

// protobuf-es checks every string field for lone surrogates through encodeURIComponent, which
// builds an escaped copy of each string; String.prototype.isWellFormed (Node 20) answers the
// same question without the copy.
configureTextEncoding({ ...getTextEncoding(), checkUtf8: (text: string) => (text as unknown as { isWellFormed(): boolean }).isWellFormed() });

export interface Services {
  timelines: Timelines;
  subscriptions: Subscriptions;
  ingest: Ingest;
  summaries: Summaries;
  subjects: Subjects;
  metrics: Metrics;
  cards: Cards;
  catalogs: Catalogs;
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
  file_billing_v1_test_clock_service,
  file_billing_v1_health_service,
  file_grpc_reflection_v1_reflection,
];

/** The services whose google.api.http annotations become REST routes. */
export const restServices = [
  SubjectService,
  PricingMetricService,
  RateCardService,
  RateCatalogService,
  UsageEventService,
  SubscriptionService,
  SubscriptionTimelineService,
  InvoiceService,
  CustomerAccessService,
  TestClockService,
  HealthService,
];

export function routes(services: Services) {
  return (router: ConnectRouter) => {
    router.service(HealthService, healthService());
    router.service(SubjectService, subjectService(services.subjects));
    router.service(PricingMetricService, pricingMetricService(services.metrics, services.summaries));
    router.service(UsageEventService, usageEventService(services.ingest));
    router.service(SubscriptionService, subscriptionService(services.subscriptions));
    router.service(SubscriptionTimelineService, subscriptionTimelineService(services.timelines));
    router.service(InvoiceService, invoiceService(services.subscriptions));
    router.service(CustomerAccessService, customerAccessService(services.subscriptions));
    router.service(TestClockService, testClockService(services.subscriptions));
    router.service(RateCardService, rateCardService(services.cards));
    router.service(RateCatalogService, rateCatalogService(services.catalogs));
    router.service(ServerReflection, reflectionService(servedFiles));
  };
}
