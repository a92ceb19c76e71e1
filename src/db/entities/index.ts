/**
 * Table definitions. EntitySchema (not decorators) keeps column types explicit and lets the
 * same definitions load under tsx without decorator metadata. Rows are plain objects; stores
 * map them to domain types. One file per aggregate; this one puts them together.
 */
import type { EntitySchemaColumnOptions } from "typeorm";
import { DEFAULT_BINARY_COLLATION, type Dialect, withBinaryText } from "../columns.js";
import { environmentsEntities } from "./environments.js";
import { subjectsEntities } from "./subjects.js";
import { catalogEntities } from "./catalog.js";
import { usageEntities } from "./usage.js";
import { subscriptionsEntities } from "./subscriptions.js";
import { invoicesEntities } from "./invoices.js";
import { paymentMethodsEntities } from "./payment-methods.js";
import { checkoutsEntities } from "./checkouts.js";
import { portalSessionsEntities } from "./portal-sessions.js";
import { dashboardSessionsEntities } from "./dashboard-sessions.js";
import { idempotencyEntities } from "./idempotency.js";
import { testClocksEntities } from "./test-clocks.js";
import { timelinesEntities } from "./timelines.js";
import { webhooksEntities } from "./webhooks.js";
import { creditsEntities } from "./credits.js";
import { paymentsEntities } from "./payments.js";
import { creditNotesEntities } from "./credit-notes.js";
import { couponsEntities } from "./coupons.js";
import { taxesEntities } from "./taxes.js";

export type { EnvironmentRow, ApiKeyRow } from "./environments.js";
export type { SubjectRow } from "./subjects.js";
export type { PricingMetricRow, RateCardRow, RateCatalogRow, PriceColumns, RateRow, RateCellRow } from "./catalog.js";
export type { UsageEventRow, UsageRollupRow, UsageUniqueValueRow } from "./usage.js";
export type { SubscriptionRow } from "./subscriptions.js";
export type { InvoiceRow, InvoiceLineRow, InvoiceSequenceRow } from "./invoices.js";
export type { PaymentMethodRow } from "./payment-methods.js";
export type { CheckoutRow } from "./checkouts.js";
export type { PortalSessionRow } from "./portal-sessions.js";
export type { DashboardSessionRow } from "./dashboard-sessions.js";
export type { IdempotencyKeyRow } from "./idempotency.js";
export type { TestClockRow } from "./test-clocks.js";
export type { TimelineRow, TimelineItemRow } from "./timelines.js";
export type { CreditGrantRow, CreditLedgerRow, CreditSettingsRow, CreditAlertStateRow } from "./credits.js";
export type { CreditNoteRow } from "./credit-notes.js";
export type { CouponRow, DiscountRow } from "./coupons.js";
export type { TaxRateRow } from "./taxes.js";
export type { EventRow, WebhookEndpointRow, WebhookDeliveryRow, WebhookAttemptRow } from "./webhooks.js";

/**
 * The tables of `dialect`. On MySQL every text column has `binaryCollation` (the server's binary
 * no-pad collation, see columns.ts), so identifiers compare byte for byte as on SQLite.
 */
export function buildEntities(dialect: Dialect, binaryCollation: string = DEFAULT_BINARY_COLLATION) {
  const exact = <T extends Record<string, EntitySchemaColumnOptions>>(columns: T): T => withBinaryText(dialect, binaryCollation, columns);
  const { Environment, ApiKey } = environmentsEntities(dialect, exact);
  const { Subject } = subjectsEntities(dialect, exact);
  const { PricingMetric, RateCard, RateCatalog, Rate, RateCell } = catalogEntities(dialect, exact);
  const { UsageEvent, UsageRollup, UsageRollupMinute, IngestHour, RejectedUsageEvent, UsageUniqueValue } = usageEntities(dialect, exact);
  const { Subscription } = subscriptionsEntities(dialect, exact);
  const { Invoice, InvoiceLine, InvoiceSequence } = invoicesEntities(dialect, exact);
  const { PaymentMethod } = paymentMethodsEntities(dialect, exact);
  const { Checkout } = checkoutsEntities(dialect, exact);
  const { PortalSession } = portalSessionsEntities(dialect, exact);
  const { DashboardSession } = dashboardSessionsEntities(dialect, exact);
  const { IdempotencyKey } = idempotencyEntities(dialect, exact);
  const { TestClock } = testClocksEntities(dialect, exact);
  const { Timeline, TimelineItem } = timelinesEntities(dialect, exact);
  const { Event, WebhookEndpoint, WebhookDelivery, WebhookAttempt, UsageThresholdMark } = webhooksEntities(dialect, exact);
  const { CreditGrant, CreditLedgerEntry, CreditSettings, CreditAlertState } = creditsEntities(dialect, exact);
  const { CreditNote } = creditNotesEntities(dialect, exact);
  const { Coupon, Discount } = couponsEntities(dialect, exact);
  const { TaxRate } = taxesEntities(dialect, exact);

  const { PaymentSettings, ProviderCustomer, ProviderEvent, CarriedDebit } = paymentsEntities(dialect, exact);

  return {
    PaymentSettings,
    ProviderCustomer,
    ProviderEvent,
    CarriedDebit,
    Timeline,
    TimelineItem,
    Environment,
    ApiKey,
    Subject,
    PricingMetric,
    RateCard,
    RateCatalog,
    Rate,
    RateCell,
    UsageEvent,
    UsageRollup,
    UsageRollupMinute,
    IngestHour,
    RejectedUsageEvent,
    UsageUniqueValue,
    Subscription,
    Invoice,
    InvoiceSequence,
    InvoiceLine,
    PaymentMethod,
    Checkout,
    PortalSession,
    DashboardSession,
    IdempotencyKey,
    TestClock,
    Event,
    WebhookEndpoint,
    WebhookDelivery,
    WebhookAttempt,
    UsageThresholdMark,
    CreditGrant,
    CreditLedgerEntry,
    CreditSettings,
    CreditAlertState,
    CreditNote,
    Coupon,
    Discount,
    TaxRate,
  };
}

export type Entities = ReturnType<typeof buildEntities>;
