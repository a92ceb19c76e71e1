/**
 * Composition root: config → database → stores → domain services → router → one listener.
 * main.ts runs it; tests and benchmarks start it on port 0.
 */
import { createConnectRouter } from "@connectrpc/connect";
import { ensureBootstrapKey } from "./billing/bootstrap.js";
import { BillingError } from "./billing/errors.js";
import { PricingMetricService } from "./billing/catalog/metrics.js";
import { RateCardService, type RateCardStore } from "./billing/catalog/rate-cards.js";
import { RateCatalogService } from "./billing/catalog/rate-catalogs.js";
import { IngestService, SummaryService } from "./billing/metering/usage.js";
import { SubjectService } from "./billing/subjects.js";
import { BillingEngine } from "./billing/subscriptions/engine.js";
import { BillingStates } from "./billing/subscriptions/billing-state.js";
import { SubscriptionChanges } from "./billing/subscriptions/changes.js";
import { Checkouts } from "./billing/subscriptions/checkout.js";
import { HostedCheckout } from "./billing/subscriptions/hosted-checkout.js";
import { Invoices } from "./billing/subscriptions/invoices.js";
import { Lookups } from "./billing/subscriptions/lookups.js";
import { CustomerPortal } from "./billing/subscriptions/portal.js";
import { Pauses } from "./billing/subscriptions/pauses.js";
import { Scheduler } from "./billing/subscriptions/scheduler.js";
import { Subscriptions } from "./billing/subscriptions/subscribe.js";
import { Terms } from "./billing/subscriptions/terms.js";
import { TestClocks } from "./billing/subscriptions/test-clocks.js";
import { TimelineService } from "./billing/subscriptions/timelines.js";
import { builtInPaymentProviders } from "./billing/subscriptions/payments.js";
import type { Config } from "./config.js";
import { type Database, createDatabase } from "./db/datasource.js";
import { SqlAuthStore } from "./db/stores/auth-store.js";
import { SqlPricingMetricStore } from "./db/stores/metric-store.js";
import { SqlRateCardStore } from "./db/stores/rate-card-store.js";
import { SqlRateCatalogStore } from "./db/stores/rate-catalog-store.js";
import { sqlBillingStores } from "./db/stores/billing-stores.js";
import { SqlSubjectStore } from "./db/stores/subject-store.js";
import { SqlUsageStore } from "./db/stores/usage-store.js";
import { SqlThresholdStore, SqlWebhookStore } from "./db/stores/webhook-store.js";
import { DEFAULT_THRESHOLD_PERCENTS, UsageThresholds } from "./billing/events/thresholds.js";
import { DEFAULT_DELIVERY_OPTIONS, DeliveryWorker } from "./billing/events/delivery.js";
import { WebhookEndpoints } from "./billing/events/endpoints.js";
import { EventFeed } from "./billing/events/feed.js";
import { hostGuard } from "./webhooks/guard.js";
import { HttpWebhookSender } from "./webhooks/http-sender.js";
import { type Logger, createLogger } from "./log.js";
import { Admission, BULK_BODY_BYTES, bodyLimit } from "./limits.js";
import { createRestGateway } from "./rest/gateway.js";
import { createPages } from "./rest/pages.js";
import { createPortalPages } from "./rest/portal-pages.js";
import { KeyVerifier, authInterceptor, authenticateKey } from "./rpc/auth.js";
import { RateLimiter } from "./ratelimit.js";
import { ACCEPTED_COMPRESSION } from "./rpc/compression.js";
import { errorInterceptor } from "./rpc/errors.js";
import { createDirectCaller } from "./rpc/direct.js";
import { eventEncoder } from "./rpc/event-payload.js";
import { createUnaryInvoker } from "./rpc/invoke.js";
import { checkRequestMessages } from "./rpc/messages.js";
import { StrictJsonDecoder } from "./rpc/unicode.js";
import { implementations, restServices, routes } from "./rpc/routes.js";
import { type Listener, createRequestHandler, listen } from "./server.js";

/** How long /healthz waits for the database's answer before it reports 503. */
export const HEALTH_TIMEOUT_MS = 1_500;
/** How often an open grpc.health.v1 Watch looks at the database again. */
export const HEALTH_WATCH_INTERVAL_MS = 1_000;

export interface App {
  port: number;
  url: string;
  stop(): Promise<void>;
}

/**
 * The subscription use cases over one engine, each given what it needs; the scheduler runs what
 * is due (cycle closes, timeline transitions) for the server's interval and for test clocks alike.
 */
export function wireSubscriptions(
  engine: BillingEngine,
  cards: Pick<RateCardStore, "get">,
  publicBaseUrl: () => string,
  log?: Logger,
  thresholds?: { check(clockId: string | null): Promise<number> },
) {
  const lookups = new Lookups(engine, cards);
  const terms = new Terms(lookups);
  const checkouts = new Checkouts(lookups, publicBaseUrl);
  const subscriptions = new Subscriptions(lookups, terms, checkouts);
  const changes = new SubscriptionChanges(lookups, terms, checkouts);
  const timelines = new TimelineService({ lookups, terms, checkouts, subscriptions, changes });
  const hostedCheckout = new HostedCheckout(lookups, subscriptions, changes, timelines);
  const invoices = new Invoices(lookups, publicBaseUrl);
  const billingStates = new BillingStates(lookups);
  const portal = new CustomerPortal(lookups, changes, publicBaseUrl);
  const pauses = new Pauses(lookups, changes);
  const scheduler = new Scheduler(
    engine,
    timelines,
    pauses,
    (id, err) =>
      // A billing rule's refusal (e.g. a cycle not closed yet) is explained by its message; retried next run.
      log?.error("subscription timeline transition failed", { timeline: id, ...(err instanceof BillingError ? { error: err.message } : { err }) }),
    thresholds,
  );
  const clocks = new TestClocks(lookups, scheduler);
  return { lookups, terms, checkouts, subscriptions, changes, pauses, timelines, hostedCheckout, invoices, billingStates, portal, scheduler, clocks };
}

/** Stores and domain services over one database: what every server (and the benchmarks) run. */
export interface EventOptions {
  /** Whether webhook endpoint URLs may point at this service's own host or private addresses. */
  allowPrivateWebhookHosts?: boolean;
  /** Percentages of included units that fire usage.threshold_crossed. */
  thresholdPercents?: number[];
  /** How often real-time subscriptions' thresholds are checked (test clocks: at each advance). */
  thresholdCheckMs?: number;
}

export function buildServices(db: Database, publicBaseUrl: () => string, now: () => Date, log?: Logger, ingestCommitsInFlight = 2, eventOptions: EventOptions = {}) {
  // Events freeze their resource as the REST API returns it (src/rpc/event-payload.ts), stamped in real time.
  const encode = eventEncoder(publicBaseUrl);
  const billingStores = sqlBillingStores(db.sql, db.entities, encode);
  const subjects = new SubjectService(new SqlSubjectStore(db.sql, db.entities, encode), now, {
    clockExists: async (env, id) => (await billingStores.clocks.get(env, id)) !== undefined,
    deleteBlocker: async (env, id) => {
      const running = [...(await billingStores.subscriptions.active(env, id)), ...(await billingStores.subscriptions.paused(env, id))];
      return running.length > 0 ? `the subject has an active or paused subscription (${running.map((x) => x.id).join(", ")}); cancel it first` : undefined;
    },
  });
  const metricStore = new SqlPricingMetricStore(db.sql, db.entities);
  const catalogStore = new SqlRateCatalogStore(db.sql, db.entities);
  const metrics = new PricingMetricService(metricStore, now);
  const cardStore = new SqlRateCardStore(db.sql, db.entities);
  const cards = new RateCardService(cardStore, metricStore, catalogStore, now);
  const catalogs = new RateCatalogService(catalogStore, metricStore, now);
  const usageStore = new SqlUsageStore(db.sql, db.entities, (err, attempt) => log?.warn("usage ingest transaction retried", { attempt, err }));
  const ingest = new IngestService(usageStore, now, { maxInFlightPerEnvironment: ingestCommitsInFlight });
  const summaries = new SummaryService(usageStore, metrics, subjects);
  const engine = new BillingEngine(billingStores, { cards: cardStore, catalogs: catalogStore, metrics: metricStore }, summaries, builtInPaymentProviders(), now, {
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
  });
  const thresholds = new UsageThresholds(
    engine,
    new SqlThresholdStore(db.sql, db.entities),
    eventOptions.thresholdPercents ?? DEFAULT_THRESHOLD_PERCENTS,
    eventOptions.thresholdCheckMs ?? 60_000,
    (id, err) => log?.error("usage threshold check failed", { subscription: id, err }),
  );
  const { subscriptions, changes, pauses, timelines, hostedCheckout, invoices, billingStates, portal, clocks, scheduler } = wireSubscriptions(engine, cardStore, publicBaseUrl, log, thresholds);
  // Outgoing events: endpoints may not aim at this service's own host unless configured (webhooks/guard.ts).
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
  const events = new EventFeed(webhookStore, () => new Date());
  return {
    subjects,
    metrics,
    cards,
    catalogs,
    ingest,
    summaries,
    subscriptions,
    changes,
    pauses,
    timelines,
    hostedCheckout,
    invoices,
    billingStates,
    portal,
    clocks,
    scheduler,
    engine,
    webhookEndpoints,
    events,
    webhookStore,
    guard,
  };
}

export async function startApp(config: Config, log: Logger = createLogger(config.logLevel)): Promise<App> {
  const db = await createDatabase(config.databaseUrl);
  await db.dataSource.initialize();
  try {
    if (config.runMigrations) {
      const ran = await db.dataSource.runMigrations({ transaction: "each" });
      if (ran.length > 0) log.info("migrations applied", { migrations: ran.map((m) => m.name) });
    }
    const now = () => new Date();
    const authStore = new SqlAuthStore(db.sql, db.entities);
    if (config.bootstrapApiKey) {
      await ensureBootstrapKey(authStore, config.bootstrapApiKey, config.bootstrapEnvironmentMode, now());
    }
    let baseUrl = config.publicBaseUrl ?? `http://localhost:${config.port}`;
    const { engine, scheduler, webhookStore, guard, ...services } = buildServices(db, () => baseUrl, now, log, config.ingestCommitsInFlight, {
      allowPrivateWebhookHosts: config.webhooks.allowPrivateHosts,
      thresholdPercents: config.webhooks.thresholdPercents,
      thresholdCheckMs: config.webhooks.thresholdCheckMs,
    });

    const verifier = new KeyVerifier(authStore, config.apiKeyCacheMs);
    // Connect reads JSON bodies through textDecoder: strict UTF-8 and no lone surrogates (rpc/unicode.ts).
    const jsonOptions = { ignoreUnknownFields: true, useProtoFieldName: true, alwaysEmitImplicit: true, textDecoder: new StrictJsonDecoder() };
    // One list of interceptors for every call path: connect-node's handlers, the REST bridge and
    // the lean unary gRPC path (rpc/invoke.ts).
    const interceptors = [errorInterceptor(log), authInterceptor(verifier)];
    const router = createConnectRouter({
      interceptors,
      jsonOptions,
      // The largest body any method takes; each method has its own, smaller or equal bound
      // (limits.ts), which the server checks for unary bodies and Connect for each message of a stream.
      readMaxBytes: BULK_BODY_BYTES,
      // gzip and brotli both ways, as connect-node's adapter offers by default. A compressed
      // message is bounded after decompression by its method's readMaxBytes (routes below).
      acceptCompression: ACCEPTED_COMPRESSION,
    });
    // Bounded: a frozen or locked database makes /healthz a 503 within HEALTH_TIMEOUT_MS, not a hang.
    const health = () => db.ping(HEALTH_TIMEOUT_MS);
    const shutdown = new AbortController();
    const specs = implementations(services, { check: health, watchIntervalMs: HEALTH_WATCH_INTERVAL_MS, stopped: shutdown.signal });
    routes(specs, bodyLimit, jsonOptions)(router);
    // Every request message read as REST reads it: JSON by the one JSON reader, binary that does
    // not decode invalid_argument rather than internal (src/rpc/messages.ts).
    checkRequestMessages(router, BULK_BODY_BYTES);
    const invoke = createUnaryInvoker(specs, interceptors);
    const rest = createRestGateway(restServices, createDirectCaller(invoke, log, jsonOptions), log);
    const checkoutPages = createPages(services.hostedCheckout, services.invoices, log);
    const portalPages = createPortalPages(services.portal, log);
    const pages = (req: Parameters<typeof checkoutPages>[0], res: Parameters<typeof checkoutPages>[1]) => portalPages(req, res) || checkoutPages(req, res);
    const admission = new Admission(config.maxRequestsInFlight, config.maxRequestBytesInFlight, config.maxBulkRequestsInFlight, config.bulkQueueTimeoutMs);
    const handler = createRequestHandler({
      router,
      rest,
      pages,
      health,
      log,
      // From the headers alone, before any of the body is read (DESIGN §10).
      authenticate: (method, key) => authenticateKey(verifier, method.parent, method, key),
      admission,
      rateLimiter: new RateLimiter(),
      rateLimits: config.rateLimits,
      // Unary binary gRPC through the lean path into the same interceptors (rpc/grpc-unary.ts).
      invoke,
    });
    const listener: Listener = await listen(handler, config.port, config.connections);
    // The scheduler: closes due billing cycles on real time. Safe with several servers (row locks
    // and the unique invoice key), so every server may run it.
    let ticking = false;
    const timer =
      config.schedulerIntervalMs > 0
        ? setInterval(() => {
            if (ticking) return;
            ticking = true;
            scheduler
              .runDue(now(), null)
              .then((n) => n > 0 && log.info("billing cycles closed", { count: n }))
              .catch((err) => log.error("scheduler run failed", { err }))
              .finally(() => (ticking = false));
          }, config.schedulerIntervalMs)
        : undefined;
    // The webhook delivery worker: safe with several servers (deliveries are claimed under a row
    // lock, then leased), so every server may run it.
    const sender = new HttpWebhookSender(guard);
    const worker = new DeliveryWorker(webhookStore, sender, now, {
      ...DEFAULT_DELIVERY_OPTIONS,
      timeoutMs: config.webhooks.timeoutMs,
      retryBaseMs: config.webhooks.retryBaseMs,
      retryWindowMs: config.webhooks.retryWindowSeconds * 1000,
    });
    let delivering = false;
    const deliveryTimer =
      config.webhooks.deliveryIntervalMs > 0
        ? setInterval(() => {
            if (delivering) return;
            delivering = true;
            worker
              .runDue()
              .catch((err) => log.error("webhook delivery run failed", { err }))
              .finally(() => (delivering = false));
          }, config.webhooks.deliveryIntervalMs)
        : undefined;
    if (config.publicBaseUrl === undefined) baseUrl = `http://localhost:${listener.port}`;
    log.info("listening", { port: listener.port, store: db.dialect });

    let stopping: Promise<void> | undefined;
    return {
      port: listener.port,
      url: `http://127.0.0.1:${listener.port}`,
      stop() {
        stopping ??= (async () => {
          if (timer) clearInterval(timer);
          if (deliveryTimer) clearInterval(deliveryTimer);
          shutdown.abort(); // open health Watch calls end rather than hold the shutdown
          await listener.close();
          while (ticking || delivering) await new Promise((r) => setTimeout(r, 20));
          sender.close();
          await db.close();
        })();
        return stopping;
      },
    };
  } catch (err) {
    await db.dataSource.destroy().catch(() => {});
    throw err;
  }
}
