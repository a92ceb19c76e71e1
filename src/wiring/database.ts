/**
 * What a server does to its database before it serves: the pending migrations, each logged as it
 * is applied, and the bootstrap key.
 */
import { ensureBootstrapKey } from "../billing/bootstrap.js";
import type { Config } from "../config.js";
import { type Database, createDatabase } from "../db/datasource.js";
import { runMigrations } from "../db/migrate.js";
import { SqlAuthStore } from "../db/stores/auth-store.js";
import type { Logger } from "../log.js";

/**
 * Runs the pending migrations with a line for each as it is applied (done of total, and its
 * time): a migration that rewrites a large table takes a while, and the log says how far it got.
 */
export async function migrate(db: Database, log: Logger): Promise<void> {
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
