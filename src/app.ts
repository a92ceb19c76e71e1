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
import { type RunProgress, Scheduler } from "./billing/subscriptions/scheduler.js";
import { Subscriptions } from "./billing/subscriptions/subscribe.js";
import { Terms } from "./billing/subscriptions/terms.js";
import { TestClocks } from "./billing/subscriptions/test-clocks.js";
import { TimelineService } from "./billing/subscriptions/timelines.js";
import { builtInPaymentProviders } from "./billing/subscriptions/payments.js";
import type { Config } from "./config.js";
import { type Database, createDatabase } from "./db/datasource.js";
import { migrationsPending, runMigrations } from "./db/migrate.js";
import { SqlAuthStore } from "./db/stores/auth-store.js";
import { SqlPricingMetricStore } from "./db/stores/metric-store.js";
import { SqlRateCardStore } from "./db/stores/rate-card-store.js";
import { SqlRateCatalogStore } from "./db/stores/rate-catalog-store.js";
import { sqlBillingStores } from "./db/stores/billing-stores.js";
import { SqlOpsStore } from "./db/stores/ops-store.js";
import { SqlSubjectStore } from "./db/stores/subject-store.js";
import { SqlUsageStore } from "./db/stores/usage-store.js";
import { watchOutbox } from "./db/stores/outbox.js";
import { SqlThresholdStore } from "./db/stores/threshold-store.js";
import { SqlWebhookStore } from "./db/stores/webhook-store.js";
import { DEFAULT_THRESHOLD_PERCENTS, UsageThresholds } from "./billing/events/thresholds.js";
import { DEFAULT_DELIVERY_OPTIONS, DeliveryWorker } from "./billing/events/delivery.js";
import { WebhookEndpoints } from "./billing/events/endpoints.js";
import { EventFeed } from "./billing/events/feed.js";
import { hostGuard } from "./webhooks/guard.js";
import { HttpWebhookSender } from "./webhooks/http-sender.js";
import { type Logger, createLogger } from "./log.js";
import { Readiness, SchedulerWatch } from "./ops/health.js";
import { buildInfo } from "./ops/build-info.js";
import { Metrics } from "./ops/metrics.js";
import { type Tracing, detached, startTracing, tracedProvider } from "./ops/tracing.js";
import { Admission, BULK_BODY_BYTES, KeylessStreams, bodyLimit } from "./limits.js";
import { createRestGateway } from "./rest/gateway.js";
import { createApiDocs, loadOpenApi } from "./rest/docs.js";
import { FormBodies } from "./rest/form-body.js";
import { createPages } from "./rest/pages.js";
import { createPortalPages } from "./rest/portal-pages.js";
import { createDashboard } from "./rest/dashboard/dashboard.js";
import { OperatorSessions } from "./billing/operator-sessions.js";
import { SqlDashboardSessionStore } from "./db/stores/dashboard-session-store.js";
import { KeyVerifier, authInterceptor, authenticateKey } from "./rpc/auth.js";
import { RateLimiter } from "./ratelimit.js";
import { ACCEPTED_COMPRESSION } from "./rpc/compression.js";
import { errorInterceptor } from "./rpc/errors.js";
import { idempotencyInterceptor } from "./rpc/idempotency.js";

import { SqlIdempotencyStore } from "./db/stores/idempotency-store.js";
import { createDirectCaller } from "./rpc/direct.js";
import { eventEncoder } from "./rpc/event-payload.js";
import { createInvoker } from "./rpc/invoke.js";
import { checkRequestMessages } from "./rpc/messages.js";
import { StrictJsonDecoder } from "./rpc/unicode.js";
import { implementations, restServices, routes } from "./rpc/routes.js";
import { type Listener, createRequestHandler, listen } from "./server.js";
import { describeCertificate, readTlsPair, watchTlsPair } from "./tls.js";

/** How often a server deletes expired idempotency keys. */
const IDEMPOTENCY_SWEEP_MS = 60_000;

/** How long /readyz (and the gRPC health service) waits for the database's answer before it reports 503. */
export const HEALTH_TIMEOUT_MS = 1_500;
/** A long run (migrations, a scheduler catch-up, a test clock advance) logs its progress at most this often. */
export const PROGRESS_EVERY_MS = 5_000;
/** How often an open grpc.health.v1 Watch looks at the database again. */
export const HEALTH_WATCH_INTERVAL_MS = 1_000;

export interface App {
  port: number;
  url: string;
  /** The app's tracing; undefined (no tracing SDK started) without OTEL_EXPORTER_OTLP_ENDPOINT. */
  tracing: Tracing | undefined;
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
  onProgress?: (p: RunProgress) => void,
  thresholds?: { check(clockId: string | null): Promise<number> },
  stopping?: AbortSignal,
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
    onProgress,
    thresholds,
  );
  const clocks = new TestClocks(lookups, scheduler, stopping);
  return { lookups, terms, checkouts, subscriptions, changes, pauses, timelines, hostedCheckout, invoices, billingStates, portal, scheduler, clocks };
}

export interface EventOptions {
  /** Whether webhook endpoint URLs may point at this service's own host or private addresses. */
  allowPrivateWebhookHosts?: boolean;
  /** Percentages of included units that fire usage.threshold_crossed. */
  thresholdPercents?: number[];
  /** How often real-time subscriptions' thresholds are checked (test clocks: at each advance). */
  thresholdCheckMs?: number;
}

/**
 * Stores and domain services over one database. `ops`: the server's metrics (events ingested,
 * group commits) and what is told of the real-time scheduler's progress (readiness); `eventOptions`:
 * outgoing events (webhook host guard, usage thresholds).
 */
export function buildServices(
  db: Database,
  publicBaseUrl: () => string,
  now: () => Date,
  log?: Logger,
  ingestCommitsInFlight = 2,
  ops: { metrics?: Metrics; alive?: () => void; stopping?: AbortSignal; tracing?: Tracing | undefined } = {},
  eventOptions: EventOptions = {},
) {
  const { metrics, tracing } = ops;
  // Events freeze their resource as the REST API returns it (src/rpc/event-payload.ts), stamped in real time.
  const encode = eventEncoder(publicBaseUrl);
  const billingStores = sqlBillingStores(db.sql, db.entities, encode);
  const subjects = new SubjectService(new SqlSubjectStore(db.sql, db.entities, encode), now, {
    clockExists: async (env, id) => (await billingStores.clocks.get(env, id)) !== undefined,
    deleteBlocker: async (env, id) => {
      const running = await billingStores.subscriptions.running(env, id);
      return running.length > 0 ? `the subject has an active or paused subscription (${running.map((x) => x.id).join(", ")}); cancel it first` : undefined;
    },
  });
  const metricStore = new SqlPricingMetricStore(db.sql, db.entities, log && backfillLogger(log));
  const catalogStore = new SqlRateCatalogStore(db.sql, db.entities);
  const pricingMetrics = new PricingMetricService(metricStore, now);
  const cardStore = new SqlRateCardStore(db.sql, db.entities);
  const cards = new RateCardService(cardStore, metricStore, catalogStore, now);
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
  // With tracing on, each charge of a provider is a span of its own.
  const payments = builtInPaymentProviders(tracing && ((p, name) => tracedProvider(p, tracing, name)));
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
  const thresholds = new UsageThresholds(
    engine,
    new SqlThresholdStore(db.sql, db.entities),
    eventOptions.thresholdPercents ?? DEFAULT_THRESHOLD_PERCENTS,
    eventOptions.thresholdCheckMs ?? 60_000,
    (id, err) => log?.error("usage threshold check failed", { subscription: id, err }),
  );
  const { subscriptions, changes, pauses, timelines, hostedCheckout, invoices, billingStates, portal, clocks, scheduler } = wireSubscriptions(
    engine,
    cardStore,
    publicBaseUrl,
    log,
    log && progressLogger(log, ops.alive),
    thresholds,
    ops.stopping,
  );
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
    metrics: pricingMetrics,
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

/**
 * Progress lines of long scheduler runs (a catch-up on real time, a test clock advanced over
 * years): at most every PROGRESS_EVERY_MS while a run goes on, and one at the end of a run that
 * logged any, with the cycles closed so far and the rate. `alive` is told of the real-time
 * scheduler's progress (readiness: a long catch-up is not a stuck scheduler).
 */
export function progressLogger(log: Logger, alive?: () => void): (p: RunProgress) => void {
  const lastLogged = new Map<string, number>();
  return (p) => {
    if (p.clockId === null) alive?.();
    const key = `${p.clockId}@${p.startedAt}`;
    const now = Date.now();
    const last = lastLogged.get(key);
    if (p.done) {
      if (last !== undefined) log.info("scheduler run finished", progressFields(p, now));
      lastLogged.delete(key);
      return;
    }
    if (now - (last ?? p.startedAt) < PROGRESS_EVERY_MS) return;
    lastLogged.set(key, now);
    log.info("scheduler run in progress", progressFields(p, now));
  };
}

/**
 * Progress lines of a new pricing metric's backfill (its event name's stored events added to its
 * totals, 5,000 at a time, in the creating call): at most every PROGRESS_EVERY_MS.
 */
function backfillLogger(log: Logger): (metric: { id: string; environmentId: string }, events: number, startedAt: number) => void {
  let last = 0;
  return (metric, events, startedAt) => {
    const now = Date.now();
    if (now - Math.max(last, startedAt) < PROGRESS_EVERY_MS) return;
    last = now;
    const seconds = (now - startedAt) / 1000;
    log.info("pricing metric backfill in progress", { metric: metric.id, environment: metric.environmentId, events, elapsed_s: Math.round(seconds * 10) / 10, per_s: Math.round(events / seconds) });
  };
}

function progressFields(p: RunProgress, now: number): Record<string, unknown> {
  const seconds = (now - p.startedAt) / 1000;
  return { clock: p.clockId ?? "real time", closed: p.closed, elapsed_s: Math.round(seconds * 10) / 10, per_s: seconds > 0 ? Math.round((p.closed / seconds) * 10) / 10 : null };
}

/**
 * Runs the pending migrations with a line for each as it is applied (done of total, and its
 * time): a migration that rewrites a large table takes a while, and the log says how far it got.
 */
async function migrate(db: Database, log: Logger): Promise<void> {
  const started = Date.now();
  // Without the statements' time limit: a migration that rewrites a large table may take minutes.
  const ran = await db.unbounded(() =>
    runMigrations(
      db.dataSource,
      (m) => log.info("migration applied", { migration: m.name, done: m.done, total: m.total, ms: m.ms }),
      (pending) => log.info("applying migrations", { pending }),
    ),
  );
  if (ran.length > 0) log.info("migrations applied", { migrations: ran, ms: Date.now() - started });
}

/**
 * What a server does to its database before it serves, alone: the migrations (unless
 * RUN_MIGRATIONS=false) and the bootstrap key. WORKERS > 1: the primary does it once, before forking.
 */
export async function prepareDatabase(config: Config, log: Logger): Promise<void> {
  const db = await createDatabase(config.databaseUrl, { statementTimeoutMs: config.databaseStatementTimeoutMs });
  await db.dataSource.initialize();
  try {
    if (config.runMigrations) await migrate(db, log);
    if (config.bootstrapApiKey) {
      await ensureBootstrapKey(new SqlAuthStore(db.sql, db.entities), config.bootstrapApiKey, config.bootstrapEnvironmentMode, new Date());
    }
  } finally {
    await db.close();
  }
}

/** How long after a commit that wrote events the delivery worker fans them out (events of commits meanwhile join the batch). */
const WAKE_DELAY_MS = 10;

/** The host of App.url: the address bound (HOST), or 127.0.0.1 when every interface is. */
function urlHost(host: string | undefined): string {
  if (host === undefined || host === "0.0.0.0" || host === "::") return "127.0.0.1";
  return host.includes(":") ? `[${host}]` : host;
}

export async function startApp(config: Config, log: Logger = createLogger(config.logLevel)): Promise<App> {
  // TLS_CERT_FILE and TLS_KEY_FILE: a pair that does not work stops the start before anything else.
  const tlsPair = config.tls ? readTlsPair(config.tls) : undefined;
  const scheme = tlsPair ? "https" : "http";
  const db = await createDatabase(config.databaseUrl, { statementTimeoutMs: config.databaseStatementTimeoutMs });
  await db.dataSource.initialize();
  let tracing: Tracing | undefined;
  try {
    if (config.runMigrations) await migrate(db, log);
    // Spans over OTLP only with OTEL_EXPORTER_OTLP_ENDPOINT set; otherwise nothing of the SDK is loaded.
    tracing = await startTracing(config.tracing, log);
    db.sql.tracing = tracing;
    const now = () => new Date();
    const authStore = new SqlAuthStore(db.sql, db.entities);
    if (config.bootstrapApiKey) {
      await ensureBootstrapKey(authStore, config.bootstrapApiKey, config.bootstrapEnvironmentMode, now());
    }
    let baseUrl = config.publicBaseUrl ?? `${scheme}://localhost:${config.port}`;
    // The app's own registry (never prom-client's global one): several apps in one process (tests) do not collide.
    const metrics = new Metrics(buildInfo(config.buildCommit));
    const ops = new SqlOpsStore(db.sql);
    metrics.attach({ store: () => ops.snapshot(now()), pool: () => db.sql.connections() });
    const schedulerWatch = config.schedulerIntervalMs > 0 ? new SchedulerWatch(config.schedulerIntervalMs) : undefined;
    const draining = new AbortController();
    const { engine, scheduler, webhookStore, guard, ...services } = buildServices(
      db,
      () => baseUrl,
      now,
      log,
      config.ingestCommitsInFlight,
      // Aborted once SHUTDOWN_TIMEOUT_MS has passed on a stop: a clock advance still running ends cleanly.
      { metrics, alive: () => schedulerWatch?.alive(), stopping: draining.signal, tracing },
      {
        allowPrivateWebhookHosts: config.webhooks.allowPrivateHosts,
        thresholdPercents: config.webhooks.thresholdPercents,
        thresholdCheckMs: config.webhooks.thresholdCheckMs,
      },
    );

    const verifier = new KeyVerifier(authStore, config.apiKeyCacheMs);
    const idempotencyStore = new SqlIdempotencyStore(db.sql);
    // Connect reads JSON bodies through textDecoder: strict UTF-8 and no lone surrogates (rpc/unicode.ts).
    const jsonOptions = { ignoreUnknownFields: true, useProtoFieldName: true, alwaysEmitImplicit: true, textDecoder: new StrictJsonDecoder() };
    // One list of interceptors for every call path: connect-node's handlers, the REST bridge and
    // the lean unary gRPC path (rpc/invoke.ts).
    // Idempotency-Key (DESIGN §12) after the key check, so the key is scoped to the caller's environment.
    const interceptors = [errorInterceptor(log), authInterceptor(verifier), idempotencyInterceptor(idempotencyStore, log)];
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
    // Bounded: a frozen or locked database makes /readyz a 503 within HEALTH_TIMEOUT_MS, not a hang.
    const readiness = new Readiness({
      database: () => db.ping(HEALTH_TIMEOUT_MS),
      migrationsApplied: async () => !(await migrationsPending(db.dataSource)),
      scheduler: schedulerWatch,
      timeoutMs: HEALTH_TIMEOUT_MS,
      log,
    });
    if (config.runMigrations) readiness.migrated();
    const shutdown = new AbortController();
    const specs = implementations(services, { check: () => readiness.ready(), watchIntervalMs: HEALTH_WATCH_INTERVAL_MS, stopped: shutdown.signal });
    routes(specs, bodyLimit, jsonOptions)(router);
    // Every request message read as REST reads it: JSON by the one JSON reader, binary that does
    // not decode invalid_argument rather than internal (src/rpc/messages.ts).
    checkRequestMessages(router, bodyLimit, jsonOptions);
    const invoke = createInvoker(specs, interceptors);
    const rest = createRestGateway(restServices, createDirectCaller(invoke, log, jsonOptions), log);
    const checkoutPages = createPages(services.hostedCheckout, services.invoices, log);
    const portalPages = createPortalPages(services.portal, log);
    // The operator dashboard (/dashboard): sessions opened with a secret key, checked by the API's own verifier.
    const operatorSessions = new OperatorSessions(new SqlDashboardSessionStore(db.sql, db.entities), (key) => verifier.verify(key), config.dashboardSessionSeconds * 1000, now);
    const dashboard = createDashboard(operatorSessions, services, { secureCookies: baseUrl.startsWith("https:"), sessionSeconds: config.dashboardSessionSeconds }, log);
    // GET /openapi.json and /docs (no key): the committed document generated from the contract.
    const docs = createApiDocs(loadOpenApi(), () => baseUrl);
    const pages = (req: Parameters<typeof checkoutPages>[0], res: Parameters<typeof checkoutPages>[1]) => docs(req, res) || dashboard(req, res) || portalPages(req, res) || checkoutPages(req, res);
    const admission = new Admission(config.maxRequestsInFlight, config.maxRequestBytesInFlight, config.maxBulkRequestsInFlight, config.bulkQueueTimeoutMs, config.bulkLaneMinBytes);
    metrics.attach({ inFlight: () => admission.inFlight });
    const handler = createRequestHandler({
      router,
      rest,
      pages,
      readiness,
      metrics,
      metricsToken: config.metricsToken,
      log,
      // From the headers alone, before any of the body is read (DESIGN §10).
      authenticate: (method, key) => authenticateKey(verifier, method.parent, method, key),
      admission,
      forms: new FormBodies(config.maxFormBodiesInFlight, config.formBodyTimeoutMs),
      keylessStreams: new KeylessStreams(config.maxReflectionStreams, config.reflectionStreamTimeoutMs),
      rateLimiter: new RateLimiter(),
      rateLimits: config.rateLimits,
      // Unary binary gRPC through the lean path into the same interceptors (rpc/grpc-unary.ts);
      // LEAN_GRPC=off leaves every gRPC call to connect-node.
      invoke: config.leanGrpc ? invoke : undefined,
      tracing,
    });
    const listener: Listener = await listen(handler, config.port, config.connections, config.host, tlsPair);
    // A changed certificate or key serves the connections made from then on (src/tls.ts).
    const unwatchTls = config.tls && listener.setSecureContext ? watchTlsPair(config.tls, listener.setSecureContext, log) : undefined;
    if (tlsPair) log.info("TLS certificate loaded", { cert_file: config.tls?.certFile, ...describeCertificate(tlsPair.cert) });
    // The scheduler: closes due billing cycles on real time. Safe with several servers (row locks
    // and the unique invoice key), so every server may run it.
    let ticking = false;
    const timer =
      config.schedulerIntervalMs > 0
        ? setInterval(() => {
            if (ticking) return;
            ticking = true;
            schedulerWatch?.alive();
            const t0 = performance.now();
            scheduler
              .runDue(now(), null)
              .then((n) => {
                const ms = performance.now() - t0;
                metrics.schedulerRan(ms / 1000, n);
                if (n > 0) log.info("billing cycles closed", { count: n, ms: Math.round(ms) });
                else log.debug("scheduler run: nothing due", { ms: Math.round(ms * 100) / 100 });
              })
              .catch((err) => log.error("scheduler run failed", { err }))
              .finally(() => {
                schedulerWatch?.alive();
                ticking = false;
              });
          }, config.schedulerIntervalMs)
        : undefined;
    // The webhook delivery worker: safe with several servers (deliveries are claimed under a row
    // lock, then leased), so every server may run it.
    const sender = new HttpWebhookSender(guard, undefined, tracing);
    const worker = new DeliveryWorker(webhookStore, sender, now, {
      ...DEFAULT_DELIVERY_OPTIONS,
      timeoutMs: config.webhooks.timeoutMs,
      retryBaseMs: config.webhooks.retryBaseMs,
      retryWindowMs: config.webhooks.retryWindowSeconds * 1000,
    });
    // Runs one at a time: a call while one runs is remembered and made when it ends (with the
    // retries if any of the calls asked for them). The poll (every deliveryIntervalMs) does the
    // retries and fans out what other servers wrote; a commit of this server that wrote events
    // wakes it (WAKE_DELAY_MS later) for the fan-out alone.
    let delivering = false;
    let deliveryStopped = false;
    let queued: { retries: boolean } | undefined;
    const deliver = (retries: boolean) => {
      if (deliveryStopped) return;
      if (delivering) {
        queued = { retries: retries || (queued?.retries ?? false) };
        return;
      }
      delivering = true;
      // Outside the trace of the request whose commit woke it: each attempt is a trace of its own.
      detached(() => worker.runDue({ retries }))
        .catch((err) => log.error("webhook delivery run failed", { err }))
        .finally(() => {
          delivering = false;
          const next = queued;
          queued = undefined;
          if (next) deliver(next.retries);
        });
    };
    let woken = false;
    const unwatch =
      config.webhooks.deliveryIntervalMs > 0
        ? watchOutbox(db.dataSource, () => {
            if (woken) return;
            woken = true;
            // A few milliseconds later: the events of the commits meanwhile go in the same batch.
            setTimeout(
              () => {
                woken = false;
                deliver(false);
              },
              Math.min(WAKE_DELAY_MS, config.webhooks.deliveryIntervalMs),
            );
          })
        : undefined;
    const deliveryTimer = config.webhooks.deliveryIntervalMs > 0 ? setInterval(() => deliver(true), config.webhooks.deliveryIntervalMs) : undefined;
    // Idempotency keys past their 24 hours (DESIGN §12), a thousand at a time; every server may sweep.
    const sweepTimer = setInterval(() => {
      idempotencyStore.sweep(new Date(), 1000).catch((err) => log.warn("idempotency key sweep failed", { err }));
    }, IDEMPOTENCY_SWEEP_MS);
    sweepTimer.unref();
    if (config.publicBaseUrl === undefined) baseUrl = `${scheme}://localhost:${listener.port}`;
    log.info("listening", { port: listener.port, host: config.host ?? null, tls: tlsPair !== undefined, store: db.dialect });

    let stopping: Promise<void> | undefined;
    return {
      port: listener.port,
      url: `${scheme}://${urlHost(config.host)}:${listener.port}`,
      tracing,
      stop() {
        stopping ??= (async () => {
          if (timer) clearInterval(timer);
          if (deliveryTimer) clearInterval(deliveryTimer);
          clearInterval(sweepTimer);
          unwatchTls?.();
          unwatch?.();
          deliveryStopped = true;
          shutdown.abort(); // open health Watch calls end rather than hold the shutdown
          // Requests in flight finish within SHUTDOWN_TIMEOUT_MS; then a clock advance still running
          // ends between two steps and answers 503 (stopping), and what is left is cut.
          const { overdue, cut } = await listener.close(config.shutdownTimeoutMs, () => draining.abort());
          if (overdue > 0) {
            log.warn("stopping: requests still in flight after SHUTDOWN_TIMEOUT_MS were told to stop; those not answered 1 s later were cut", {
              requests: overdue,
              cut,
              shutdown_timeout_ms: config.shutdownTimeoutMs,
            });
          }
          while (ticking || delivering) await new Promise((r) => setTimeout(r, 20));
          sender.close();
          await db.close();
          // The spans still waiting for their batch are exported before the app is stopped; a
          // collector that is gone by then costs those spans, never the stop.
          await tracing?.shutdown().catch((err: unknown) => log.warn("tracing: the last spans were not exported", { err }));
        })();
        return stopping;
      },
    };
  } catch (err) {
    await db.dataSource.destroy().catch(() => {});
    await tracing?.shutdown().catch(() => {});
    throw err;
  }
}
