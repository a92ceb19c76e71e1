/**
 * What serves requests, built over the domain services: the one interceptor list, the Connect
 * router and its routes, the invoker the REST bridge and the lean gRPC path call through, the
 * pages, readiness, and the request pipeline (src/edge) over all of them.
 */
import { createConnectRouter } from "@connectrpc/connect";
import { OperatorSessions } from "../billing/operator-sessions.js";
import type { Config } from "../config.js";
import type { Database } from "../db/datasource.js";
import { migrationsPending } from "../db/migrate.js";
import { SqlDashboardSessionStore } from "../db/stores/dashboard-session-store.js";
import type { SqlIdempotencyStore } from "../db/stores/idempotency-store.js";
import { createRequestHandler } from "../edge/handler.js";
import { Admission, BULK_BODY_BYTES, KeylessStreams, bodyLimit } from "../limits.js";
import type { Logger } from "../log.js";
import { Readiness, type SchedulerWatch } from "../ops/health.js";
import type { Metrics } from "../ops/metrics.js";
import type { Tracing } from "../ops/tracing.js";
import { RateLimiter } from "../ratelimit.js";
import { SharedRateLimiter } from "../ratelimit-redis.js";
import { createDashboard } from "../pages/dashboard/dashboard.js";
import { createApiDocs, loadOpenApi } from "../pages/docs.js";
import { FormBodies } from "../pages/form-body.js";
import { createRestGateway } from "../rest/gateway.js";
import { createPages } from "../pages/hosted/checkout.js";
import { creditReads } from "../pages/credits.js";
import { createPortalPages } from "../pages/hosted/portal.js";
import { pdfRoutes } from "../pages/pdf/routes.js";
import { type KeyVerifier, authInterceptor, authenticateKey } from "../rpc/auth.js";
import { ACCEPTED_COMPRESSION } from "../rpc/compression.js";
import { errorInterceptor } from "../rpc/errors.js";
import { idempotencyInterceptor, replaying } from "../rpc/idempotency.js";
import { createInvoker } from "../rpc/invoke.js";
import { checkRequestMessages } from "../rpc/messages.js";
import { implementations, restServices, routes } from "../rpc/routes.js";
import type { buildServices } from "./services.js";

/** How long /readyz (and the gRPC health service) waits for the database's answer before it reports 503. */
export const HEALTH_TIMEOUT_MS = 1_500;
/** How often an open grpc.health.v1 Watch looks at the database again. */
export const HEALTH_WATCH_INTERVAL_MS = 1_000;

export interface ServingParts {
  config: Config;
  db: Database;
  services: Omit<ReturnType<typeof buildServices>, "engine" | "scheduler" | "webhookStore" | "guard">;
  verifier: KeyVerifier;
  idempotencyStore: SqlIdempotencyStore;
  metrics: Metrics;
  schedulerWatch: SchedulerWatch | undefined;
  log: Logger;
  tracing: Tracing | undefined;
  now: () => Date;
  /** The base of the URLs handed out (known once the port is bound). */
  baseUrl: () => string;
  /** Aborted when the server stops: open health Watch calls end. */
  stopped: AbortSignal;
}

export function buildHandler({ config, db, services, verifier, idempotencyStore, metrics, schedulerWatch, log, tracing, now, baseUrl, stopped }: ServingParts) {
  // Connect is handed only JSON the one reader has read (rpc/messages.ts): strict UTF-8, no lone surrogates.
  const jsonOptions = { ignoreUnknownFields: true, useProtoFieldName: true, alwaysEmitImplicit: true };
  // One list of interceptors for every call path: connect-node's handlers, the REST bridge and
  // the lean unary gRPC path (rpc/invoke.ts).
  // Idempotency-Key (DESIGN §12) after the key check, so the key is scoped to the caller's environment.
  const interceptors = [errorInterceptor(log), authInterceptor(verifier), idempotencyInterceptor(idempotencyStore, log, now, stopped)];
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
  // An idempotent replay answers at the implementation's seam, on every call path (rpc/idempotency.ts).
  const specs = implementations(services, { check: () => readiness.ready(), watchIntervalMs: HEALTH_WATCH_INTERVAL_MS, stopped }).map(replaying);
  routes(specs, bodyLimit, jsonOptions)(router);
  // Every request message read as REST reads it: JSON by the one JSON reader, binary that does
  // not decode invalid_argument rather than internal (src/rpc/messages.ts).
  checkRequestMessages(router, bodyLimit, jsonOptions);
  const invoke = createInvoker(specs, interceptors);
  // The PDFs (pages/pdf/routes.ts): REST only, admitted as their resource's Get.
  const rest = createRestGateway(restServices, invoke, log, jsonOptions, pdfRoutes(services.invoices, services.creditNotes));
  const checkoutPages = createPages(services.hostedCheckout, services.invoices, log, services.dunning, services.checkoutPreviews);
  const portalPages = createPortalPages(services.portal, log, creditReads(services.credits, services.billingStates));
  // The operator dashboard (/dashboard): sessions opened with a secret key, checked by the API's own verifier.
  const operatorSessions = new OperatorSessions(new SqlDashboardSessionStore(db.sql, db.entities), (key) => verifier.verify(key), config.dashboardSessionSeconds * 1000, now);
  const dashboard = createDashboard(operatorSessions, services, { secureCookies: baseUrl().startsWith("https:"), sessionSeconds: config.dashboardSessionSeconds }, log);
  // GET /openapi.json and /docs (no key): the committed document generated from the contract.
  const docs = createApiDocs(loadOpenApi(), baseUrl);
  const pages = (req: Parameters<typeof checkoutPages>[0], res: Parameters<typeof checkoutPages>[1]) =>
    docs(req, res) || dashboard(req, res) || portalPages(req, res) || checkoutPages(req, res) || services.stripePages(req, res);
  const admission = new Admission(config.maxRequestsInFlight, config.maxRequestBytesInFlight, config.maxBulkRequestsInFlight, config.bulkQueueTimeoutMs, config.bulkLaneMinBytes);
  metrics.attach({ inFlight: () => admission.inFlight });
  // Per-key limits: shared by every server through Redis when RATE_LIMIT_REDIS_URL is set (its
  // connection closed when the server stops), else this server's own buckets.
  const shared = config.rateLimitRedis && new SharedRateLimiter({ ...config.rateLimitRedis, log });
  if (shared) stopped.addEventListener("abort", () => shared.close(), { once: true });
  if (shared) metrics.attach({ rateLimitRedis: () => ({ outages: shared.outages, fallbacks: shared.fallbacks }) });
  return createRequestHandler({
    router,
    rest,
    pages,
    readiness,
    metrics,
    metricsToken: config.metricsToken,
    log,
    // From the headers alone, before any of the body is read (DESIGN §10).
    authenticate: (method, key) => authenticateKey(verifier, method, key),
    admission,
    forms: new FormBodies(config.maxFormBodiesInFlight, config.formBodyTimeoutMs),
    keylessStreams: new KeylessStreams(config.maxReflectionStreams, config.reflectionStreamTimeoutMs),
    rateLimiter: shared ?? new RateLimiter(),
    rateLimits: config.rateLimits,
    // Unary binary gRPC through the lean path into the same interceptors (src/edge/lean);
    // LEAN_GRPC=off leaves every gRPC call to connect-node.
    invoke: config.leanGrpc ? invoke : undefined,
    tracing,
  });
}
