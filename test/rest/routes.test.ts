/**
 * Every documented REST path of the resources served so far resolves to an RPC of the contract
 * (from its google.api.http annotation), with the documented method.
 */
import test from "ava";
import { buildRoutes } from "../../src/rest/gateway.js";
import { restServices } from "../../src/rpc/routes.js";

const routes = buildRoutes(restServices);

function resolve(method: string, path: string): string | undefined {
  const r = routes.find((x) => x.httpMethod === method && x.regex.test(path));
  return r ? `${r.method.parent.name}/${r.method.name}` : undefined;
}

// From spec/billing-api.md and spec/sdk-compat.md.
const documented: [string, string, string][] = [
  ["POST", "/subjects", "SubjectService/CreateSubject"],
  ["GET", "/subjects/subj_1", "SubjectService/GetSubject"],
  ["PUT", "/subjects/subj_1", "SubjectService/UpdateSubject"],
  ["GET", "/subjects", "SubjectService/ListSubjects"],
  ["GET", "/subjects/search", "SubjectService/SearchSubjects"],
  ["DELETE", "/subjects/subj_1", "SubjectService/DeleteSubject"],
  ["POST", "/rate-cards", "RateCardService/CreateRateCard"],
  ["GET", "/rate-cards/rc_1", "RateCardService/GetRateCard"],
  ["GET", "/rate-cards", "RateCardService/ListRateCards"],
  ["POST", "/pricing-metrics", "PricingMetricService/CreatePricingMetric"],
  ["GET", "/pricing-metrics/pm_1", "PricingMetricService/GetPricingMetric"],
  ["GET", "/pricing-metrics", "PricingMetricService/ListPricingMetrics"],
  ["POST", "/pricing-metrics/pm_1/summary", "PricingMetricService/CreatePricingMetricSummary"],
  ["POST", "/rate-catalogs", "RateCatalogService/CreateRateCatalog"],
  ["GET", "/rate-catalogs/rcat_1", "RateCatalogService/GetRateCatalog"],
  ["GET", "/rate-catalogs", "RateCatalogService/ListRateCatalogs"],
  ["POST", "/rate-catalogs/rcat_1/add_rates", "RateCatalogService/AddRates"],
  ["GET", "/rate-catalogs/rcat_1/rates", "RateCatalogService/ListCatalogRates"],
  ["POST", "/usage-events", "UsageEventService/CreateUsageEvent"],
  ["POST", "/usage-events/batch", "UsageEventService/CreateUsageEventBatch"],
  ["POST", "/subscriptions", "SubscriptionService/CreateSubscription"],
  ["GET", "/subscriptions/sub_1", "SubscriptionService/GetSubscription"],
  ["GET", "/subscriptions", "SubscriptionService/ListSubscriptions"],
  ["POST", "/subscriptions/sub_1/cancel", "SubscriptionService/CancelSubscription"],
  ["POST", "/subscriptions/sub_1/change-rate-card", "SubscriptionService/ChangeRateCard"],
  ["GET", "/invoices", "InvoiceService/ListInvoices"],
  ["GET", "/customer-access/subj_1/billing-state", "CustomerAccessService/GetBillingState"],
  ["POST", "/customer-portal/sessions", "CustomerPortalService/CreateCustomerPortalSession"],
  ["POST", "/checkout", "CheckoutService/CreateCheckout"],
  ["POST", "/subscription-timelines", "SubscriptionTimelineService/CreateSubscriptionTimeline"],
  ["GET", "/subscription-timelines/stl_1", "SubscriptionTimelineService/GetSubscriptionTimeline"],
  ["GET", "/subscription-timelines", "SubscriptionTimelineService/ListSubscriptionTimelines"],
  ["POST", "/subscription-timelines/stl_1/start", "SubscriptionTimelineService/StartSubscriptionTimeline"],
  ["POST", "/subscription-timelines/stl_1/items", "SubscriptionTimelineService/CreateTimelineItems"],
  ["GET", "/subscription-timelines/stl_1/items", "SubscriptionTimelineService/ListTimelineItems"],
  ["POST", "/test-clocks", "TestClockService/CreateTestClock"],
  ["GET", "/test-clocks/clk_1", "TestClockService/GetTestClock"],
  ["POST", "/test-clocks/clk_1/advance", "TestClockService/AdvanceTestClock"],
  ["GET", "/ping", "HealthService/Ping"],
];

for (const [method, path, rpc] of documented) {
  test(`${method} ${path} → ${rpc}`, (t) => t.is(resolve(method, path), rpc));
}

test("a literal segment wins over a path parameter (/subjects/search is not a subject ID)", (t) => {
  t.is(resolve("GET", "/subjects/search"), "SubjectService/SearchSubjects");
  t.is(resolve("GET", "/subjects/searchable"), "SubjectService/GetSubject");
});

test("every unary RPC of the served services has a REST route", (t) => {
  for (const s of restServices) {
    for (const m of s.methods) {
      if (m.methodKind !== "unary") continue;
      t.true(
        routes.some((r) => r.method === m),
        `${s.typeName}/${m.name}`,
      );
    }
  }
});
