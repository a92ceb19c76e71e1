/**
 * Configuration from the environment (DESIGN §2). The only module that reads process.env. A bad
 * value stops the start with one message that lists every problem.
 */
import type { EnvironmentMode } from "./billing/tenancy.js";
import type { SecretKeys } from "./billing/payments/secret-box.js";
import { EnvReader, readAdmission, readConnections, readDatabase, readRateLimitRedis, readRateLimits, readSecrets, readServing, readTracing, readWebhooks } from "./config-readers.js";

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
   * LEAN_GRPC (on/off, default on): unary binary gRPC is served by the lean path (src/edge/lean);
   * off sends every gRPC call through connect-node (the same answers, at about three times the
   * server CPU per call: bench/README.md, gRPC; for comparing the two paths).
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
  /** Connection limits of the shared port (src/edge/listener.ts `listen`). */
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
   * RATE_LIMIT_REDIS_URL: the rate limits' buckets in this Redis, shared by every server
   * (src/ratelimit-redis.ts); undefined: each server limits keys alone.
   */
  rateLimitRedis: RateLimitRedis | undefined;
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
  /**
   * SECRETS_ENCRYPTION_KEY and SECRETS_ENCRYPTION_KEY_PREVIOUS: the keys provider secrets are
   * sealed with at rest (src/billing/payments/secret-box.ts; the previous one only opens, during a
   * rotation); undefined: no secret can be stored (SECRETS_KEY_MISSING). Never logged.
   */
  secrets: SecretKeys | undefined;
  /**
   * STRIPE_API_BASE: where the Stripe library sends its calls (an http(s) URL; unset: Stripe's
   * own API): a local Stripe-compatible server in tests, or a proxy.
   */
  stripeApi: { host: string; port: number; protocol: "http" | "https" } | undefined;
  /**
   * BILLING_TEST_DIE_AFTER_CHARGE=1, tests only: the process kills itself (SIGKILL) right after a
   * Stripe PaymentIntent is made, before anything is committed (the crash test of DESIGN §12).
   */
  testDieAfterCharge: boolean;
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

/** Where the shared rate limits live (src/ratelimit-redis.ts). */
export interface RateLimitRedis {
  url: string;
  /** RATE_LIMIT_REDIS_PREFIX: this deployment's namespace (keys `<prefix>:<class>:<API key id>`). */
  prefix: string;
  /** RATE_LIMIT_REDIS_TIMEOUT_MS: the longest a request waits for Redis before this server's own bucket decides. */
  timeoutMs: number;
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

export { LARGEST_BODY_BYTES } from "./config-readers.js";

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
  }
}

/**
 * The configuration from `env`, every variable checked; a ConfigError lists every problem at once.
 * Each group of variables is read by its own reader (src/config-readers.ts).
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): Readonly<Config> {
  const r = new EnvReader(env);
  const serving = readServing(r);
  const database = readDatabase(r);
  const admission = readAdmission(r);
  const rateLimits = readRateLimits(r);
  const rateLimitRedis = readRateLimitRedis(r);
  const connections = readConnections(r);
  const webhooks = readWebhooks(r);
  const tracing = readTracing(r);
  const secrets = readSecrets(r);
  const stripeApi = readStripeApi(r);
  const testDieAfterCharge = r.choice("BILLING_TEST_DIE_AFTER_CHARGE", "0", "1", "0");
  if (r.problems.length > 0) throw new ConfigError(r.problems);
  return Object.freeze({ ...serving, ...database, ...admission, rateLimits, rateLimitRedis, connections, webhooks, tracing, secrets, stripeApi, testDieAfterCharge });
}

/** STRIPE_API_BASE as the Stripe library's host, port and protocol; unset: Stripe's own API. */
function readStripeApi(r: EnvReader): Config["stripeApi"] {
  const raw = r.env.STRIPE_API_BASE || undefined;
  if (raw === undefined) return undefined;
  try {
    const u = new URL(raw);
    if (u.protocol !== "http:" && u.protocol !== "https:") throw new Error("not http");
    const protocol = u.protocol === "http:" ? "http" : "https";
    return { host: u.hostname.replace(/^\[|\]$/g, ""), port: u.port ? Number(u.port) : protocol === "http" ? 80 : 443, protocol };
  } catch {
    r.problems.push("STRIPE_API_BASE must be an http or https URL");
    return undefined;
  }
}
