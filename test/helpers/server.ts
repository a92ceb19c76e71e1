/**
 * Starts the real server on a free port against a fresh database, with two environments:
 * A (test mode: a secret key, a publishable key, a revoked key) and B (live mode: a secret key).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createServer } from "node:net";
import test from "ava";
import { type App, startApp } from "../../src/app.js";
import { newId } from "../../src/billing/ids.js";
import { generateKey, storeKey } from "../../src/billing/keys.js";
import type { EnvironmentMode, KeyKind } from "../../src/billing/tenancy.js";
import { loadConfig } from "../../src/config.js";
import { createDatabase } from "../../src/db/datasource.js";
import { SqlAuthStore } from "../../src/db/stores/auth-store.js";
import { createLogger } from "../../src/log.js";
import { STORES, type Store, type TestDatabase, createTestDatabase } from "./db.js";

export interface TestKeys {
  a: string;
  aPublishable: string;
  aRevoked: string;
  b: string;
}

export interface FreshEnvironment {
  /** The environment's draft grace period (seconds); 0 when not given. */
  invoiceGraceSeconds?: number;
}

export interface TestServer {
  store: Store;
  /**
   * A secret key of a brand-new environment, for tests that need an empty one; its invoices are
   * final at once unless `invoiceGraceSeconds` says otherwise.
   */
  freshKey(mode?: EnvironmentMode, opts?: FreshEnvironment): Promise<string>;
  app: App;
  url: string;
  db: TestDatabase;
  keys: TestKeys;
  stop(): Promise<void>;
}

/** Creates environments and keys straight through the store, as the CLI does. */
export async function seedKeys(databaseUrl: string): Promise<{ keys: TestKeys; freshKey: (mode?: EnvironmentMode, opts?: FreshEnvironment) => Promise<string>; close: () => Promise<void> }> {
  const db = await createDatabase(databaseUrl, { poolSize: 2, statementTimeoutMs: TEST_STATEMENT_TIMEOUT_MS });
  await db.dataSource.initialize();
  await db.dataSource.runMigrations({ transaction: "each" });
  const store = new SqlAuthStore(db.sql, db.entities);
  const now = new Date();
  // The fixtures' environments finalize invoices at once (a grace period of 0), so that tests not
  // about the draft grace period see final invoices; the default for a new environment is 1 hour.
  const env = async (name: string, mode: EnvironmentMode, invoiceGraceSeconds = 0) => {
    const e = { id: newId("env"), name, mode, createdAt: now };
    await store.insertEnvironment(e);
    await store.setInvoiceGraceSeconds(e.id, invoiceGraceSeconds);
    return e;
  };
  const key = async (environmentId: string, kind: KeyKind, mode: EnvironmentMode, revoked = false) => {
    const k = generateKey(kind, mode);
    await storeKey(store, environmentId, kind, k, now, revoked);
    return k;
  };
  const a = await env("env-a", "test");
  const b = await env("env-b", "live");
  const keys = {
    a: await key(a.id, "secret", "test"),
    aPublishable: await key(a.id, "publishable", "test"),
    aRevoked: await key(a.id, "secret", "test", true),
    b: await key(b.id, "secret", "live"),
  };
  const freshKey = async (mode: EnvironmentMode = "test", opts: FreshEnvironment = {}) => key((await env(newId("env"), mode, opts.invoiceGraceSeconds ?? 0)).id, "secret", mode);
  return { keys, freshKey, close: () => db.dataSource.destroy() };
}

/**
 * How long a test's database statement or wait for a connection may take (the server's
 * DATABASE_STATEMENT_TIMEOUT_MS, 5 s by default, and the fixtures' own connection): on CI's
 * loaded two-core machine, with every test file's servers and databases at once, a wait for the
 * SQLite file's lock or a MariaDB fsync took longer than 5 s, and the call was answered 503. The
 * tests of the limit itself (test/db/outage.test.ts) set their own.
 */
export const TEST_STATEMENT_TIMEOUT_MS = 60_000;

/** The real app on a free port over the database at `url` (its migrations run), logging errors only. */
/**
 * A test server waits up to a minute for its bulk lane (BULK_QUEUE_TIMEOUT_MS, 5 s by default):
 * a file's cases run at once against one server, and a few dozen of them creating rate cards
 * under a loaded CI machine queued longer than 5 s for the one bulk slot and were refused. The
 * tests of the bulk lane itself set their own bounds.
 */
export function startAppOn(url: string, env: Record<string, string> = {}): Promise<App> {
  return startApp(
    loadConfig({ DATABASE_URL: url, PORT: "0", LOG_LEVEL: "error", BULK_QUEUE_TIMEOUT_MS: "60000", DATABASE_STATEMENT_TIMEOUT_MS: String(TEST_STATEMENT_TIMEOUT_MS), ...env }),
    createLogger("error"),
  );
}

export async function startTestServer(store: Store, env: Record<string, string> = {}): Promise<TestServer> {
  const db = await createTestDatabase(store);
  const seeded = await seedKeys(db.url);
  const app = await startAppOn(db.url, env);
  return {
    store,
    app,
    url: app.url,
    db,
    keys: seeded.keys,
    freshKey: seeded.freshKey,
    async stop() {
      await app.stop();
      await seeded.close();
      await db.drop();
    },
  };
}

/**
 * Resolves once the server's readiness check (GET /readyz) answers 200: its database answers
 * within the check's bound. On a loaded machine a fresh MariaDB connection's handshake can take
 * longer than that bound, and the check honestly reports 503 until it has one; tests that assert
 * a healthy answer wait for it first.
 */
export async function untilHealthy(url: string): Promise<void> {
  for (;;) {
    const res = await fetch(`${url}/readyz`).catch(() => undefined);
    await res?.body?.cancel();
    if (res?.status === 200) return;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A free port on this machine (for a child server). */
export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

/** A server started as its own process: its address, the process, and how it exited (its signal or code) once it has. */
export interface ChildServer {
  url: string;
  proc: ChildProcess;
  exited: Promise<NodeJS.Signals | number | null>;
}

/**
 * `npm start`'s process (src/main.ts) on the test server's database, with `env` on top (its own
 * port and public URL, errors logged, the scheduler and webhook delivery off unless `env` turns
 * them on): for tests that kill a server (SIGKILL) or run two on one database. Its stderr is this
 * process's unless `stderr` is "ignore". Resolves once it is healthy; rejects if it exits first.
 */
export async function childServer(server: TestServer, env: Record<string, string> = {}, stderr: "inherit" | "ignore" = "inherit"): Promise<ChildServer> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const proc = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    env: {
      ...process.env,
      PORT: String(port),
      DATABASE_URL: server.db.url,
      PUBLIC_BASE_URL: url,
      LOG_LEVEL: "error",
      SCHEDULER_INTERVAL_MS: "0",
      WEBHOOK_DELIVERY_INTERVAL_MS: "0",
      ...env,
    },
    stdio: ["ignore", "ignore", stderr],
  });
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) => proc.once("exit", (code, signal) => resolve(signal ?? code)));
  await Promise.race([untilHealthy(url), exited.then((how) => Promise.reject(new Error(`the child server exited: ${how}`)))]);
  return { url, proc, exited };
}

/**
 * The server of a test file (or of one store's half of it): started before its tests, stopped
 * after them even when they fail. The returned object reads through to the running server, so
 * tests use it as a TestServer; touching it outside a test or hook before the start throws.
 * `setUp` runs right after the start (ava may run a file's before hooks concurrently, so work
 * that needs the server goes here); what it returns runs before the server stops.
 */
export function useServer(store: Store, env: Record<string, string> = {}, setUp?: (server: TestServer) => Promise<(() => Promise<void>) | undefined>): TestServer {
  let started: TestServer | undefined;
  let tearDown: (() => Promise<void>) | undefined;
  test.before(async () => {
    started = await startTestServer(store, env);
    tearDown = await setUp?.(started);
  });
  test.after.always(async () => {
    try {
      await tearDown?.();
    } finally {
      await started?.stop();
    }
  });
  return new Proxy({} as TestServer, {
    get(_, name) {
      if (!started) throw new Error(`useServer(${store}): the server starts in test.before; read .${String(name)} inside a test`);
      return Reflect.get(started, name);
    },
  });
}

/**
 * One server per store of `stores` (every store the suite runs on by default), each a useServer
 * that waits until healthy after its start; the returned function gives a store's server itself
 * (not useServer's read-through proxy: a test may spread it).
 */
export function useServers(stores: readonly Store[] = STORES): (store: Store) => TestServer {
  const servers = new Map<Store, TestServer>();
  for (const store of stores) {
    useServer(store, {}, async (server) => {
      await untilHealthy(server.url);
      servers.set(store, server);
      return undefined;
    });
  }
  return (store) => {
    const server = servers.get(store);
    if (!server) throw new Error(`useServers: no server for ${store}; it starts in test.before, read it inside a test`);
    return server;
  };
}
