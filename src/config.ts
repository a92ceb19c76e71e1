/**
 * Configuration from the environment (DESIGN §2). The only module that reads process.env. A bad
 * value stops the start with one message that lists every problem.
 */
import { existsSync, readFileSync } from "node:fs";
import { isIP } from "node:net";
import { resolve } from "node:path";
import { parseEnv } from "node:util";
import type { EnvironmentMode } from "./billing/tenancy.js";

export type LogLevel = "debug" | "info" | "warn" | "error";

export interface Config {
  port: number;
  /** The address the port is bound on (HOST); undefined: every interface, IPv6 and IPv4. */
  host: string | undefined;
  /** The certificate and key (PEM files) the port serves TLS with; undefined: cleartext (src/tls.ts). */
  tls: TlsFiles | undefined;
  databaseUrl: string;
  /**
   * The time limit of each database statement and each wait for a database connection (ms): past
   * it the caller hears `unavailable` (503) and a MySQL connection that did not answer is
   * destroyed. The longest a request waits on a frozen database. Migrations have none.
   */
  databaseStatementTimeoutMs: number;
  bootstrapApiKey: string | undefined;
  bootstrapEnvironmentMode: EnvironmentMode;
  /** Base of the URLs handed out; unset means http://localhost:<the port actually bound> (https:// with TLS). */
  publicBaseUrl: string | undefined;
  logLevel: LogLevel;
  runMigrations: boolean;
  /**
   * LEAN_GRPC (on/off, default on): unary binary gRPC and the ingest client stream are served by
   * the lean path on their HTTP/2 streams; off sends every gRPC call through connect-node (the
   * same answers, at several times the server CPU; for comparing the two paths).
   */
  leanGrpc: boolean;
  /**
   * How long a verified API key is trusted before it is looked up again (ms); 0 looks it up on
   * every call. Also the longest a revoked key keeps working on a server that has just seen it.
   */
  apiKeyCacheMs: number;
  /**
   * Server processes sharing the port (src/cluster.ts); 1: this process serves alone. Above 1 a
   * primary runs the migrations, forks them and starts again one that dies. MySQL/MariaDB only.
   */
  workers: number;
  /** How often the scheduler closes due billing cycles (ms); 0 turns it off on this server. */
  schedulerIntervalMs: number;
  /** Usage-ingest transactions of one environment in flight at once on this server (group commit). */
  ingestCommitsInFlight: number;
  /** Connection limits of the shared port (src/server.ts `listen`). */
  connections: ConnectionLimits;
  /**
   * Admission control (DESIGN §10): API requests in flight at once on this server; one more is
   * answered 503 (`unavailable`) with Retry-After at once, never queued. Health checks are exempt.
   */
  maxRequestsInFlight: number;
  /** Request body bytes in flight at once on this server (declared lengths, else bytes read); over it: 503. */
  maxRequestBytesInFlight: number;
  /**
   * A form POSTed to a page that needs no key (hosted checkout and portal, dashboard) must arrive
   * whole within this (ms) of its headers, else 408; it is read before the request is admitted.
   */
  formBodyTimeoutMs: number;
  /** Such form bodies read at once on this server, apart from MAX_REQUESTS_IN_FLIGHT; one more: 503. */
  maxFormBodiesInFlight: number;
  /**
   * gRPC server reflection streams (no key): how many at once on this server, apart from
   * MAX_REQUESTS_IN_FLIGHT (one more: 503 / UNAVAILABLE), and how long (ms) each may stay open.
   */
  maxReflectionStreams: number;
  reflectionStreamTimeoutMs: number;
  /**
   * On SIGTERM/SIGINT, how long requests in flight may go on (ms); then work still running is
   * told to stop (a test-clock advance answers 503 between two steps) and connections are closed.
   */
  shutdownTimeoutMs: number;
  /**
   * Bulk requests (usage-event batches, rate cards, catalogs) in flight at once on this server;
   * one more is answered 503 at once. Each costs tens of ms of the server's one thread.
   */
  maxBulkRequestsInFlight: number;
  /** How long a bulk request waits (unread, first come first served) for a slot before its 503; 0: at once. */
  bulkQueueTimeoutMs: number;
  /** A bulk request that declares a body smaller than this is served outside the bulk lane (0: none is). */
  bulkLaneMinBytes: number;
  /**
   * Per-key rate limits (src/ratelimit.ts): the server-wide defaults of the usage-ingest and the
   * API bucket; an environment may override either. rps 0 is unlimited.
   */
  rateLimits: RateLimits;
  /**
   * The bearer token GET /metrics asks for (`Authorization: Bearer <token>`); undefined: /metrics
   * is open (as /healthz is), for a scraper on a private network.
   */
  metricsToken: string | undefined;
  /**
   * The commit the server was built from, for billing_build_info (BUILD_COMMIT); undefined: read
   * from git at start if the code is a checkout, else "unknown".
   */
  buildCommit: string | undefined;
  /** How long an operator dashboard session lasts from sign-in (seconds). */
  dashboardSessionSeconds: number;
  /** Outgoing webhooks (README, "Webhooks and events"). */
  webhooks: WebhookConfig;
  /** Span export over OTLP (README, "Tracing"); undefined: OTEL_EXPORTER_OTLP_ENDPOINT unset, no tracing SDK started. */
  tracing: TracingConfig | undefined;
}

/** One token bucket's shape (src/ratelimit.ts): `rps` tokens a second up to `burst`; rps 0 is unlimited. */
export interface Rate {
  rps: number;
  burst: number;
}

/** The server's default rate limits per key, one bucket per class of call (src/ratelimit.ts). */
export interface RateLimits {
  ingest: Rate;
  api: Rate;
}

export interface TracingConfig {
  /** Where spans are POSTed: OTEL_EXPORTER_OTLP_ENDPOINT with `/v1/traces` appended. */
  endpoint: string;
  /** Headers sent with each export (OTEL_EXPORTER_OTLP_HEADERS: `key=value` pairs, comma-separated, values URL-encoded). */
  headers: Record<string, string>;
  /** The `service.name` of the spans (OTEL_SERVICE_NAME). */
  serviceName: string;
  /** How long spans wait to be exported in a batch (ms; OTEL_BSP_SCHEDULE_DELAY). */
  scheduleDelayMs: number;
}

export interface WebhookConfig {
  /** How often this server looks for due deliveries (ms); 0: this server delivers none. */
  deliveryIntervalMs: number;
  /** How long one delivery attempt may take (ms). */
  timeoutMs: number;
  /** The first retry's delay (ms); it doubles with each failure (with jitter), up to 6 hours. */
  retryBaseMs: number;
  /** How long a delivery is retried after its event (seconds); then it is failed and its endpoint marked failing. */
  retryWindowSeconds: number;
  /** Whether endpoint URLs may point at this service's own host or private addresses. */
  allowPrivateHosts: boolean;
  /** Percentages of a usage rate's included units that fire usage.threshold_crossed (empty: none). */
  thresholdPercents: number[];
  /** How often real-time subscriptions' usage thresholds are checked (ms). */
  thresholdCheckMs: number;
}

/** TLS_CERT_FILE and TLS_KEY_FILE: read at start, and again when either changes (src/tls.ts). */
export interface TlsFiles {
  certFile: string;
  keyFile: string;
}

/** Timeouts (ms) and the connection cap of the one port, for HTTP/1.1 and h2c alike. */
export interface ConnectionLimits {
  /**
   * From accept until the protocol is known: the first bytes, or for HTTP/2 all 24 bytes of the
   * connection preface. A connection that sends nothing, or half a preface, is closed then.
   */
  prefaceTimeoutMs: number;
  /** HTTP/1.1: the whole header block of a request must arrive within this (else 408 and close). */
  headersTimeoutMs: number;
  /** HTTP/1.1: the whole request, headers and body, must arrive within this (else 408 and close). */
  requestTimeoutMs: number;
  /**
   * No bytes for this long closes the connection: an HTTP/1.1 keep-alive connection between
   * requests or a request in progress, an HTTP/2 session with no stream bytes (PINGs do not count).
   */
  idleTimeoutMs: number;
  /** Open connections on the port at most; more are closed at accept. 0: no cap. */
  maxConnections: number;
}

/** The largest request body any route accepts (a usage-event batch): the byte bound's floor. */
export const LARGEST_BODY_BYTES = 5 * 1024 * 1024;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
  }
}

const LOG_LEVELS: LogLevel[] = ["debug", "info", "warn", "error"];

export function loadConfig(env: Record<string, string | undefined> = process.env): Readonly<Config> {
  const problems: string[] = [];

  const int = (name: string, fallback: number, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === "") return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      problems.push(`${name} must be an integer from ${min} to ${max} (got ${JSON.stringify(raw)})`);
      return fallback;
    }
    return Number(raw);
  };

  const port = int("PORT", 8080, 0, 65535);
  const host = env.HOST || undefined;
  if (host !== undefined && isIP(host) === 0 && !/^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/.test(host)) {
    problems.push(`HOST must be an IP address (127.0.0.1, ::1, 0.0.0.0) or a host name (got ${JSON.stringify(host)})`);
  }
  const certFile = env.TLS_CERT_FILE || undefined;
  const keyFile = env.TLS_KEY_FILE || undefined;
  if ((certFile === undefined) !== (keyFile === undefined)) {
    problems.push(`TLS_CERT_FILE and TLS_KEY_FILE go together: ${certFile === undefined ? "TLS_KEY_FILE is set but TLS_CERT_FILE is not" : "TLS_CERT_FILE is set but TLS_KEY_FILE is not"}`);
  }
  const tls: TlsFiles | undefined = certFile !== undefined && keyFile !== undefined ? Object.freeze({ certFile, keyFile }) : undefined;
  const databaseUrl = env.DATABASE_URL || "sqlite:./data/billing.db";
  if (!/^(sqlite:|mysql:\/\/|mariadb:\/\/)/.test(databaseUrl)) {
    problems.push("DATABASE_URL must start with sqlite:, mysql:// or mariadb:// (for example mysql://user:pass@host:3306/db)");
  } else if (!databaseUrl.startsWith("sqlite:")) {
    try {
      const u = new URL(databaseUrl.replace(/^mariadb:/, "mysql:"));
      if (u.pathname.length <= 1) problems.push("DATABASE_URL must name a database, as in mysql://user:pass@host:3306/db");
    } catch {
      problems.push("DATABASE_URL is not a valid URL");
    }
  }

  // 5 s: the longest statements of normal work (a 1,000-event batch's totals, a cycle's invoice
  // lines, a row lock waited for in a race of cycle closes) took at most 0.8 s on a loaded
  // two-core machine; a request that waits longer has usually been given up by its caller anyway.
  const databaseStatementTimeoutMs = int("DATABASE_STATEMENT_TIMEOUT_MS", 5_000, 100, 600_000);

  const bootstrapApiKey = env.BILLING_BOOTSTRAP_API_KEY || undefined;
  if (bootstrapApiKey !== undefined && !/^sk_(test|live)_[0-9A-Za-z]{16,}$/.test(bootstrapApiKey)) {
    problems.push("BILLING_BOOTSTRAP_API_KEY must look like sk_test_ or sk_live_ followed by at least 16 letters or digits");
  }
  const bootstrapEnvironmentMode: EnvironmentMode = bootstrapApiKey?.startsWith("sk_live_") ? "live" : "test";

  let publicBaseUrl = env.PUBLIC_BASE_URL || undefined;
  if (publicBaseUrl !== undefined) {
    try {
      const u = new URL(publicBaseUrl);
      if (u.protocol !== "http:" && u.protocol !== "https:") problems.push("PUBLIC_BASE_URL must be an http or https URL");
      publicBaseUrl = publicBaseUrl.replace(/\/+$/, "");
    } catch {
      problems.push("PUBLIC_BASE_URL is not a valid URL");
    }
  }

  const logLevel = (env.LOG_LEVEL || "info") as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(", ")}`);

  const rawMigrate = env.RUN_MIGRATIONS ?? "true";
  if (rawMigrate !== "true" && rawMigrate !== "false") problems.push("RUN_MIGRATIONS must be true or false");

  const rawLean = env.LEAN_GRPC ?? "on";
  if (rawLean !== "on" && rawLean !== "off") problems.push(`LEAN_GRPC must be on or off (got ${JSON.stringify(rawLean)})`);

  const apiKeyCacheMs = int("API_KEY_CACHE_MS", 2_000, 0, 60_000);
  const dashboardSessionSeconds = int("DASHBOARD_SESSION_SECONDS", 8 * 3600, 1, 30 * 86400);
  const schedulerIntervalMs = int("SCHEDULER_INTERVAL_MS", 5_000, 0, 3_600_000);
  const workers = int("WORKERS", 1, 1, 64);
  if (workers > 1 && databaseUrl.startsWith("sqlite:")) {
    // One file, one writer at a time: more processes would only queue on its lock (and each
    // would checkpoint and sync the same WAL); the embedded store is for one process.
    problems.push(`WORKERS above 1 needs MySQL or MariaDB (DATABASE_URL=mysql://…); the embedded SQLite store serves from one process (got WORKERS=${workers})`);
  }
  const ingestCommitsInFlight = int("INGEST_COMMITS_IN_FLIGHT", 2, 1, 64);
  const maxRequestsInFlight = int("MAX_REQUESTS_IN_FLIGHT", 256, 1, 100_000);
  // At least the largest body one request may send, or such a request could never be admitted.
  const maxRequestBytesInFlight = int("MAX_REQUEST_BYTES_IN_FLIGHT", 16 * 1024 * 1024, LARGEST_BODY_BYTES, 2 ** 40);
  const maxBulkRequestsInFlight = int("MAX_BULK_REQUESTS_IN_FLIGHT", 1, 1, 10_000);
  const formBodyTimeoutMs = int("FORM_BODY_TIMEOUT_MS", 5_000, 100, 60_000);
  const maxFormBodiesInFlight = int("MAX_FORM_BODIES_IN_FLIGHT", 256, 1, 100_000);
  const maxReflectionStreams = int("MAX_REFLECTION_STREAMS", 64, 1, 100_000);
  const reflectionStreamTimeoutMs = int("REFLECTION_STREAM_TIMEOUT_MS", 30_000, 100, 3_600_000);
  const shutdownTimeoutMs = int("SHUTDOWN_TIMEOUT_MS", 25_000, 0, 3_600_000);
  const bulkQueueTimeoutMs = int("BULK_QUEUE_TIMEOUT_MS", 5_000, 0, 60_000);
  // 16 KiB: a rate card or a batch of about a hundred events, a few milliseconds of the thread.
  const bulkLaneMinBytes = int("BULK_LANE_MIN_BYTES", 16 * 1024, 0, 1024 * 1024);

  // Above what one server has served one key in the benchmarks (README, Benchmarks), so that
  // no test or benchmark meets them; lower them (or per environment) to share a server fairly.
  const rate = (prefix: string, rpsDefault: number): Rate => {
    const rps = int(`${prefix}_RPS`, rpsDefault, 0, 1_000_000);
    const burst = int(`${prefix}_BURST`, 2 * rps, 0, 2_000_000);
    if (rps > 0 && burst < 1) problems.push(`${prefix}_BURST must be at least 1 when ${prefix}_RPS is not 0`);
    return Object.freeze({ rps, burst });
  };
  const rateLimits: RateLimits = Object.freeze({ ingest: rate("RATE_LIMIT_INGEST", 20_000), api: rate("RATE_LIMIT_API", 10_000) });

  const connections: ConnectionLimits = {
    prefaceTimeoutMs: int("HTTP_PREFACE_TIMEOUT_MS", 10_000, 100, 600_000),
    headersTimeoutMs: int("HTTP_HEADERS_TIMEOUT_MS", 10_000, 100, 600_000),
    requestTimeoutMs: int("HTTP_REQUEST_TIMEOUT_MS", 60_000, 100, 3_600_000),
    idleTimeoutMs: int("HTTP_IDLE_TIMEOUT_MS", 65_000, 100, 3_600_000),
    maxConnections: int("HTTP_MAX_CONNECTIONS", 4_096, 0, 1_000_000),
  };
  // Node refuses a header timeout longer than the request timeout (the headers are part of it).
  if (connections.headersTimeoutMs > connections.requestTimeoutMs) {
    problems.push(`HTTP_HEADERS_TIMEOUT_MS (${connections.headersTimeoutMs}) must not be more than HTTP_REQUEST_TIMEOUT_MS (${connections.requestTimeoutMs})`);
  }

  const metricsToken = env.METRICS_TOKEN || undefined;
  if (metricsToken !== undefined && !/^[\x21-\x7e]{16,256}$/.test(metricsToken)) {
    problems.push("METRICS_TOKEN must be 16 to 256 printable ASCII characters without spaces");
  }
  const buildCommit = env.BUILD_COMMIT?.trim() || undefined;
  if (buildCommit !== undefined && !/^[0-9A-Za-z._-]{1,64}$/.test(buildCommit)) {
    problems.push("BUILD_COMMIT must be 1 to 64 letters, digits, '.', '_' or '-' (a commit id or tag)");
  }
  const rawAllowPrivate = env.WEBHOOK_ALLOW_PRIVATE_HOSTS ?? "false";
  if (rawAllowPrivate !== "true" && rawAllowPrivate !== "false") problems.push("WEBHOOK_ALLOW_PRIVATE_HOSTS must be true or false");
  const rawPercents = (env.USAGE_THRESHOLD_PERCENTS ?? "80,100").trim();
  const thresholdPercents = rawPercents === "" ? [] : rawPercents.split(",").map((p) => p.trim());
  if (!thresholdPercents.every((p) => /^\d+$/.test(p) && Number(p) >= 1 && Number(p) <= 1000)) {
    problems.push(`USAGE_THRESHOLD_PERCENTS must be a comma-separated list of whole percentages from 1 to 1000 (got ${JSON.stringify(rawPercents)})`);
  }
  const webhooks: WebhookConfig = Object.freeze({
    deliveryIntervalMs: int("WEBHOOK_DELIVERY_INTERVAL_MS", 250, 0, 3_600_000),
    timeoutMs: int("WEBHOOK_TIMEOUT_MS", 10_000, 100, 120_000),
    retryBaseMs: int("WEBHOOK_RETRY_BASE_MS", 30_000, 1, 3_600_000),
    retryWindowSeconds: int("WEBHOOK_RETRY_WINDOW_SECONDS", 3 * 86_400, 1, 30 * 86_400),
    allowPrivateHosts: rawAllowPrivate === "true",
    thresholdPercents: [...new Set(thresholdPercents.map(Number))].filter((p) => p >= 1 && p <= 1000),
    thresholdCheckMs: int("USAGE_THRESHOLD_CHECK_INTERVAL_MS", 60_000, 1_000, 86_400_000),
  });

  const tracing = tracingConfig(env, problems, int("OTEL_BSP_SCHEDULE_DELAY", 5_000, 1, 600_000));

  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze({
    port,
    host,
    tls,
    databaseUrl,
    databaseStatementTimeoutMs,
    bootstrapApiKey,
    bootstrapEnvironmentMode,
    publicBaseUrl,
    logLevel,
    runMigrations: rawMigrate === "true",
    leanGrpc: rawLean === "on",
    apiKeyCacheMs,
    workers,
    schedulerIntervalMs,
    ingestCommitsInFlight,
    connections: Object.freeze(connections),
    maxRequestsInFlight,
    maxRequestBytesInFlight,
    maxBulkRequestsInFlight,
    formBodyTimeoutMs,
    maxFormBodiesInFlight,
    maxReflectionStreams,
    reflectionStreamTimeoutMs,
    shutdownTimeoutMs,
    bulkQueueTimeoutMs,
    bulkLaneMinBytes,
    rateLimits,
    metricsToken,
    buildCommit,
    webhooks,
    tracing,
    dashboardSessionSeconds,
  });
}

/**
 * Tracing's settings, from the OpenTelemetry SDK's standard variables: undefined unless
 * OTEL_EXPORTER_OTLP_ENDPOINT is set. Sampling is always on (parent-based: a caller's
 * `traceparent` that says "not sampled" is followed).
 */
function tracingConfig(env: Record<string, string | undefined>, problems: string[], scheduleDelayMs: number): TracingConfig | undefined {
  const raw = env.OTEL_EXPORTER_OTLP_ENDPOINT || undefined;
  if (raw === undefined) return undefined;
  let endpoint = "";
  try {
    const u = new URL(raw);
    if (u.protocol !== "http:" && u.protocol !== "https:") problems.push("OTEL_EXPORTER_OTLP_ENDPOINT must be an http or https URL (the OTLP/HTTP receiver, as in http://collector:4318)");
    // The signal's path goes after the base URL's own path (OTLP exporter specification).
    endpoint = `${raw.replace(/\/+$/, "")}/v1/traces`;
  } catch {
    problems.push(`OTEL_EXPORTER_OTLP_ENDPOINT is not a valid URL (got ${JSON.stringify(raw)})`);
  }
  const headers: Record<string, string> = {};
  for (const pair of (env.OTEL_EXPORTER_OTLP_HEADERS ?? "").split(",")) {
    if (pair.trim() === "") continue;
    const eq = pair.indexOf("=");
    const key = eq > 0 ? pair.slice(0, eq).trim() : "";
    let value: string | undefined;
    try {
      value = eq > 0 ? decodeURIComponent(pair.slice(eq + 1).trim()) : undefined;
    } catch {
      value = undefined;
    }
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(key) || value === undefined || !/^[\t\x20-\x7e]*$/.test(value)) {
      problems.push("OTEL_EXPORTER_OTLP_HEADERS must be comma-separated key=value pairs (header names; values URL-encoded printable ASCII)");
      break;
    }
    headers[key.toLowerCase()] = value;
  }
  const serviceName = env.OTEL_SERVICE_NAME || "usage-billing";
  return Object.freeze({ endpoint, headers: Object.freeze(headers), serviceName, scheduleDelayMs });
}

/**
 * The settings, with the env file (`--env-file PATH` of the server and the CLIs, else `ENV_FILE`)
 * read over the process environment, and where the database came from: a CLI and a server given
 * the same file work on the same database. The file is dotenv lines (`NAME=value`, `#` comments,
 * quoted values; Node's util.parseEnv). A variable set both in the environment and in the file, to
 * different values, is a ConfigError rather than one silently winning; an unreadable file too.
 */
export interface Settings {
  env: Record<string, string | undefined>;
  /** The env file read, or undefined. */
  envFile: string | undefined;
  /** Where DATABASE_URL came from: the env file, the process environment, or nowhere (the default). */
  databaseFrom: "env-file" | "environment" | "default";
}

export function readSettings(env: Record<string, string | undefined> = process.env, envFileFlag?: string): Settings {
  const envFile = envFileFlag ?? (env.ENV_FILE || undefined);
  const own = env.DATABASE_URL ? "environment" : "default";
  if (envFile === undefined) return { env, envFile, databaseFrom: own };
  let text: string;
  try {
    text = readFileSync(envFile, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new ConfigError([`the env file ${envFile} cannot be read (${code})`]);
  }
  const fromFile = parseEnv(text);
  const problems: string[] = [];
  const merged: Record<string, string | undefined> = { ...env };
  for (const [name, value] of Object.entries(fromFile)) {
    if (value === undefined) continue;
    const set = env[name];
    if (set !== undefined && set !== "" && set !== value) problems.push(`${name} is set both in the environment and in the env file ${envFile}, to different values: unset one`);
    merged[name] = value;
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return { env: merged, envFile, databaseFrom: fromFile.DATABASE_URL ? "env-file" : own };
}

/** Takes `--env-file PATH` (or `--env-file=PATH`) out of a command line (the server's or a CLI's), wherever it is. */
export function takeEnvFile(args: readonly string[]): { envFile: string | undefined; args: string[] } | { error: string } {
  const rest: string[] = [];
  let envFile: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const word = args[i] as string;
    if (word !== "--env-file" && !word.startsWith("--env-file=")) {
      rest.push(word);
      continue;
    }
    if (envFile !== undefined) return { error: "--env-file is given twice" };
    const value = word === "--env-file" ? args[++i] : word.slice("--env-file=".length);
    if (value === undefined || value === "" || value.startsWith("--")) return { error: "--env-file needs a path" };
    envFile = value;
  }
  return { envFile, args: rest };
}

/** A database URL fit to print: the password replaced by ***, a SQLite path made absolute. */
export function describeDatabase(url: string): string {
  const file = sqliteFile(url);
  if (file !== undefined) return `sqlite:${file}`;
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return url.replace(/\/\/([^:@/]*):[^@/]*@/, "//$1:***@");
  }
}

/** The SQLite file of a `sqlite:` URL, when it does not exist yet (the database would be new). */
export function missingSqliteFile(url: string): string | undefined {
  const file = sqliteFile(url);
  return file === undefined || file === ":memory:" || existsSync(file) ? undefined : file;
}

/** `sqlite:./data/billing.db` → its absolute path (as src/db/datasource.ts opens it); `:memory:` as it is. */
function sqliteFile(url: string): string | undefined {
  if (!url.startsWith("sqlite:")) return undefined;
  const path = url.slice("sqlite:".length).replace(/^\/\//, "");
  return path === ":memory:" ? path : resolve(path);
}
