/**
 * The readers of src/config.ts's loadConfig, one per group of variables. Each checks its
 * variables and notes every problem on the EnvReader, so that one start reports them all. The
 * shapes they return are declared, with what each setting means, in src/config.ts (which checks
 * them); this module imports nothing of it, so that config.ts stays the one module others import.
 */
import { isIP } from "node:net";
import type { EnvironmentMode } from "./billing/tenancy.js";
import { parseSecretsKey } from "./billing/payments/secret-box.js";

/** The largest request body any route accepts (a usage-event batch): the byte bound's floor. */
export const LARGEST_BODY_BYTES = 5 * 1024 * 1024;

const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;
type LogLevel = (typeof LOG_LEVELS)[number];

/** The environment being read, and the problems found so far. */
export class EnvReader {
  readonly problems: string[] = [];
  constructor(readonly env: Record<string, string | undefined>) {}

  /** An integer variable from `min` to `max`; unset or empty is `fallback`. */
  int(name: string, fallback: number, min: number, max: number): number {
    const raw = this.env[name];
    if (raw === undefined || raw === "") return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      this.problems.push(`${name} must be an integer from ${min} to ${max} (got ${JSON.stringify(raw)})`);
      return fallback;
    }
    return Number(raw);
  }

  /** A variable that is one of two words (`yes`/`no`): whether it is `yes`. */
  choice(name: string, fallback: string, yes: string, no: string): boolean {
    const raw = this.env[name] ?? fallback;
    if (raw !== yes && raw !== no) this.problems.push(`${name} must be ${yes} or ${no} (got ${JSON.stringify(raw)})`);
    return raw === yes;
  }
}

/** The port and how it is served: address, TLS, the bootstrap key, public URL, logs, keys, metrics. */
export function readServing(r: EnvReader) {
  const { env, problems } = r;
  const port = r.int("PORT", 8080, 0, 65535);
  const host = env.HOST || undefined;
  if (host !== undefined && isIP(host) === 0 && !/^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/.test(host)) {
    problems.push(`HOST must be an IP address (127.0.0.1, ::1, 0.0.0.0) or a host name (got ${JSON.stringify(host)})`);
  }
  const bootstrapApiKey = env.BILLING_BOOTSTRAP_API_KEY || undefined;
  if (bootstrapApiKey !== undefined && !/^sk_(test|live)_[0-9A-Za-z]{16,}$/.test(bootstrapApiKey)) {
    problems.push("BILLING_BOOTSTRAP_API_KEY must look like sk_test_ or sk_live_ followed by at least 16 letters or digits");
  }
  const bootstrapEnvironmentMode: EnvironmentMode = bootstrapApiKey?.startsWith("sk_live_") ? "live" : "test";
  const logLevel = (env.LOG_LEVEL || "info") as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(", ")}`);
  const leanGrpc = r.choice("LEAN_GRPC", "on", "on", "off");
  const apiKeyCacheMs = r.int("API_KEY_CACHE_MS", 2_000, 0, 60_000);
  const dashboardSessionSeconds = r.int("DASHBOARD_SESSION_SECONDS", 8 * 3600, 1, 30 * 86400);
  const metricsToken = env.METRICS_TOKEN || undefined;
  if (metricsToken !== undefined && !/^[\x21-\x7e]{16,256}$/.test(metricsToken)) {
    problems.push("METRICS_TOKEN must be 16 to 256 printable ASCII characters without spaces");
  }
  const buildCommit = env.BUILD_COMMIT?.trim() || undefined;
  if (buildCommit !== undefined && !/^[0-9A-Za-z._-]{1,64}$/.test(buildCommit)) {
    problems.push("BUILD_COMMIT must be 1 to 64 letters, digits, '.', '_' or '-' (a commit id or tag)");
  }
  const serving = { port, host, tls: readTls(r), bootstrapApiKey, bootstrapEnvironmentMode, publicBaseUrl: readPublicBaseUrl(r), logLevel, leanGrpc };
  return { ...serving, apiKeyCacheMs, dashboardSessionSeconds, metricsToken, buildCommit };
}

/** TLS_CERT_FILE and TLS_KEY_FILE: both (TLS) or neither (cleartext). */
function readTls(r: EnvReader) {
  const certFile = r.env.TLS_CERT_FILE || undefined;
  const keyFile = r.env.TLS_KEY_FILE || undefined;
  if ((certFile === undefined) !== (keyFile === undefined)) {
    r.problems.push(`TLS_CERT_FILE and TLS_KEY_FILE go together: ${certFile === undefined ? "TLS_KEY_FILE is set but TLS_CERT_FILE is not" : "TLS_CERT_FILE is set but TLS_KEY_FILE is not"}`);
  }
  return certFile !== undefined && keyFile !== undefined ? Object.freeze({ certFile, keyFile }) : undefined;
}

/** PUBLIC_BASE_URL without its trailing slashes. */
function readPublicBaseUrl(r: EnvReader): string | undefined {
  const raw = r.env.PUBLIC_BASE_URL || undefined;
  if (raw === undefined) return undefined;
  try {
    const u = new URL(raw);
    if (u.protocol !== "http:" && u.protocol !== "https:") r.problems.push("PUBLIC_BASE_URL must be an http or https URL");
    return raw.replace(/\/+$/, "");
  } catch {
    r.problems.push("PUBLIC_BASE_URL is not a valid URL");
    return raw;
  }
}

/** The database, its statement bound and migrations, and the work that runs against it. */
export function readDatabase(r: EnvReader) {
  const databaseUrl = r.env.DATABASE_URL || "sqlite:./data/billing.db";
  if (!/^(sqlite:|mysql:\/\/|mariadb:\/\/)/.test(databaseUrl)) {
    r.problems.push("DATABASE_URL must start with sqlite:, mysql:// or mariadb:// (for example mysql://user:pass@host:3306/db)");
  } else if (!databaseUrl.startsWith("sqlite:")) {
    try {
      const u = new URL(databaseUrl.replace(/^mariadb:/, "mysql:"));
      if (u.pathname.length <= 1) r.problems.push("DATABASE_URL must name a database, as in mysql://user:pass@host:3306/db");
    } catch {
      r.problems.push("DATABASE_URL is not a valid URL");
    }
  }
  // 5 s: the longest statements of normal work (a 1,000-event batch's totals, a cycle's invoice
  // lines, a row lock waited for in a race of cycle closes) took at most 0.8 s on a loaded
  // two-core machine; a request that waits longer has usually been given up by its caller anyway.
  const databaseStatementTimeoutMs = r.int("DATABASE_STATEMENT_TIMEOUT_MS", 5_000, 100, 600_000);
  const runMigrations = r.choice("RUN_MIGRATIONS", "true", "true", "false");
  const schedulerIntervalMs = r.int("SCHEDULER_INTERVAL_MS", 5_000, 0, 3_600_000);
  const workers = r.int("WORKERS", 1, 1, 64);
  if (workers > 1 && databaseUrl.startsWith("sqlite:")) {
    // One file, one writer at a time: more processes would only queue on its lock (and each
    // would checkpoint and sync the same WAL); the embedded store is for one process.
    r.problems.push(`WORKERS above 1 needs MySQL or MariaDB (DATABASE_URL=mysql://…); the embedded SQLite store serves from one process (got WORKERS=${workers})`);
  }
  const ingestCommitsInFlight = r.int("INGEST_COMMITS_IN_FLIGHT", 2, 1, 64);
  return { databaseUrl, databaseStatementTimeoutMs, runMigrations, workers, schedulerIntervalMs, ingestCommitsInFlight };
}

/** Admission control (DESIGN §10): what this server takes in at once, and its shutdown drain. */
export function readAdmission(r: EnvReader) {
  return {
    maxRequestsInFlight: r.int("MAX_REQUESTS_IN_FLIGHT", 256, 1, 100_000),
    // At least the largest body one request may send, or such a request could never be admitted.
    maxRequestBytesInFlight: r.int("MAX_REQUEST_BYTES_IN_FLIGHT", 16 * 1024 * 1024, LARGEST_BODY_BYTES, 2 ** 40),
    maxBulkRequestsInFlight: r.int("MAX_BULK_REQUESTS_IN_FLIGHT", 1, 1, 10_000),
    formBodyTimeoutMs: r.int("FORM_BODY_TIMEOUT_MS", 5_000, 100, 60_000),
    maxFormBodiesInFlight: r.int("MAX_FORM_BODIES_IN_FLIGHT", 256, 1, 100_000),
    maxReflectionStreams: r.int("MAX_REFLECTION_STREAMS", 64, 1, 100_000),
    reflectionStreamTimeoutMs: r.int("REFLECTION_STREAM_TIMEOUT_MS", 30_000, 100, 3_600_000),
    shutdownTimeoutMs: r.int("SHUTDOWN_TIMEOUT_MS", 25_000, 0, 3_600_000),
    bulkQueueTimeoutMs: r.int("BULK_QUEUE_TIMEOUT_MS", 5_000, 0, 60_000),
    // 16 KiB: a rate card or a batch of about a hundred events, a few milliseconds of the thread.
    bulkLaneMinBytes: r.int("BULK_LANE_MIN_BYTES", 16 * 1024, 0, 1024 * 1024),
  };
}

/**
 * Per-key rate limits. The defaults are above what one server has served one key in the
 * benchmarks (bench/README.md), so that no test or benchmark meets them; lower them (or per
 * environment) to share a server fairly.
 */
export function readRateLimits(r: EnvReader) {
  const rate = (prefix: string, rpsDefault: number) => {
    const rps = r.int(`${prefix}_RPS`, rpsDefault, 0, 1_000_000);
    const burst = r.int(`${prefix}_BURST`, 2 * rps, 0, 2_000_000);
    if (rps > 0 && burst < 1) r.problems.push(`${prefix}_BURST must be at least 1 when ${prefix}_RPS is not 0`);
    return Object.freeze({ rps, burst });
  };
  return Object.freeze({ ingest: rate("RATE_LIMIT_INGEST", 20_000), api: rate("RATE_LIMIT_API", 10_000) });
}

/**
 * RATE_LIMIT_REDIS_URL (unset: each server limits keys alone), its key prefix and the bound of
 * each call. The URL may hold a password: a bad one is named, never shown.
 */
export function readRateLimitRedis(r: EnvReader) {
  const prefix = r.env.RATE_LIMIT_REDIS_PREFIX || "billing:rl";
  if (!/^[\x21-\x7e]{1,100}$/.test(prefix)) r.problems.push(`RATE_LIMIT_REDIS_PREFIX must be 1 to 100 printable ASCII characters without spaces (got ${JSON.stringify(prefix)})`);
  const timeoutMs = r.int("RATE_LIMIT_REDIS_TIMEOUT_MS", 50, 1, 5_000);
  const url = r.env.RATE_LIMIT_REDIS_URL || undefined;
  if (url === undefined) return undefined;
  let ok = false;
  try {
    const u = new URL(url);
    ok = (u.protocol === "redis:" || u.protocol === "rediss:") && u.hostname !== "" && /^(\/\d{0,2})?$/.test(u.pathname);
  } catch {
    ok = false;
  }
  if (!ok) r.problems.push("RATE_LIMIT_REDIS_URL must be a redis:// or rediss:// URL with a host (as in redis://127.0.0.1:6379 or redis://:password@host:6379/0)");
  return Object.freeze({ url, prefix: prefix.replace(/:+$/, ""), timeoutMs });
}

/** The port's connection timeouts and cap. */
export function readConnections(r: EnvReader) {
  const connections = {
    prefaceTimeoutMs: r.int("HTTP_PREFACE_TIMEOUT_MS", 10_000, 100, 600_000),
    headersTimeoutMs: r.int("HTTP_HEADERS_TIMEOUT_MS", 10_000, 100, 600_000),
    requestTimeoutMs: r.int("HTTP_REQUEST_TIMEOUT_MS", 60_000, 100, 3_600_000),
    idleTimeoutMs: r.int("HTTP_IDLE_TIMEOUT_MS", 65_000, 100, 3_600_000),
    maxConnections: r.int("HTTP_MAX_CONNECTIONS", 4_096, 0, 1_000_000),
  };
  // Node refuses a header timeout longer than the request timeout (the headers are part of it).
  if (connections.headersTimeoutMs > connections.requestTimeoutMs) {
    r.problems.push(`HTTP_HEADERS_TIMEOUT_MS (${connections.headersTimeoutMs}) must not be more than HTTP_REQUEST_TIMEOUT_MS (${connections.requestTimeoutMs})`);
  }
  return Object.freeze(connections);
}

/** Outgoing webhooks: delivery, retries, private hosts and usage thresholds. */
export function readWebhooks(r: EnvReader) {
  const allowPrivateHosts = r.choice("WEBHOOK_ALLOW_PRIVATE_HOSTS", "false", "true", "false");
  const rawPercents = (r.env.USAGE_THRESHOLD_PERCENTS ?? "80,100").trim();
  const thresholdPercents = rawPercents === "" ? [] : rawPercents.split(",").map((p) => p.trim());
  if (!thresholdPercents.every((p) => /^\d+$/.test(p) && Number(p) >= 1 && Number(p) <= 1000)) {
    r.problems.push(`USAGE_THRESHOLD_PERCENTS must be a comma-separated list of whole percentages from 1 to 1000 (got ${JSON.stringify(rawPercents)})`);
  }
  return Object.freeze({
    deliveryIntervalMs: r.int("WEBHOOK_DELIVERY_INTERVAL_MS", 250, 0, 3_600_000),
    timeoutMs: r.int("WEBHOOK_TIMEOUT_MS", 10_000, 100, 120_000),
    retryBaseMs: r.int("WEBHOOK_RETRY_BASE_MS", 30_000, 1, 3_600_000),
    retryWindowSeconds: r.int("WEBHOOK_RETRY_WINDOW_SECONDS", 3 * 86_400, 1, 30 * 86_400),
    allowPrivateHosts,
    thresholdPercents: [...new Set(thresholdPercents.map(Number))].filter((p) => p >= 1 && p <= 1000),
    thresholdCheckMs: r.int("USAGE_THRESHOLD_CHECK_INTERVAL_MS", 60_000, 1_000, 86_400_000),
  });
}

/**
 * Tracing's settings, from the OpenTelemetry SDK's standard variables: undefined unless
 * OTEL_EXPORTER_OTLP_ENDPOINT is set. Sampling is always on (parent-based: a caller's
 * `traceparent` that says "not sampled" is followed).
 */
export function readTracing(r: EnvReader) {
  const scheduleDelayMs = r.int("OTEL_BSP_SCHEDULE_DELAY", 5_000, 1, 600_000);
  const raw = r.env.OTEL_EXPORTER_OTLP_ENDPOINT || undefined;
  if (raw === undefined) return undefined;
  let endpoint = "";
  try {
    const u = new URL(raw);
    if (u.protocol !== "http:" && u.protocol !== "https:") r.problems.push("OTEL_EXPORTER_OTLP_ENDPOINT must be an http or https URL (the OTLP/HTTP receiver, as in http://collector:4318)");
    // The signal's path goes after the base URL's own path (OTLP exporter specification).
    endpoint = `${raw.replace(/\/+$/, "")}/v1/traces`;
  } catch {
    r.problems.push(`OTEL_EXPORTER_OTLP_ENDPOINT is not a valid URL (got ${JSON.stringify(raw)})`);
  }
  const serviceName = r.env.OTEL_SERVICE_NAME || "usage-billing";
  return Object.freeze({ endpoint, headers: Object.freeze(otlpHeaders(r)), serviceName, scheduleDelayMs });
}

/** OTEL_EXPORTER_OTLP_HEADERS: `key=value` pairs, comma-separated, values URL-encoded. */
function otlpHeaders(r: EnvReader): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const pair of (r.env.OTEL_EXPORTER_OTLP_HEADERS ?? "").split(",")) {
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
      r.problems.push("OTEL_EXPORTER_OTLP_HEADERS must be comma-separated key=value pairs (header names; values URL-encoded printable ASCII)");
      break;
    }
    headers[key.toLowerCase()] = value;
  }
  return headers;
}

/**
 * SECRETS_ENCRYPTION_KEY (and _PREVIOUS, during a rotation): 32 bytes, 64 hex digits or base64.
 * Unset: provider secrets cannot be stored. A bad value is named, never shown.
 */
export function readSecrets(r: EnvReader) {
  const key = (name: string): Buffer | undefined => {
    const raw = r.env[name];
    if (raw === undefined || raw === "") return undefined;
    const k = parseSecretsKey(raw);
    if (!k) r.problems.push(`${name} must be 32 bytes written as 64 hex digits or in base64 (for example: openssl rand -base64 32)`);
    return k;
  };
  const current = key("SECRETS_ENCRYPTION_KEY");
  const previous = key("SECRETS_ENCRYPTION_KEY_PREVIOUS");
  if (previous && !current) r.problems.push("SECRETS_ENCRYPTION_KEY_PREVIOUS is set but SECRETS_ENCRYPTION_KEY is not: set the new key as SECRETS_ENCRYPTION_KEY");
  return current ? Object.freeze({ current, ...(previous ? { previous } : {}) }) : undefined;
}
