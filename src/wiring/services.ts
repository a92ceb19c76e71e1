/**
 * The domain wired over its stores: every store over one database, the domain services over
 * them, and the subscription use cases over one billing engine. The server (src/app.ts), the CLI,
 * tests and benchmarks build their services here.
 */
import { BillingError } from "../billing/errors.js";
import { PricingMetricService } from "../billing/catalog/metrics.js";
import { RateCardService, type RateCardStore } from "../billing/catalog/rate-cards.js";
import { RateCatalogService } from "../billing/catalog/rate-catalogs.js";
import { IngestService, SummaryService } from "../billing/metering/usage.js";
import { SubjectService } from "../billing/subjects.js";
import { BillingEngine } from "../billing/subscriptions/engine.js";
import { BillingStates } from "../billing/subscriptions/billing-state.js";
import { SubscriptionChanges } from "../billing/subscriptions/changes.js";
import { Checkouts } from "../billing/subscriptions/checkout.js";
import { CheckoutExpiry } from "../billing/subscriptions/checkout-expiry.js";
import { HostedCheckout } from "../billing/subscriptions/hosted-checkout.js";
import { Invoices } from "../billing/subscriptions/invoices.js";
import { Lookups } from "../billing/subscriptions/lookups.js";
import { CustomerPortal } from "../billing/subscriptions/portal.js";
import { Pauses } from "../billing/subscriptions/pauses.js";
import { type RunProgress, Scheduler, type SchedulerCredits } from "../billing/subscriptions/scheduler.js";
import { Subscriptions } from "../billing/subscriptions/subscribe.js";
import { CheckoutPreviews } from "../billing/subscriptions/checkout-preview.js";
import { Terms } from "../billing/subscriptions/terms.js";
import { TestClocks } from "../billing/subscriptions/test-clocks.js";
import { TimelineService } from "../billing/subscriptions/timelines.js";
import { DEFAULT_THRESHOLD_PERCENTS, UsageThresholds } from "../billing/events/thresholds.js";
import { WebhookEndpoints } from "../billing/events/endpoints.js";
import { EventFeed } from "../billing/events/feed.js";
import type { Database } from "../db/datasource.js";
import { SqlPricingMetricStore } from "../db/stores/metric-store.js";
import { SqlRateCardStore } from "../db/stores/rate-card-store.js";
import { SqlRateCatalogStore } from "../db/stores/rate-catalog-store.js";
import { sqlBillingStores } from "../db/stores/billing-stores.js";
import { SqlSubjectStore } from "../db/stores/subject-store.js";
import { SqlUsageStore } from "../db/stores/usage-store.js";
import { SqlThresholdStore } from "../db/stores/threshold-store.js";
import { SqlWebhookStore } from "../db/stores/webhook-store.js";
import type { Logger } from "../log.js";
import type { Metrics } from "../ops/metrics.js";
import type { Tracing } from "../ops/tracing.js";
import { eventEncoder } from "../rpc/event-payload.js";
import type { EventEncoder } from "../billing/events/types.js";
import { Credits } from "../billing/credits/grants.js";
import { CreditPurchases } from "../billing/credits/purchase.js";
import { SqlCreditStore } from "../db/stores/credit-store.js";
import { wireCoupons } from "./coupons.js";
import type { CreditStore } from "../billing/credits/ports.js";
import { watchIngest, wireCreditRealTime } from "./credits.js";
import { wireCreditNotes } from "./credit-notes.js";
import { TaxRates } from "../billing/taxes/rates.js";
import { InvoiceSettingsService } from "../billing/taxes/settings.js";
import { SqlInvoiceSettingsStore, SqlTaxRateStore } from "../db/stores/tax-store.js";
import { hostGuard } from "../webhooks/guard.js";
import { backfillLogger, progressLogger } from "./progress.js";
import { wireDunning } from "./dunning.js";
import { type PaymentOptions, wirePayments } from "./payments.js";
import { wireStripeEndpoints } from "./stripe.js";

/**
 * The subscription use cases over one engine, each given what it needs; the scheduler runs what
 * is due (cycle closes, timeline transitions) for the server's interval and for test clocks alike.
 */
export function wireSubscriptions(
  engine: BillingEngine,
  cards: Pick<RateCardStore, "get">,
  publicBaseUrl: () => string,
  log?: Logger,
  onProgress?: (p: RunProgress) => void,
  thresholds?: { check(clockId: string | null): Promise<number> },
  stopping?: AbortSignal,
  credits?: { store: CreditStore; runs: SchedulerCredits },
) {
  const lookups = new Lookups(engine, cards);
  const terms = new Terms(lookups);
  const checkouts = new Checkouts(lookups, publicBaseUrl);
  const subscriptions = new Subscriptions(lookups, terms, checkouts);
  const changes = new SubscriptionChanges(lookups, terms, checkouts);
  const timelines = new TimelineService({ lookups, terms, checkouts, subscriptions, changes });
  const hostedCheckout = new HostedCheckout(lookups, subscriptions, changes, timelines);
  // What a checkout charges (discounts, tax, credit), shown on its page and as its `amount` when it opens.
  const checkoutPreviews = new CheckoutPreviews(lookups, subscriptions, changes, timelines);
  checkouts.amountOf = async (session) => (await checkoutPreviews.preview(session))?.amountDue;
  hostedCheckout.onStale = (c, reason) => log?.warn("checkout not completed: what it was for can no longer happen", { checkout: c.id, kind: c.kind, reason });
  hostedCheckout.onChargeFailed = (c, err) => log?.warn("checkout completed, its charge not made: planned for dunning", { checkout: c.id, kind: c.kind, err });
  hostedCheckout.publicBaseUrl = publicBaseUrl;
  const invoices = new Invoices(lookups, publicBaseUrl);
  const billingStates = new BillingStates(lookups, credits?.store);
  const portal = new CustomerPortal(lookups, changes, publicBaseUrl);
  const pauses = new Pauses(lookups, changes);
  const scheduler = new Scheduler(
    engine,
    timelines,
    pauses,
    (id, err) =>
      // A billing rule's refusal (e.g. a cycle not closed yet) is explained by its message; retried next run.
      log?.error("subscription timeline transition failed", { timeline: id, ...(err instanceof BillingError ? { error: err.message } : { err }) }),
    onProgress,
    thresholds,
    credits?.runs,
  );
  // Open checkouts past their expiry end on real time; a credit purchase's ends with its checkout.
  scheduler.realTimeSweeps.push(new CheckoutExpiry(engine.stores, engine.stores.checkouts, (tx, c, at) => hostedCheckout.endPurchase(tx, c, "The checkout expired: nothing was charged.", at, true)));
  const clocks = new TestClocks(lookups, scheduler, stopping);
  return { lookups, terms, checkouts, subscriptions, changes, pauses, timelines, hostedCheckout, checkoutPreviews, invoices, billingStates, portal, scheduler, clocks };
}

/** Credits (DESIGN §14) over their store; paid grants are bought through invoices and hosted checkouts. */
function wireCredits(
  late: { store: CreditStore; bind(c: Credits): void },
  subs: Pick<ReturnType<typeof wireSubscriptions>, "lookups" | "checkouts" | "hostedCheckout">,
  cancels?: CreditPurchases["cancels"],
  log?: Logger,
) {
  const purchases = new CreditPurchases(subs.lookups, subs.checkouts);
  purchases.cancels = cancels;
  purchases.onChargeFailed = (g, err) => log?.warn("credit purchase written, its charge not made: planned for dunning", { grant: g.id, invoice: g.invoiceId, err });
  purchases.onReadFailed = (g, err) => log?.warn("credit purchase charged, its grant not read back: answered as known", { grant: g.id, invoice: g.invoiceId, err });
  purchases.onEndFailed = (g, err) => log?.error("credit purchase whose checkout did not open could not be ended: its invoice stays open, never charged", { grant: g.id, invoice: g.invoiceId, err });
  subs.hostedCheckout.purchases = purchases;
  const credits = new Credits(late.store, subs.lookups, purchases);
  late.bind(credits);
  return { credits, creditStore: late.store };
}

/**
 * What the scheduler and billing state need of credits, made before the subscription use cases
 * (the scheduler is one of them): the store, and the real-time parts (wiring/credits.ts) whose
 * expiry and purchases are the credit use cases made after them (`bind`). Each auto top-up is a
 * purchase keyed by its crossing, so a repeat never buys twice.
 */
function creditsInRealTime(db: Database, encode: EventEncoder, engine: BillingEngine, cards: Pick<RateCardStore, "get">, ingest: IngestService, log?: Logger, stopping?: AbortSignal) {
  const store = new SqlCreditStore(db.sql, db.entities, encode);
  let uses: Credits | undefined;
  const bound = (): Credits => {
    if (!uses) throw new Error("credits are not wired yet");
    return uses;
  };
  const parts = wireCreditRealTime({
    sql: db.sql,
    engine,
    lookups: new Lookups(engine, cards),
    store,
    // The auto top-up passes its crossing's key, which is the purchase's idempotency key.
    purchases: { purchase: (...a) => bound().purchases.purchase(...a) },
    expireDue: (at, clockId) => bound().expireDue(at, clockId),
    log,
    stopping,
  });
  watchIngest(ingest, parts.watch);
  const bind = (c: Credits) => {
    uses = c;
    c.changed = (environmentId, subjectId) => parts.watch.changed(environmentId, subjectId);
  };
  return { store, runs: parts.runs, watch: parts.watch, bind };
}

export interface EventOptions {
  /** Whether webhook endpoint URLs may point at this service's own host or private addresses. */
  allowPrivateWebhookHosts?: boolean;
  /** Percentages of included units that fire usage.threshold_crossed. */
  thresholdPercents?: number[];
  /** How often real-time subscriptions' thresholds are checked (test clocks: at each advance). */
  thresholdCheckMs?: number;
}

/** Outgoing events: the feed, the endpoints, and the guard that keeps endpoints off this service's own host unless configured (webhooks/guard.ts). */
function wireOutgoingEvents(db: Database, encode: ReturnType<typeof eventEncoder>, publicBaseUrl: () => string, eventOptions: EventOptions) {
  const guard = hostGuard(eventOptions.allowPrivateWebhookHosts ?? false, () => {
    try {
      const u = new URL(publicBaseUrl());
      return [u.host, u.hostname];
    } catch {
      return [];
    }
  });
  const webhookStore = new SqlWebhookStore(db.sql, db.entities, encode, () => new Date());
  const webhookEndpoints = new WebhookEndpoints(
    webhookStore,
    (u) => guard.checkUrl(u),
    () => new Date(),
  );
  return { guard, webhookStore, webhookEndpoints, events: new EventFeed(webhookStore, () => new Date()) };
}

/**
 * Stores and domain services over one database. `ops`: the server's metrics (events ingested,
 * group commits) and what is told of the real-time scheduler's progress (readiness); `eventOptions`:
 * outgoing events (webhook host guard, usage thresholds).
 */
/** The usage thresholds' checks (`usage.threshold_crossed` events) over their store. */
function usageThresholds(db: Database, engine: BillingEngine, eventOptions: EventOptions, log?: Logger): UsageThresholds {
  return new UsageThresholds(engine, new SqlThresholdStore(db.sql, db.entities), eventOptions.thresholdPercents ?? DEFAULT_THRESHOLD_PERCENTS, eventOptions.thresholdCheckMs ?? 60_000, (id, err) =>
    log?.error("usage threshold check failed", { subscription: id, err }),
  );
}

export function buildServices(
  db: Database,
  publicBaseUrl: () => string,
  now: () => Date,
  log?: Logger,
  ingestCommitsInFlight = 2,
  ops: { metrics?: Metrics; alive?: () => void; stopping?: AbortSignal; tracing?: Tracing | undefined } & Pick<PaymentOptions, "secrets" | "stripe"> = {},
  eventOptions: EventOptions = {},
) {
  const { metrics, tracing } = ops;
  // Events freeze their resource as the REST API returns it (src/rpc/event-payload.ts), stamped in real time.
  const encode = eventEncoder(publicBaseUrl);
  const billingStores = sqlBillingStores(db.sql, db.entities, encode);
  // Taxes (DESIGN §15): subjects' billing details and rate cards' default tax rates name active tax rates.
  const taxRateStore = new SqlTaxRateStore(db.sql, db.entities);
  const taxRates = new TaxRates(taxRateStore, now);
  const invoiceSettings = new InvoiceSettingsService(new SqlInvoiceSettingsStore(db.sql));
  const subjects = new SubjectService(new SqlSubjectStore(db.sql, db.entities, encode), now, {
    clockExists: async (env, id) => (await billingStores.clocks.get(env, id)) !== undefined,
    deleteBlocker: async (env, id) => {
      const running = await billingStores.subscriptions.running(env, id);
      return running.length > 0 ? `the subject has an active or paused subscription (${running.map((x) => x.id).join(", ")}); cancel it first` : undefined;
    },
    taxRates: taxRateStore.byIds,
  });
  const metricStore = new SqlPricingMetricStore(db.sql, db.entities, log && backfillLogger(log));
  const catalogStore = new SqlRateCatalogStore(db.sql, db.entities);
  const pricingMetrics = new PricingMetricService(metricStore, now);
  const cardStore = new SqlRateCardStore(db.sql, db.entities);
  const cards = new RateCardService(cardStore, metricStore, catalogStore, now, taxRateStore.byIds);
  const catalogs = new RateCatalogService(catalogStore, metricStore, now);
  const usageStore = new SqlUsageStore(db.sql, db.entities, (err, attempt) => log?.warn("usage ingest transaction retried", { attempt, err }));
  const debug = log?.enabled("debug") ?? false;
  const ingest = new IngestService(usageStore, now, {
    maxInFlightPerEnvironment: ingestCommitsInFlight,
    outcomes: metrics && ((a, d, r) => metrics.countEvents(a, d, r)),
    rejectedNotStored: (err) => log?.warn("rejected usage events not kept for the dashboard", { err }),
    committed:
      metrics || debug
        ? (environment, events, requests, ms) => {
            metrics?.observeCommit(events, requests);
            if (debug) log?.debug("usage events committed", { environment, events, requests, ms: Math.round(ms * 100) / 100 });
          }
        : undefined,
  });
  const summaries = new SummaryService(usageStore, pricingMetrics, subjects);
  const { payments, paymentSettings } = wirePayments(db, publicBaseUrl, now, { secrets: ops.secrets, tracing, stripe: ops.stripe });
  const engine = new BillingEngine(billingStores, { cards: cardStore, catalogs: catalogStore, metrics: metricStore }, summaries, payments, now, {
    setAside: (s, failure, err) =>
      log?.error("subscription set aside: its billing cycle could not be closed", {
        subscription: s.id,
        environment: s.environmentId,
        attempts: failure.attempts,
        retry_at: failure.retryAt.toISOString(),
        error: failure.message,
        // A stack only for the unexpected: a billing rule's refusal is explained by its message.
        ...(err instanceof BillingError ? {} : { err }),
      }),
    settleFailed: (invoice, err) => log?.error("charging an invoice failed; it stays open", { invoice, err }),
    finalizeFailed: (id, err) => log?.error("finalizing a draft invoice (or billing an ended subscription's late usage) failed; tried again on the next run", { id, err }),
    resumeFailed: (subscription, err) => log?.error("resuming a paused subscription failed; tried again on the next run", { subscription, err }),
  });
  const thresholds = usageThresholds(db, engine, eventOptions, log);
  const late = creditsInRealTime(db, encode, engine, cardStore, ingest, log, ops.stopping);
  const { subscriptions, changes, pauses, timelines, hostedCheckout, checkoutPreviews, invoices, billingStates, portal, clocks, scheduler, lookups, checkouts } = wireSubscriptions(
    engine,
    cardStore,
    publicBaseUrl,
    log,
    log && progressLogger(log, ops.alive),
    thresholds,
    ops.stopping,
    late,
  );
  const dunning = wireDunning(db, engine, { changes, pauses, portal, scheduler, invoices }, log);
  const { credits, creditStore } = wireCredits(late, { lookups, checkouts, hostedCheckout }, dunning.cancels, log);
  const creditNotes = wireCreditNotes(db, encode, lookups, publicBaseUrl, late.watch, dunning.cancels);
  const { guard, webhookStore, webhookEndpoints, events } = wireOutgoingEvents(db, encode, publicBaseUrl, eventOptions);
  // The hosted checkout and the portal, with Stripe's webhooks and return from Checkout (DESIGN §16).
  const stripe = wireStripeEndpoints({ stores: engine.stores, paymentSettings, hostedCheckout, portal, stripe: ops.stripe, now, log, publicBaseUrl, dunning, customers: { db, subjects } });
  // A provider's refund events move their credit note's refund status (credit-notes/refund-status.ts).
  stripe.providerEvents.refunds = (environmentId, update, event) => creditNotes.refundUpdated(environmentId, update, event);
  return {
    subjects,
    metrics: pricingMetrics,
    cards,
    catalogs,
    ingest,
    summaries,
    subscriptions,
    changes,
    pauses,
    timelines,
    checkoutPreviews,
    invoices,
    billingStates,
    clocks,
    scheduler,
    engine,
    webhookEndpoints,
    events,
    webhookStore,
    guard,
    credits,
    creditStore,
    creditNotes,
    creditWatch: late.watch,
    coupons: wireCoupons(db, encode, lookups, subscriptions),
    taxRates,
    invoiceSettings,
    paymentSettings,
    dunning,
    ...stripe,
  };
}
