import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import test from "ava";
import { ConfigError, loadConfig } from "../src/config.js";
import { describeDatabase, readSettings, takeEnvFile } from "../src/env-file.js";

test("defaults: port 8080, embedded SQLite, info logs", (t) => {
  const c = loadConfig({});
  t.is(c.port, 8080);
  t.is(c.databaseUrl, "sqlite:./data/billing.db");
  t.is(c.publicBaseUrl, undefined, "derived from the port actually bound");
  t.is(c.logLevel, "info");
  t.true(c.runMigrations);
  t.is(c.bootstrapApiKey, undefined);
  t.is(c.apiKeyCacheMs, 2000);
});

test("every problem is reported at once", (t) => {
  const err = t.throws(() => loadConfig({ PORT: "http", DATABASE_URL: "postgres://x", LOG_LEVEL: "loud", BILLING_BOOTSTRAP_API_KEY: "short", PUBLIC_BASE_URL: "ftp://x" }), {
    instanceOf: ConfigError,
  }) as ConfigError;
  t.is(err.problems.length, 5);
  for (const name of ["PORT", "DATABASE_URL", "LOG_LEVEL", "BILLING_BOOTSTRAP_API_KEY", "PUBLIC_BASE_URL"]) {
    t.true(
      err.problems.some((p) => p.startsWith(name)),
      name,
    );
  }
});

test("a live bootstrap key makes a live environment; PUBLIC_BASE_URL loses its trailing slash", (t) => {
  const c = loadConfig({ BILLING_BOOTSTRAP_API_KEY: "sk_live_abcdefghijklmnop", PUBLIC_BASE_URL: "https://billing.example.com/" });
  t.is(c.bootstrapEnvironmentMode, "live");
  t.is(c.publicBaseUrl, "https://billing.example.com");
});

test("connection limits: defaults, and bad values reported by name", (t) => {
  t.deepEqual(loadConfig({}).connections, {
    prefaceTimeoutMs: 10_000,
    headersTimeoutMs: 10_000,
    requestTimeoutMs: 60_000,
    idleTimeoutMs: 65_000,
    maxConnections: 4_096,
  });
  t.is(loadConfig({ HTTP_MAX_CONNECTIONS: "0" }).connections.maxConnections, 0, "0: no cap");
  const err = t.throws(() => loadConfig({ HTTP_PREFACE_TIMEOUT_MS: "0", HTTP_IDLE_TIMEOUT_MS: "1s", HTTP_MAX_CONNECTIONS: "-1" }), { instanceOf: ConfigError }) as ConfigError;
  t.deepEqual(
    err.problems.map((p) => p.split(" ", 1)[0]),
    ["HTTP_PREFACE_TIMEOUT_MS", "HTTP_IDLE_TIMEOUT_MS", "HTTP_MAX_CONNECTIONS"],
  );
  const order = t.throws(() => loadConfig({ HTTP_HEADERS_TIMEOUT_MS: "20000", HTTP_REQUEST_TIMEOUT_MS: "15000" }), { instanceOf: ConfigError }) as ConfigError;
  t.regex(order.problems[0]!, /^HTTP_HEADERS_TIMEOUT_MS \(20000\) must not be more than HTTP_REQUEST_TIMEOUT_MS \(15000\)/);
});

test("admission control: defaults, and a byte bound below the largest body is refused", (t) => {
  const c = loadConfig({});
  t.is(c.maxRequestsInFlight, 256);
  t.is(c.maxRequestBytesInFlight, 16 * 1024 * 1024);
  t.is(c.maxBulkRequestsInFlight, 1);
  t.is(c.bulkQueueTimeoutMs, 5_000);
  t.is(c.bulkLaneMinBytes, 16 * 1024);
  const set = loadConfig({ MAX_REQUESTS_IN_FLIGHT: "8", MAX_REQUEST_BYTES_IN_FLIGHT: String(6 * 1024 * 1024), MAX_BULK_REQUESTS_IN_FLIGHT: "4", BULK_LANE_MIN_BYTES: "0" });
  t.deepEqual([set.maxRequestsInFlight, set.maxRequestBytesInFlight, set.maxBulkRequestsInFlight, set.bulkLaneMinBytes], [8, 6 * 1024 * 1024, 4, 0]);
  const err = t.throws(() => loadConfig({ MAX_REQUESTS_IN_FLIGHT: "0", MAX_REQUEST_BYTES_IN_FLIGHT: "1024", MAX_BULK_REQUESTS_IN_FLIGHT: "0", BULK_LANE_MIN_BYTES: "-1" }), {
    instanceOf: ConfigError,
  }) as ConfigError;
  t.deepEqual(
    err.problems.map((p) => p.split(" ", 1)[0]),
    ["MAX_REQUESTS_IN_FLIGHT", "MAX_REQUEST_BYTES_IN_FLIGHT", "MAX_BULK_REQUESTS_IN_FLIGHT", "BULK_LANE_MIN_BYTES"],
  );
});

test("rate limits: defaults, burst twice the rate unless set, 0 unlimited, bad values reported by name", (t) => {
  t.deepEqual(loadConfig({}).rateLimits, { ingest: { rps: 20_000, burst: 40_000 }, api: { rps: 10_000, burst: 20_000 } });
  const c = loadConfig({ RATE_LIMIT_INGEST_RPS: "50", RATE_LIMIT_API_RPS: "5", RATE_LIMIT_API_BURST: "7" });
  t.deepEqual(c.rateLimits, { ingest: { rps: 50, burst: 100 }, api: { rps: 5, burst: 7 } });
  t.deepEqual(loadConfig({ RATE_LIMIT_API_RPS: "0" }).rateLimits.api, { rps: 0, burst: 0 }, "0: unlimited");
  const err = t.throws(() => loadConfig({ RATE_LIMIT_INGEST_RPS: "-1", RATE_LIMIT_API_RPS: "1.5", RATE_LIMIT_INGEST_BURST: "lots" }), { instanceOf: ConfigError }) as ConfigError;
  t.is(err.problems.length, 3);
  for (const name of ["RATE_LIMIT_INGEST_RPS", "RATE_LIMIT_API_RPS", "RATE_LIMIT_INGEST_BURST"])
    t.true(
      err.problems.some((p) => p.startsWith(name)),
      name,
    );
  const zero = t.throws(() => loadConfig({ RATE_LIMIT_API_RPS: "10", RATE_LIMIT_API_BURST: "0" }), { instanceOf: ConfigError }) as ConfigError;
  t.deepEqual(zero.problems, ["RATE_LIMIT_API_BURST must be at least 1 when RATE_LIMIT_API_RPS is not 0"]);
});

test("RATE_LIMIT_REDIS_URL: unset, each server limits alone; a redis:// URL with its prefix and bound; a malformed one refused by name, never shown", (t) => {
  t.is(loadConfig({}).rateLimitRedis, undefined);
  t.deepEqual(loadConfig({ RATE_LIMIT_REDIS_URL: "redis://127.0.0.1:6379" }).rateLimitRedis, { url: "redis://127.0.0.1:6379", prefix: "billing:rl", timeoutMs: 50 });
  t.deepEqual(loadConfig({ RATE_LIMIT_REDIS_URL: "rediss://:s3cret@cache.internal:6380/2", RATE_LIMIT_REDIS_PREFIX: "eu-prod:rl:", RATE_LIMIT_REDIS_TIMEOUT_MS: "20" }).rateLimitRedis, {
    url: "rediss://:s3cret@cache.internal:6380/2",
    prefix: "eu-prod:rl",
    timeoutMs: 20,
  });
  for (const bad of ["127.0.0.1:6379", "http://127.0.0.1:6379", "redis://", "redis://:pw@host:6379/not-a-db", "not a url"]) {
    const err = t.throws(() => loadConfig({ RATE_LIMIT_REDIS_URL: bad }), { instanceOf: ConfigError }) as ConfigError;
    t.is(err.problems.length, 1, bad);
    t.regex(err.problems[0] ?? "", /^RATE_LIMIT_REDIS_URL must be a redis:\/\/ or rediss:\/\/ URL/, bad);
    t.false(err.message.includes(":pw@"), "the URL (it may hold a password) is not shown");
  }
  const err = t.throws(() => loadConfig({ RATE_LIMIT_REDIS_PREFIX: "has space", RATE_LIMIT_REDIS_TIMEOUT_MS: "0" }), { instanceOf: ConfigError }) as ConfigError;
  t.deepEqual(
    err.problems.map((p) => p.split(" ")[0]),
    ["RATE_LIMIT_REDIS_PREFIX", "RATE_LIMIT_REDIS_TIMEOUT_MS"],
  );
});

test("METRICS_TOKEN: unset by default (/metrics open); a short or spaced token is refused by name", (t) => {
  t.is(loadConfig({}).metricsToken, undefined);
  t.is(loadConfig({ METRICS_TOKEN: "scrape-0123456789abcdef" }).metricsToken, "scrape-0123456789abcdef");
  for (const bad of ["short", "has a space in it 0123456789"]) {
    const err = t.throws(() => loadConfig({ METRICS_TOKEN: bad }), { instanceOf: ConfigError }) as ConfigError;
    t.true(err.problems[0]?.startsWith("METRICS_TOKEN"), bad);
  }
});

test("BUILD_COMMIT: unset by default (git at start, else unknown); a value that is no commit id or tag is refused by name", (t) => {
  t.is(loadConfig({}).buildCommit, undefined);
  t.is(loadConfig({ BUILD_COMMIT: " 5fb20d3a " }).buildCommit, "5fb20d3a");
  t.is(loadConfig({ BUILD_COMMIT: "v1.2.3-rc_1" }).buildCommit, "v1.2.3-rc_1");
  for (const bad of ["has space", 'quote"', "x".repeat(65)]) {
    const err = t.throws(() => loadConfig({ BUILD_COMMIT: bad }), { instanceOf: ConfigError }) as ConfigError;
    t.true(err.problems[0]?.startsWith("BUILD_COMMIT"), bad);
  }
});

test("WORKERS: 1 by default; above 1 on MySQL/MariaDB only, refused on the embedded SQLite store", (t) => {
  t.is(loadConfig({}).workers, 1);
  t.is(loadConfig({ WORKERS: "3", DATABASE_URL: "mysql://root@127.0.0.1:3306/billing" }).workers, 3);
  t.is(loadConfig({ WORKERS: "1", DATABASE_URL: "sqlite:./x.db" }).workers, 1);
  const sqlite = t.throws(() => loadConfig({ WORKERS: "2" }), { instanceOf: ConfigError }) as ConfigError;
  t.deepEqual(sqlite.problems, ["WORKERS above 1 needs MySQL or MariaDB (DATABASE_URL=mysql://…); the embedded SQLite store serves from one process (got WORKERS=2)"]);
  for (const bad of ["0", "65", "two"]) {
    const err = t.throws(() => loadConfig({ WORKERS: bad, DATABASE_URL: "mysql://root@127.0.0.1:3306/billing" }), { instanceOf: ConfigError }) as ConfigError;
    t.true(err.problems[0]?.startsWith("WORKERS must be an integer from 1 to 64"), bad);
  }
});

test("DATABASE_STATEMENT_TIMEOUT_MS: 5 s by default; from 100 ms to 10 minutes", (t) => {
  t.is(loadConfig({}).databaseStatementTimeoutMs, 5_000);
  t.is(loadConfig({ DATABASE_STATEMENT_TIMEOUT_MS: "100" }).databaseStatementTimeoutMs, 100);
  t.is(loadConfig({ DATABASE_STATEMENT_TIMEOUT_MS: "600000" }).databaseStatementTimeoutMs, 600_000);
  for (const bad of ["0", "99", "600001", "5s", "-1"]) {
    const err = t.throws(() => loadConfig({ DATABASE_STATEMENT_TIMEOUT_MS: bad }), { instanceOf: ConfigError }) as ConfigError;
    t.deepEqual(err.problems, [`DATABASE_STATEMENT_TIMEOUT_MS must be an integer from 100 to 600000 (got ${JSON.stringify(bad)})`], bad);
  }
});

test("key-less form bodies and the shutdown drain: defaults, bounds, bad values reported by name", (t) => {
  const d = loadConfig({});
  t.deepEqual([d.formBodyTimeoutMs, d.maxFormBodiesInFlight, d.shutdownTimeoutMs], [5_000, 256, 25_000]);
  const set = loadConfig({ FORM_BODY_TIMEOUT_MS: "100", MAX_FORM_BODIES_IN_FLIGHT: "1", SHUTDOWN_TIMEOUT_MS: "0" });
  t.deepEqual([set.formBodyTimeoutMs, set.maxFormBodiesInFlight, set.shutdownTimeoutMs], [100, 1, 0]);
  const err = t.throws(() => loadConfig({ FORM_BODY_TIMEOUT_MS: "99", MAX_FORM_BODIES_IN_FLIGHT: "0", SHUTDOWN_TIMEOUT_MS: "1h" }), { instanceOf: ConfigError }) as ConfigError;
  t.deepEqual(err.problems, [
    'FORM_BODY_TIMEOUT_MS must be an integer from 100 to 60000 (got "99")',
    'MAX_FORM_BODIES_IN_FLIGHT must be an integer from 1 to 100000 (got "0")',
    'SHUTDOWN_TIMEOUT_MS must be an integer from 0 to 3600000 (got "1h")',
  ]);
});

test("key-less reflection streams: defaults, bounds, bad values reported by name", (t) => {
  const d = loadConfig({});
  t.deepEqual([d.maxReflectionStreams, d.reflectionStreamTimeoutMs], [64, 30_000]);
  const set = loadConfig({ MAX_REFLECTION_STREAMS: "1", REFLECTION_STREAM_TIMEOUT_MS: "100" });
  t.deepEqual([set.maxReflectionStreams, set.reflectionStreamTimeoutMs], [1, 100]);
  const err = t.throws(() => loadConfig({ MAX_REFLECTION_STREAMS: "0", REFLECTION_STREAM_TIMEOUT_MS: "99" }), { instanceOf: ConfigError }) as ConfigError;
  t.deepEqual(err.problems, ['MAX_REFLECTION_STREAMS must be an integer from 1 to 100000 (got "0")', 'REFLECTION_STREAM_TIMEOUT_MS must be an integer from 100 to 3600000 (got "99")']);
});

test("tracing: off unless OTEL_EXPORTER_OTLP_ENDPOINT is set; spans to <endpoint>/v1/traces, service usage-billing, headers and batch delay read", (t) => {
  t.is(loadConfig({}).tracing, undefined);
  t.is(loadConfig({ OTEL_SERVICE_NAME: "ignored", OTEL_BSP_SCHEDULE_DELAY: "100" }).tracing, undefined, "nothing without the endpoint");
  t.deepEqual(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }).tracing, {
    endpoint: "http://collector:4318/v1/traces",
    headers: {},
    serviceName: "usage-billing",
    scheduleDelayMs: 5000,
  });
  t.deepEqual(
    loadConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: "https://otel.example/base/",
      OTEL_EXPORTER_OTLP_HEADERS: "Authorization=Bearer%20abc, x-tenant = blue",
      OTEL_SERVICE_NAME: "billing-eu",
      OTEL_BSP_SCHEDULE_DELAY: "250",
    }).tracing,
    { endpoint: "https://otel.example/base/v1/traces", headers: { authorization: "Bearer abc", "x-tenant": "blue" }, serviceName: "billing-eu", scheduleDelayMs: 250 },
  );
  const bad = t.throws(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318", OTEL_EXPORTER_OTLP_HEADERS: "no-equals-sign", OTEL_BSP_SCHEDULE_DELAY: "soon" }), {
    instanceOf: ConfigError,
  }) as ConfigError;
  t.deepEqual(
    bad.problems.map((p) => p.split(" ")[0]),
    ["OTEL_BSP_SCHEDULE_DELAY", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_HEADERS"],
  );
  const notUrl = t.throws(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "not a url" }), { instanceOf: ConfigError }) as ConfigError;
  t.regex(notUrl.problems[0] ?? "", /^OTEL_EXPORTER_OTLP_ENDPOINT is not a valid URL/);
});

test("HOST: unset binds every interface; an address or host name is kept; anything else is refused by name", (t) => {
  t.is(loadConfig({}).host, undefined);
  for (const host of ["127.0.0.1", "::1", "0.0.0.0", "::", "billing.internal", "localhost"]) t.is(loadConfig({ HOST: host }).host, host);
  for (const host of ["http://x", "1.2.3.4:80", "a b", "[::1]"]) {
    const err = t.throws(() => loadConfig({ HOST: host }), { instanceOf: ConfigError }) as ConfigError;
    t.true(err.problems[0]?.startsWith("HOST must be an IP address"), host);
  }
});

test("TLS_CERT_FILE and TLS_KEY_FILE: neither is cleartext, both are TLS, one alone is refused naming the other", (t) => {
  t.is(loadConfig({}).tls, undefined);
  t.deepEqual(loadConfig({ TLS_CERT_FILE: "/etc/billing/cert.pem", TLS_KEY_FILE: "/etc/billing/key.pem" }).tls, { certFile: "/etc/billing/cert.pem", keyFile: "/etc/billing/key.pem" });
  const noKey = t.throws(() => loadConfig({ TLS_CERT_FILE: "/c.pem" }), { instanceOf: ConfigError }) as ConfigError;
  t.deepEqual(noKey.problems, ["TLS_CERT_FILE and TLS_KEY_FILE go together: TLS_CERT_FILE is set but TLS_KEY_FILE is not"]);
  const noCert = t.throws(() => loadConfig({ TLS_KEY_FILE: "/k.pem" }), { instanceOf: ConfigError }) as ConfigError;
  t.deepEqual(noCert.problems, ["TLS_CERT_FILE and TLS_KEY_FILE go together: TLS_KEY_FILE is set but TLS_CERT_FILE is not"]);
});

test("the env file (ENV_FILE or --env-file) is read over the environment; a conflict or an unreadable file is an error", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "config-env-file-"));
  const file = join(dir, "billing.env");
  writeFileSync(file, '# comment\nDATABASE_URL="mysql://billing:s3cret@db:3306/billing"\nPORT=9090\n');
  try {
    const viaVariable = readSettings({ ENV_FILE: file, LOG_LEVEL: "debug" });
    t.is(viaVariable.env.DATABASE_URL, "mysql://billing:s3cret@db:3306/billing");
    t.is(viaVariable.databaseFrom, "env-file");
    t.is(loadConfig(viaVariable.env).port, 9090);
    t.is(loadConfig(viaVariable.env).logLevel, "debug", "the environment's own settings stay");
    t.is(readSettings({ PORT: "9090" }, file).envFile, file, "the flag names the file");
    t.is(readSettings({ DATABASE_URL: "sqlite:x.db" }).databaseFrom, "environment");
    t.is(readSettings({}).databaseFrom, "default");
    const conflict = t.throws(() => readSettings({ DATABASE_URL: "sqlite:other.db", PORT: "1" }, file), { instanceOf: ConfigError }) as ConfigError;
    t.is(conflict.problems.length, 2);
    t.throws(() => readSettings({}, join(dir, "nope.env")), { instanceOf: ConfigError, message: /cannot be read \(ENOENT\)/ });
    t.deepEqual(takeEnvFile(["list", "--env-file", file]), { envFile: file, args: ["list"] });
    t.deepEqual(takeEnvFile([`--env-file=${file}`, "list"]), { envFile: file, args: ["list"] });
    t.deepEqual(takeEnvFile(["--env-file"]), { error: "--env-file needs a path" });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("describeDatabase redacts the password and makes a SQLite path absolute", (t) => {
  t.is(describeDatabase("mysql://billing:s3cret@db:3306/billing"), "mysql://billing:***@db:3306/billing");
  t.is(describeDatabase("mysql://root@127.0.0.1:3306/test"), "mysql://root@127.0.0.1:3306/test");
  t.is(describeDatabase("sqlite:./data/billing.db"), `sqlite:${resolve("data/billing.db")}`);
});

test("LEAN_GRPC: on by default; off sends every gRPC call through connect-node; anything else is refused by name", (t) => {
  t.true(loadConfig({}).leanGrpc);
  t.true(loadConfig({ LEAN_GRPC: "on" }).leanGrpc);
  t.false(loadConfig({ LEAN_GRPC: "off" }).leanGrpc);
  const err = t.throws(() => loadConfig({ LEAN_GRPC: "false" }), { instanceOf: ConfigError });
  t.regex(err?.message ?? "", /LEAN_GRPC must be on or off \(got "false"\)/);
});
