/**
 * Composition root: config → database → stores → domain services → router → one listener.
 * main.ts runs it; tests and benchmarks start it on port 0.
 */
import { createConnectRouter } from "@connectrpc/connect";
import { ensureBootstrapKey } from "./billing/bootstrap.js";
import { PricingMetricService } from "./billing/catalog/metrics.js";
import { RateCardService } from "./billing/catalog/rate-cards.js";
import { RateCatalogService } from "./billing/catalog/rate-catalogs.js";
import { IngestService, SummaryService } from "./billing/metering/usage.js";
import { SubjectService } from "./billing/subjects.js";
import type { Config } from "./config.js";
import { createDatabase } from "./db/datasource.js";
import { SqlAuthStore } from "./db/stores/auth-store.js";
import { SqlPricingMetricStore, SqlRateCardStore, SqlRateCatalogStore } from "./db/stores/catalog-store.js";
import { SqlSubjectStore } from "./db/stores/subject-store.js";
import { SqlUsageStore } from "./db/stores/usage-store.js";
import { type Logger, createLogger } from "./log.js";
import { createRestGateway } from "./rest/gateway.js";
import { KeyVerifier, authInterceptor } from "./rpc/auth.js";
import { errorInterceptor } from "./rpc/errors.js";
import { restServices, routes } from "./rpc/routes.js";
import { type Listener, createRequestHandler, listen } from "./server.js";

export interface App {
  port: number;
  url: string;
  stop(): Promise<void>;
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
    const subjects = new SubjectService(new SqlSubjectStore(db.sql, db.entities), now);
    const metricStore = new SqlPricingMetricStore(db.sql, db.entities);
    const catalogStore = new SqlRateCatalogStore(db.sql, db.entities);
    const metrics = new PricingMetricService(metricStore, now);
    const cards = new RateCardService(new SqlRateCardStore(db.sql, db.entities), metricStore, catalogStore, now);
    const catalogs = new RateCatalogService(catalogStore, metricStore, now);
    const usageStore = new SqlUsageStore(db.sql, db.entities);
    const ingest = new IngestService(usageStore, now);
    const summaries = new SummaryService(usageStore, metrics, subjects);

    const router = createConnectRouter({
      interceptors: [errorInterceptor(log), authInterceptor(new KeyVerifier(authStore, config.apiKeyCacheMs))],
      jsonOptions: { ignoreUnknownFields: true, useProtoFieldName: true, alwaysEmitImplicit: true },
    });
    routes({ subjects, metrics, cards, catalogs, ingest, summaries })(router);
    const rest = createRestGateway(restServices, router.handlers, log);
    const health = async () => {
      await db.dataSource.query("SELECT 1");
      return true;
    };
    const listener: Listener = await listen(createRequestHandler({ router, rest, health, log }), config.port);
    log.info("listening", { port: listener.port, store: db.dialect });

    let stopping: Promise<void> | undefined;
    return {
      port: listener.port,
      url: `http://127.0.0.1:${listener.port}`,
      stop() {
        stopping ??= (async () => {
          await listener.close();
          await db.dataSource.destroy();
        })();
        return stopping;
      },
    };
  } catch (err) {
    await db.dataSource.destroy().catch(() => {});
    throw err;
  }
}
