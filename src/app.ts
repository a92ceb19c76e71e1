/**
 * Composition root: config → database → stores → domain services (wiring/services.ts) → router,
 * REST bridge and pages (wiring/serving.ts) → one listener (src/edge), plus the background work
 * (wiring/background.ts). main.ts runs it; tests and benchmarks start it on port 0.
 */
import { ensureBootstrapKey } from "./billing/bootstrap.js";
import type { Config } from "./config.js";
import { createDatabase } from "./db/datasource.js";
import { SqlAuthStore } from "./db/stores/auth-store.js";
import { SqlOpsStore } from "./db/stores/ops-store.js";
import { type Logger, createLogger } from "./log.js";
import { SchedulerWatch } from "./ops/health.js";
import { buildInfo } from "./ops/build-info.js";
import { Metrics } from "./ops/metrics.js";
import { type Tracing, startTracing } from "./ops/tracing.js";
import { startBackground } from "./wiring/background.js";
import { migrate } from "./wiring/database.js";
import { buildHandler } from "./wiring/serving.js";
import { buildServices } from "./wiring/services.js";
import { wireStripeFactory } from "./wiring/stripe.js";
import { SqlIdempotencyStore } from "./db/stores/idempotency-store.js";
import { KeyVerifier } from "./rpc/auth.js";
import { type Listener, listen } from "./edge/listener.js";
import { describeCertificate, readTlsPair, watchTlsPair } from "./tls.js";

export interface App {
  port: number;
  url: string;
  /** The app's tracing; undefined (no tracing SDK started) without OTEL_EXPORTER_OTLP_ENDPOINT. */
  tracing: Tracing | undefined;
  stop(): Promise<void>;
}

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
      { metrics, alive: () => schedulerWatch?.alive(), stopping: draining.signal, tracing, secrets: config.secrets, stripe: wireStripeFactory(db, config, () => baseUrl) },
      {
        allowPrivateWebhookHosts: config.webhooks.allowPrivateHosts,
        thresholdPercents: config.webhooks.thresholdPercents,
        thresholdCheckMs: config.webhooks.thresholdCheckMs,
      },
    );

    const verifier = new KeyVerifier(authStore, config.apiKeyCacheMs);
    const idempotencyStore = new SqlIdempotencyStore(db.sql);
    const shutdown = new AbortController();
    // The router, the REST bridge, the pages and the request pipeline over them (wiring/serving.ts).
    const handler = buildHandler({ config, db, services, verifier, idempotencyStore, metrics, schedulerWatch, log, tracing, now, baseUrl: () => baseUrl, stopped: shutdown.signal });
    const listener: Listener = await listen(handler, config.port, config.connections, config.host, tlsPair);
    // A changed certificate or key serves the connections made from then on (src/tls.ts).
    const unwatchTls = config.tls && listener.setSecureContext ? watchTlsPair(config.tls, listener.setSecureContext, log) : undefined;
    if (tlsPair) log.info("TLS certificate loaded", { cert_file: config.tls?.certFile, ...describeCertificate(tlsPair.cert) });
    // The scheduler, the webhook delivery worker and the idempotency-key sweep (wiring/background.ts).
    const background = startBackground({ config, db, scheduler, schedulerWatch, webhookStore, guard, idempotencyStore, metrics, tracing, log, now });
    if (config.publicBaseUrl === undefined) baseUrl = `${scheme}://localhost:${listener.port}`;
    log.info("listening", { port: listener.port, host: config.host ?? null, tls: tlsPair !== undefined, store: db.dialect });

    let stopping: Promise<void> | undefined;
    return {
      port: listener.port,
      url: `${scheme}://${urlHost(config.host)}:${listener.port}`,
      tracing,
      stop() {
        stopping ??= (async () => {
          background.stop();
          unwatchTls?.();
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
          await background.finished();
          // Usage evaluated for credit alerts: nothing new starts, the batch in flight ends before the database closes.
          services.creditWatch.stop();
          await services.creditWatch.idle();
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
