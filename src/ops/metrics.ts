/**
 * Prometheus metrics (GET /metrics, README "Operations"), in a registry each app owns (never
 * prom-client's global one), so that several apps in one process (the tests) do not collide.
 *
 * Per request the cost is two map lookups and two increments: the children of each (protocol,
 * procedure) pair and code are kept, so prom-client's label hashing runs once per series, not
 * per request. The procedure label is bounded (src/edge/observe.ts: a method's full name, a REST route's
 * template, a plain route, "other"); the duration histogram has no code label.
 *
 * What the store knows (the scheduler's lag, failing subscriptions, invoices by status) is read
 * on scrape: three small queries, one at a time whatever the number of scrapers, reused for a
 * second, and given up on after STORE_TIMEOUT_MS (the previous values are reported then, and
 * billing_store_scrape_success is 0).
 *
 * The exposition passes `promtool check metrics`: prom-client's default `nodejs_active_handles_total`,
 * `nodejs_active_requests_total` and `nodejs_active_resources_total` are gauges with a counter's
 * name, so they are removed (the same counts stay, by type, in `nodejs_active_handles`,
 * `nodejs_active_requests` and `nodejs_active_resources`).
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { BuildInfo } from "./build-info.js";

/** prom-client default gauges named like counters (promtool: "non-counter metrics should not have _total suffix"). */
const MISNAMED_DEFAULTS = ["nodejs_active_handles_total", "nodejs_active_requests_total", "nodejs_active_resources_total"];

/** What the scrape reads from the store (db/stores/ops-store.ts). */
export interface StoreSnapshot {
  /** The end of the oldest billing cycle due on real time and not set aside; null when none is due. */
  oldestDueAt: Date | null;
  /** Active subscriptions set aside: their last cycle close failed (they are retried with backoff). */
  failing: number;
  /** Invoices by status. */
  invoices: Record<string, number>;
  /** Webhook deliveries waiting to be sent (pending, or held by a disabled endpoint), and the creation time of the oldest pending one's event. */
  webhookPending: number;
  webhookOldestPendingAt: Date | null;
  /** Webhook endpoints marked failing (a delivery ran out of retries). */
  webhookEndpointsFailing: number;
}

/** The database's connections: for MySQL the pool's; for SQLite the one connection and the calls queued for it. */
export interface PoolStats {
  max: number;
  inUse: number;
  idle: number;
  waiting: number;
}

/** What holds admission control's slots now (limits.ts Admission.inFlight). */
export interface InFlight {
  requests: number;
  bulk: number;
  waitingForBulk: number;
  bytes: number;
}

export interface MetricsSources {
  store?: () => Promise<StoreSnapshot>;
  pool?: () => PoolStats;
  inFlight?: () => InFlight;
  /** The shared rate limits' Redis (RATE_LIMIT_REDIS_URL): outages seen and calls decided locally. */
  rateLimitRedis?: () => { outages: number; fallbacks: number };
}

/** How long a scrape waits for the store's answer before it reports the previous values. */
export const STORE_TIMEOUT_MS = 2_000;
/** A store snapshot this young is reused by the next scrape. */
const STORE_REUSE_MS = 1_000;
export const INVOICE_STATUSES = ["draft", "open", "paid", "void", "uncollectible"] as const;

const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const BATCH_BUCKETS = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500];

interface RequestSeries {
  duration: Histogram.Internal<string>;
  byCode: Map<string, Counter.Internal>;
}

export class Metrics {
  readonly registry = new Registry();
  private readonly requests: Counter<"protocol" | "procedure" | "code">;
  private readonly durations: Histogram<"protocol" | "procedure">;
  private readonly series = new Map<string, RequestSeries>();
  private readonly events: { accepted: Counter.Internal; duplicate: Counter.Internal; rejected: Counter.Internal };
  private readonly commitEvents: Histogram;
  private readonly commitRequests: Histogram;
  private readonly tickDuration: Histogram;
  private readonly lastTick: Gauge;
  private readonly cyclesClosed: Counter;
  private sources: MetricsSources = {};
  private snapshot: { at: number; ok: boolean; value: StoreSnapshot | undefined } = { at: 0, ok: false, value: undefined };
  private reading: Promise<void> | undefined;

  constructor(build?: BuildInfo) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    for (const name of MISNAMED_DEFAULTS) this.registry.removeSingleMetric(name);
    if (build) {
      new Gauge({
        name: "billing_build_info",
        help: "Always 1: the server's version (package.json), the commit it was built from and the Node.js version running it.",
        labelNames: ["version", "commit", "node"],
        registers,
      }).set({ version: build.version, commit: build.commit, node: build.node }, 1);
    }
    this.requests = new Counter({
      name: "billing_requests_total",
      help: "Requests answered, by protocol (rest, connect, grpc, grpc-web, http), procedure (method or REST route) and code (Connect's names: ok, not_found, …).",
      labelNames: ["protocol", "procedure", "code"],
      registers,
    });
    this.durations = new Histogram({
      name: "billing_request_duration_seconds",
      help: "Time from a request's arrival to the end of its answer, by protocol and procedure.",
      labelNames: ["protocol", "procedure"],
      buckets: DURATION_BUCKETS,
      registers,
    });
    const events = new Counter({ name: "billing_usage_events_total", help: "Usage events ingested, by outcome: accepted, duplicate, rejected.", labelNames: ["outcome"], registers });
    this.events = { accepted: events.labels("accepted"), duplicate: events.labels("duplicate"), rejected: events.labels("rejected") };
    this.commitEvents = new Histogram({ name: "billing_ingest_commit_events", help: "Usage events per group commit (one transaction).", buckets: BATCH_BUCKETS, registers });
    this.commitRequests = new Histogram({ name: "billing_ingest_commit_requests", help: "Requests sharing one group commit (one transaction).", buckets: BATCH_BUCKETS, registers });
    this.tickDuration = new Histogram({ name: "billing_scheduler_tick_duration_seconds", help: "Duration of a scheduler run (everything due on real time).", buckets: DURATION_BUCKETS, registers });
    this.lastTick = new Gauge({ name: "billing_scheduler_last_tick_timestamp_seconds", help: "When the scheduler last finished a run (Unix time); 0 before its first.", registers });
    this.cyclesClosed = new Counter({ name: "billing_cycles_closed_total", help: "Billing cycles closed by this server's scheduler (real time; test clocks not counted).", registers });
    this.storeGauges(registers);
    this.poolGauges(registers);
    this.inFlightGauges(registers);
    this.rateLimitRedisCounters(registers);
  }

  /** The gauges read from the store at scrape time (one snapshot per scrape, bounded: readStore). */
  private storeGauges(registers: Registry[]): void {
    const store = async () => {
      await this.readStore();
      return this.snapshot;
    };
    new Gauge({
      name: "billing_scheduler_lag_seconds",
      help: "Age of the oldest billing cycle due on real time and not yet closed (set-aside subscriptions waiting for their retry excluded); 0 when none is due.",
      registers,
      collect: async function (this: Gauge) {
        const s = await store();
        if (s.value) this.set(s.value.oldestDueAt ? Math.max(0, (Date.now() - s.value.oldestDueAt.getTime()) / 1000) : 0);
      },
    });
    new Gauge({
      name: "billing_subscriptions_failing",
      help: "Active subscriptions set aside because their cycle close failed (retried with backoff; see billing_failure on each).",
      registers,
      collect: async function (this: Gauge) {
        const s = await store();
        if (s.value) this.set(s.value.failing);
      },
    });
    new Gauge({
      name: "billing_invoices",
      help: "Invoices by status.",
      labelNames: ["status"],
      registers,
      collect: async function (this: Gauge<"status">) {
        const s = await store();
        if (!s.value) return;
        for (const status of INVOICE_STATUSES) this.set({ status }, s.value.invoices[status] ?? 0);
        for (const [status, n] of Object.entries(s.value.invoices)) this.set({ status }, n);
      },
    });
    new Gauge({
      name: "billing_webhook_deliveries_pending",
      help: "Webhook deliveries not yet delivered: waiting for their first attempt or a retry, or held by a disabled endpoint.",
      registers,
      collect: async function (this: Gauge) {
        const s = await store();
        if (s.value) this.set(s.value.webhookPending);
      },
    });
    new Gauge({
      name: "billing_webhook_lag_seconds",
      help: "Age of the event of the oldest delivery still pending (its commit to now); 0 when none is pending.",
      registers,
      collect: async function (this: Gauge) {
        const s = await store();
        if (s.value) this.set(s.value.webhookOldestPendingAt ? Math.max(0, (Date.now() - s.value.webhookOldestPendingAt.getTime()) / 1000) : 0);
      },
    });
    new Gauge({
      name: "billing_webhook_endpoints_failing",
      help: "Webhook endpoints marked failing: a delivery ran out of its retries (a replay that succeeds clears it).",
      registers,
      collect: async function (this: Gauge) {
        const s = await store();
        if (s.value) this.set(s.value.webhookEndpointsFailing);
      },
    });
    new Gauge({
      name: "billing_store_scrape_success",
      help: "1 when this scrape read the store's gauges in time; 0 when the store did not answer within 2 s (the previous values are shown).",
      registers,
      collect: async function (this: Gauge) {
        this.set((await store()).ok ? 1 : 0);
      },
    });
  }

  /** The database pool's connections, read at scrape time. */
  private poolGauges(registers: Registry[]): void {
    const pool = () => this.sources.pool?.();
    new Gauge({
      name: "billing_db_pool_connections",
      help: "Database connections by state: in_use, idle (MySQL: the pool's; SQLite: its one connection, in use while a call runs).",
      labelNames: ["state"],
      registers,
      collect(this: Gauge<"state">) {
        const p = pool();
        if (!p) return;
        this.set({ state: "in_use" }, p.inUse);
        this.set({ state: "idle" }, p.idle);
      },
    });
    new Gauge({
      name: "billing_db_pool_max",
      help: "The most connections the pool opens (SQLite: 1).",
      registers,
      collect(this: Gauge) {
        const p = pool();
        if (p) this.set(p.max);
      },
    });
    new Gauge({
      name: "billing_db_pool_waiting",
      help: "Calls waiting for a database connection (SQLite: calls queued behind the running one).",
      registers,
      collect(this: Gauge) {
        const p = pool();
        if (p) this.set(p.waiting);
      },
    });
  }

  /** Admission control's counts now (limits.ts Admission). */
  private inFlightGauges(registers: Registry[]): void {
    const inFlightNow = () => this.sources.inFlight?.();
    const inFlight = (name: string, help: string, read: (f: InFlight) => number) =>
      new Gauge({
        name,
        help,
        registers,
        collect: function (this: Gauge) {
          const f = inFlightNow();
          if (f) this.set(read(f));
        },
      });
    inFlight("billing_requests_in_flight", "Requests holding an admission slot now (MAX_REQUESTS_IN_FLIGHT); /healthz, /readyz, /metrics and /ping take none.", (f) => f.requests);
    inFlight("billing_request_bytes_in_flight", "Request body bytes counted against MAX_REQUEST_BYTES_IN_FLIGHT now.", (f) => f.bytes);
    inFlight("billing_bulk_requests_in_flight", "Bulk requests (batch ingest, rate cards…) holding a bulk slot now (MAX_BULK_REQUESTS_IN_FLIGHT).", (f) => f.bulk);
    inFlight("billing_bulk_requests_waiting", "Bulk requests waiting for a bulk slot now (up to BULK_QUEUE_TIMEOUT_MS).", (f) => f.waitingForBulk);
  }

  /** The shared rate limits' Redis, read at scrape time (counts kept by src/ratelimit-redis.ts). */
  private rateLimitRedisCounters(registers: Registry[]): void {
    const now = () => this.sources.rateLimitRedis?.();
    const counter = (name: string, help: string, read: (c: { outages: number; fallbacks: number }) => number) =>
      new Counter({
        name,
        help,
        registers,
        collect(this: Counter) {
          const c = now();
          if (!c) return;
          this.reset();
          this.inc(read(c));
        },
      });
    counter("billing_rate_limit_redis_outages_total", "Times this server found the rate limits' Redis (RATE_LIMIT_REDIS_URL) not answering; each logged once.", (c) => c.outages);
    counter("billing_rate_limit_redis_fallbacks_total", "Rate-limited calls decided by this server's own bucket because that Redis did not answer in time.", (c) => c.fallbacks);
  }

  /** Where the scrape-time gauges read from (the store once open, admission control once made); adds to earlier sources. */
  attach(sources: MetricsSources): void {
    this.sources = { ...this.sources, ...sources };
  }

  /** One answered request. `seconds`: from its arrival to the end of its answer. */
  observeRequest(protocol: string, procedure: string, code: string, seconds: number): void {
    const key = `${protocol} ${procedure}`;
    let s = this.series.get(key);
    if (!s) {
      s = { duration: this.durations.labels(protocol, procedure), byCode: new Map() };
      this.series.set(key, s);
    }
    s.duration.observe(seconds);
    let c = s.byCode.get(code);
    if (!c) {
      c = this.requests.labels(protocol, procedure, code);
      s.byCode.set(code, c);
    }
    c.inc();
  }

  countEvents(accepted: number, duplicate: number, rejected: number): void {
    if (accepted > 0) this.events.accepted.inc(accepted);
    if (duplicate > 0) this.events.duplicate.inc(duplicate);
    if (rejected > 0) this.events.rejected.inc(rejected);
  }

  /** One group commit of `events` events from `requests` submissions. */
  observeCommit(events: number, requests: number): void {
    this.commitEvents.observe(events);
    this.commitRequests.observe(requests);
  }

  /** One scheduler run on real time: its duration and the cycles it closed. */
  schedulerRan(seconds: number, closed: number): void {
    this.tickDuration.observe(seconds);
    this.lastTick.set(Date.now() / 1000);
    if (closed > 0) this.cyclesClosed.inc(closed);
  }

  /** The exposition text and its content type. */
  async expose(): Promise<{ contentType: string; text: string }> {
    return { contentType: this.registry.contentType, text: await this.registry.metrics() };
  }

  /**
   * Reads the store's gauges: reused for STORE_REUSE_MS, waited for at most STORE_TIMEOUT_MS, and
   * one read at a time even when the store does not answer (a read given up on is not started
   * again until it has ended: a frozen database holds one connection, not one per scrape).
   */
  private async readStore(): Promise<void> {
    const read = this.sources.store;
    if (!read || Date.now() - this.snapshot.at < STORE_REUSE_MS) return;
    if (!this.reading) {
      const started = read().then(
        (value) => {
          this.snapshot = { at: Date.now(), ok: true, value };
        },
        () => {
          this.snapshot = { at: Date.now(), ok: false, value: this.snapshot.value };
        },
      );
      this.reading = started.finally(() => {
        this.reading = undefined;
      });
    }
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((r) => (timer = setTimeout(() => r("late"), STORE_TIMEOUT_MS)));
    try {
      if ((await Promise.race([this.reading, late])) === "late") this.snapshot = { at: Date.now(), ok: false, value: this.snapshot.value };
    } finally {
      clearTimeout(timer);
    }
  }
}
