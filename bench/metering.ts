/**
 * Metering benchmark: usage event ingestion (REST single and batch, the gRPC client stream)
 * against the database's own ceiling, and the latency of a pricing metric summary over the
 * current month for a subject with few and with very many events — on a fresh MariaDB database,
 * in one run.
 *
 * What it measures, in this order:
 *   1. setup: subjects and a pricing metric (event "api_call", sum of "n", dimension "region");
 *   2. ingest, each event acknowledged only once committed (the API answers after the commit):
 *      (a) REST `POST /usage-events`, one event per request, closed loop at concurrency 64;
 *      (b) REST `POST /usage-events/batch`, 500 events per request, at concurrency 2 and 4;
 *      (c) gRPC `UsageEventService/StreamUsageEvents` against REST batches in the same database
 *          state, as A B B A: a batch phase at (b)'s best concurrency, two streams, a batch phase
 *          again; the streams' events over their time against the mean of the two batch phases
 *          (two identical batch phases in a row differ by half here: the tables outgrow the buffer
 *          pool, so whichever runs second loses). Each stream carries as many events as the best
 *          batch case of (b) ingested in its window (equal work; BENCH_STREAM_EVENTS to choose),
 *          timed until the one response, whose counts are checked; sent by @grpc/grpc-js, the
 *          events encoded before the clock starts: connect-es's transport cost this process about
 *          80 µs of CPU per event, on the CPUs the server and MariaDB share
 *          (BENCH_STREAM_CLIENT=connect keeps it);
 *      (d) the ceiling: rows of the server's form (its INSERT's columns) as 500-row INSERTs straight
 *          into a copy of the table (`usage_events_ceiling`), autocommit, at concurrency 2 and 4,
 *          built as cheaply as possible, since this process shares the CPUs with MariaDB; and the
 *          single-row ceiling: 1-row INSERTs, autocommit, at the single-event case's concurrency
 *          (issue 18 asks single-event REST to reach it: the server's group commit against one
 *          commit per row);
 *      (e) the database bound: per 500 events one transaction, sent in one round trip, of that
 *          INSERT plus the server's own upserts of the hourly and minute totals (built by its
 *          code), into copies of the three tables: what MariaDB alone spends on the writes that
 *          ingestion must make, at concurrency 2 and 4; and the same with the hourly totals
 *          only (no minute totals: the least DESIGN §7 allows), at the same concurrencies;
 *      Events of (a)–(e) go round-robin to BENCH_SUBJECTS subjects, region round-robin over three,
 *      at a random time of the current month so far, with unique (ordered) idempotency keys.
 *   3. summary: one subject is loaded with 1,000 events and one with 1,000,000, spread evenly over
 *      the current month so far, through the batch endpoint as fast as it goes (each worker a
 *      contiguous slice of the month); then `POST /pricing-metrics/{id}/summary` over the current
 *      month (start = the month's first instant, end = now), sequentially, after a warm-up; every
 *      answer's sum is checked against the exact sum of what was sent. The server answers whole
 *      hours from hourly totals, the whole minutes of the partial hour at the end from minute
 *      totals and only the partial minute from raw events, so for the large subject two
 *      diagnostic rows bound what the minute of the hour does: the period ending on the hour
 *      (hourly totals only) and 1 ms before it (59 minute totals and a minute of raw events).
 * Before each phase MariaDB writes out the dirty pages the earlier ones left (Phases.settle), so
 * that no phase pays for another's flushing. Every response is checked (HTTP 200, every event "accepted"); any error, a wrong sum, or a
 * table that does not hold exactly the accepted events makes the run exit with status 1. The
 * server child's VmRSS is sampled every 200 ms throughout. Per phase the report also gives the CPU
 * used by the server, MariaDB, this load generator and every other process (another test run on
 * the same machine lowers every figure: the report names such processes), and MariaDB's commit,
 * fsync, lock-wait and deadlock counters (server-wide: other clients of the same MariaDB count too).
 *
 * Run:   npm run bench:metering              (needs MariaDB/MySQL at 127.0.0.1:3306, user root)
 * Env:   BENCH_SECONDS=10                    measured seconds per closed-loop case (after the warm-up)
 *        BENCH_WARMUP_SECONDS=1              warm-up seconds per closed-loop case (not measured)
 *        BENCH_SINGLE_CONCURRENCY=64         workers for single-event REST
 *        BENCH_BATCH_SIZE=500                events per batch request and rows per ceiling INSERT (≤ 1000)
 *        BENCH_BATCH_CONCURRENCY=2,4         workers for batch REST and for the ceiling
 *        BENCH_STREAM_EVENTS=…               events in the gRPC stream (default: as many as the best REST batch
 *                                            case ingested in its measured window, to the thousand: equal work)
 *        BENCH_STREAM_CLIENT=connect         send the stream with connect-es's gRPC transport (@connectrpc/connect-node)
 *                                            instead of @grpc/grpc-js (see (c))
 *        BENCH_STREAMS=1                     streams at once sharing those events, each on its own connection (grpc-js)
 *        BENCH_SETTLE_SECONDS=60             before each phase, MariaDB writes out the earlier phases' dirty pages
 *                                            (innodb_max_dirty_pages_pct 0 for that time, then restored); 0: no settling
 *        BENCH_SUBJECTS=100                  subjects the ingest cases spread their events over
 *        BENCH_SUMMARY_EVENTS=1000,1000000   events of the two summary subjects
 *        BENCH_SUMMARY_REQUESTS=200          measured summary requests per subject (after BENCH_SUMMARY_WARMUP=20)
 *        BENCH_MYSQL_URL=mysql://root@127.0.0.1:3306   server to create the throw-away database on
 *        BENCH_SERVER_LOG_LEVEL=warn         the server's LOG_LEVEL (its log goes to stderr, prefixed [server])
 *        BENCH_INGEST_COMMITS_IN_FLIGHT=…    the server's INGEST_COMMITS_IN_FLIGHT (default: the config's, 2)
 *        BENCH_SERVER_NODE_ARGS=…            node options for the server child only, space-separated, e.g.
 *                                            "--cpu-prof --cpu-prof-dir=/tmp/prof" (written when it stops)
 * Output: progress on stderr; the report (Markdown) on stdout.
 */
import { createHash, randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import http from "node:http";
import { createClient } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Http2SessionManager, createGrpcTransport } from "@connectrpc/connect-node";
import mysql from "mysql2/promise";
import { randomBase62 } from "../src/billing/ids.js";
import type { PricingMetric } from "../src/billing/catalog/types.js";
import { contributionsOf, mergeContributions } from "../src/billing/metering/events.js";
import { dbTime } from "../src/db/raw.js";
import { rollupStatements } from "../src/db/stores/usage-sql.js";
import { UsageEventInputSchema } from "../src/gen/billing/v1/usage_event_pb.js";
import { type StreamUsageEventsResponse, StreamUsageEventsResponseSchema, UsageEventService } from "../src/gen/billing/v1/usage_event_service_pb.js";
import {
  LeanHttpPool,
  type LoopResult,
  type RestResponse,
  RssSampler,
  type Server,
  type ThrowawayDatabase,
  allProcessCpu,
  closedLoop,
  cpuCount,
  createThrowawayDatabase,
  envIntegers,
  envNumber,
  expectStatus200,
  fmt,
  fmtInt,
  freePort,
  machineBusySeconds,
  machineLine,
  markdownTable,
  percentile,
  processCpuSeconds,
  progress,
  reasonOf,
  restRequest,
  serverEnvironment,
  startChildServer,
  topProcesses,
  runBenchmark,
  serverReportLines,
} from "./lib.js";

// ---------------------------------------------------------------------------------------------
// Settings

const API_KEY = "sk_test_benchmetering0000000000";
const EVENT_NAME = "api_call";
const REGIONS = ["eu", "us", "ap"] as const;
const HOUR = 3_600_000;
const LONG_TIMEOUT_MS = 600_000;

const summaryEvents = envIntegers("BENCH_SUMMARY_EVENTS", "1000,1000000");
if (summaryEvents.length !== 2) throw new Error("BENCH_SUMMARY_EVENTS must list two counts, e.g. 1000,1000000");

const settings = {
  seconds: envNumber("BENCH_SECONDS", 10, 0.1),
  warmupSeconds: envNumber("BENCH_WARMUP_SECONDS", 1, 0),
  singleConcurrency: Math.floor(envNumber("BENCH_SINGLE_CONCURRENCY", 64, 1)),
  batchSize: Math.floor(envNumber("BENCH_BATCH_SIZE", 500, 1)),
  batchConcurrencies: envIntegers("BENCH_BATCH_CONCURRENCY", "2,4"),
  /** Events in the stream; by default as many as the best REST batch case ingested in its window (equal work). */
  streamEvents: process.env.BENCH_STREAM_EVENTS ? Math.floor(envNumber("BENCH_STREAM_EVENTS", 200_000, 1)) : undefined,
  /** BENCH_STREAM_CLIENT=connect: the stream through connect-es's gRPC transport instead of @grpc/grpc-js. */
  streamClient: process.env.BENCH_STREAM_CLIENT === "connect" ? "connect" : "grpc-js",
  /** BENCH_STREAMS: streams at once (each on its own connection, grpc-js only), sharing the stream's events. */
  streams: Math.floor(envNumber("BENCH_STREAMS", 1, 1)),
  subjects: Math.floor(envNumber("BENCH_SUBJECTS", 100, 1)),
  summarySmall: summaryEvents[0] as number,
  summaryLarge: summaryEvents[1] as number,
  summaryRequests: Math.floor(envNumber("BENCH_SUMMARY_REQUESTS", 200, 1)),
  summaryWarmup: Math.floor(envNumber("BENCH_SUMMARY_WARMUP", 20, 0)),
  rssIntervalMs: 200,
  mysqlUrl: process.env.BENCH_MYSQL_URL || "mysql://root@127.0.0.1:3306",
  serverLogLevel: process.env.BENCH_SERVER_LOG_LEVEL || "warn",
  serverNodeArgs: (process.env.BENCH_SERVER_NODE_ARGS || "").split(" ").filter(Boolean),
};
if (settings.batchSize > 1000) throw new Error("BENCH_BATCH_SIZE must be at most 1000 (the API's batch limit)");

const GOALS = { singleEventsPerSec: 5_000, batchEventsPerSec: 50_000, batchShareOfCeiling: 0.5, summaryP50Ratio: 2, rssMb: 300 };

// ---------------------------------------------------------------------------------------------
// Events: values in hundredths, so that sums are exact in integer arithmetic

const runTag = randomBytes(4).toString("hex");
const now = () => Date.now();
/** The first instant of the current UTC month, fixed for the whole run. */
const MONTH_START = (() => {
  const d = new Date();
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
})();

/** 0.01 … 1000.00, varied. */
const valueCents = (i: number): bigint => BigInt(((i * 7919) % 100_000) + 1);

/** Canonical decimal text of hundredths, as the server writes decimals: "12.3", "12", "0.05". */
function centsText(c: bigint): string {
  const whole = c / 100n;
  const frac = c % 100n;
  if (frac === 0n) return String(whole);
  return `${whole}.${String(frac).padStart(2, "0").replace(/0$/, "")}`;
}

interface Ev {
  idempotencyKey: string;
  subjectId: string;
  data: { n: string; region: string };
  timestamp: string;
}

const restEvent = (e: Ev) => ({ idempotency_key: e.idempotencyKey, subject_id: e.subjectId, event_name: EVENT_NAME, data: e.data, timestamp: e.timestamp });

/** The ingest cases' events: round-robin over subjects and regions, a random time of the month so far. */
class IngestEvents {
  private seq = 0;
  constructor(private readonly subjectIds: string[]) {}
  next(): Ev {
    const n = this.seq++;
    return {
      idempotencyKey: `in-${runTag}-${String(n).padStart(10, "0")}`,
      subjectId: this.subjectIds[n % this.subjectIds.length] as string,
      data: { n: centsText(valueCents(n)), region: REGIONS[n % REGIONS.length] as string },
      timestamp: new Date(MONTH_START + Math.floor(Math.random() * (now() - MONTH_START))).toISOString(),
    };
  }
  take(count: number): Ev[] {
    return Array.from({ length: count }, () => this.next());
  }
}

/** A summary subject's events: `count` spread evenly over [MONTH_START, until). */
class SpreadEvents {
  constructor(
    readonly subjectId: string,
    readonly count: number,
    readonly until: number,
    private readonly tag: string,
  ) {}
  at(i: number): number {
    return MONTH_START + Math.floor(((i + 0.5) * (this.until - MONTH_START)) / this.count);
  }
  event(i: number): Ev {
    return {
      idempotencyKey: `${this.tag}-${runTag}-${String(i).padStart(10, "0")}`,
      subjectId: this.subjectId,
      data: { n: centsText(valueCents(i)), region: REGIONS[i % REGIONS.length] as string },
      timestamp: new Date(this.at(i)).toISOString(),
    };
  }
  /** Sums of the first k events, by k. */
  private readonly prefixSums = new Map<number, bigint>();
  /** The exact sum of the n of the events before `t`, in hundredths. */
  sumCentsBefore(t: number): bigint {
    const k = this.count - this.countFrom(t);
    let sum = this.prefixSums.get(k);
    if (sum === undefined) {
      sum = 0n;
      for (let i = 0; i < k; i++) sum += valueCents(i);
      this.prefixSums.set(k, sum);
    }
    return sum;
  }
  /** How many events lie at or after `t`. */
  countFrom(t: number): number {
    let lo = 0;
    let hi = this.count;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.at(mid) >= t) hi = mid;
      else lo = mid + 1;
    }
    return this.count - lo;
  }
}

// ---------------------------------------------------------------------------------------------
// Checks of the server's answers

let acceptedTotal = 0;

/** A single-event answer: 200 and {"status":"accepted"}. */
function checkSingle(res: RestResponse): void {
  expectStatus200(res);
  const body = JSON.parse(res.body) as { id?: string; status?: string };
  if (body.status !== "accepted" || !body.id?.startsWith("ue_")) throw new Error(`event not accepted: ${res.body.slice(0, 200)}`);
  acceptedTotal++;
}

/** A batch answer: 200, `n` results, every one "accepted", and the counts agree. */
function checkBatch(res: RestResponse, n: number): void {
  expectStatus200(res);
  const body = JSON.parse(res.body) as {
    results?: { status?: string; error?: { code?: string; message?: string } }[];
    accepted?: number;
    duplicate?: number;
    rejected?: number;
  };
  const results = body.results ?? [];
  acceptedTotal += results.filter((r) => r.status === "accepted").length;
  const bad = results.find((r) => r.status !== "accepted");
  if (bad) throw new Error(`batch event ${bad.status}: ${bad.error?.code ?? ""} ${bad.error?.message ?? ""}`.slice(0, 300));
  if (results.length !== n || body.accepted !== n || body.duplicate !== 0 || body.rejected !== 0) {
    throw new Error(`batch of ${n}: ${results.length} results, accepted ${body.accepted}, duplicate ${body.duplicate}, rejected ${body.rejected}`);
  }
}

// ---------------------------------------------------------------------------------------------
// CPU and MariaDB counters per phase

const STATUS_VARS = ["Com_commit", "Innodb_data_fsyncs", "Innodb_deadlocks", "Innodb_row_lock_waits", "Innodb_row_lock_time", "Questions"] as const;
type DbStatus = Record<(typeof STATUS_VARS)[number], number>;

async function dbStatus(admin: mysql.Connection): Promise<DbStatus> {
  const [rows] = await admin.query(`SHOW GLOBAL STATUS WHERE Variable_name IN (${STATUS_VARS.map(() => "?").join(", ")})`, [...STATUS_VARS]);
  const out = Object.fromEntries(STATUS_VARS.map((v) => [v, Number.NaN])) as DbStatus;
  for (const r of rows as { Variable_name: string; Value: string }[]) out[r.Variable_name as keyof DbStatus] = Number(r.Value);
  return out;
}

interface PhaseRow {
  label: string;
  wallS: number;
  events: number;
  serverCpuS?: number;
  dbCpuS?: number;
  benchCpuS: number;
  /** CPU of every other process on the machine (another test run, a build…): they compete for the same CPUs. */
  otherCpuS?: number;
  otherTop: string[];
  status: DbStatus;
  rssMaxMb: number;
  rssEndMb: number;
}

/** What MariaDB still has to write from earlier phases: dirty pages and checkpoint age. */
async function flushBacklog(admin: mysql.Connection): Promise<{ dirty: number; total: number; age: number; maxAge: number }> {
  const names = ["Innodb_buffer_pool_pages_dirty", "Innodb_buffer_pool_pages_total", "Innodb_checkpoint_age", "Innodb_checkpoint_max_age"];
  const [rows] = await admin.query(`SHOW GLOBAL STATUS WHERE Variable_name IN (${names.map(() => "?").join(", ")})`, names);
  const v = new Map((rows as { Variable_name: string; Value: string }[]).map((r) => [r.Variable_name, Number(r.Value)]));
  return { dirty: v.get(names[0] as string) ?? 0, total: v.get(names[1] as string) ?? 1, age: v.get(names[2] as string) ?? 0, maxAge: v.get(names[3] as string) ?? 1 };
}

/** The longest a phase waits for MariaDB to write out earlier phases' pages (BENCH_SETTLE_SECONDS; 0: no wait, no flush). */
const SETTLE_MAX_S = envNumber("BENCH_SETTLE_SECONDS", 60, 0);

class Phases {
  readonly rows: PhaseRow[] = [];
  /** Before each phase: how long it waited for MariaDB to finish flushing the earlier phases' pages. */
  readonly settled: { before: string; seconds: number; dirtyPages: number; timedOut: boolean }[] = [];
  /** Why MariaDB could not be made to flush (no privilege): then no phase is settled. */
  cannotSettle: string | undefined;
  private t0 = 0;
  private events0 = 0;
  private server0?: number;
  private db0?: number;
  private bench0 = process.cpuUsage();
  private machine0?: number;
  private procs0 = new Map<number, number>();
  private status0?: DbStatus;
  private readonly mine: Set<number>;

  constructor(
    private readonly admin: mysql.Connection,
    private readonly serverPid: number | undefined,
    private readonly dbPid: number | undefined,
    private readonly rss: RssSampler,
  ) {
    // This process, the tsx/npm processes that started it, the server and MariaDB.
    this.mine = new Set([process.pid, process.ppid, ...[serverPid, dbPid].filter((p): p is number => p !== undefined)]);
  }

  /**
   * Before a phase: MariaDB writes out what earlier phases (and earlier runs) left in its buffer
   * pool, so that every phase starts from the same state: dirty pages under 1% of the pool and
   * checkpoint age under 1% of its maximum. MariaDB 10.11 does not flush at idle below its limits
   * (innodb_max_dirty_pages_pct 90, adaptive flushing from 10% of the redo log): left alone, the
   * phase after a heavy one paid for its predecessor's flushing (two batch phases in a row ran at
   * 10,750 then 6,300 events/s, MariaDB at 55 then 94 µs per event). The documented way to make
   * it flush everything now is innodb_max_dirty_pages_pct = 0: it is set for the few seconds
   * that takes, then given back its value (in a finally), at most SETTLE_MAX_S.
   */
  async settle(before: string): Promise<void> {
    if (SETTLE_MAX_S <= 0 || this.cannotSettle !== undefined) return;
    const settled = (b: Awaited<ReturnType<typeof flushBacklog>>) => b.dirty <= 0.01 * b.total && b.age <= 0.01 * b.maxAge;
    let b = await flushBacklog(this.admin);
    const first = b.dirty;
    if (settled(b)) {
      this.settled.push({ before, seconds: 0, dirtyPages: first, timedOut: false });
      return;
    }
    const t0 = performance.now();
    const [rows] = await this.admin.query("SELECT @@GLOBAL.innodb_max_dirty_pages_pct AS pct");
    const pct = Number((rows as { pct: number | string }[])[0]?.pct);
    let timedOut = false;
    try {
      await this.admin.query("SET GLOBAL innodb_max_dirty_pages_pct = 0");
    } catch (err) {
      // No privilege to set it (SUPER or SYSTEM_VARIABLES_ADMIN): the run goes on unsettled, and says so.
      this.cannotSettle = reasonOf(err);
      progress(`  cannot make MariaDB flush (${this.cannotSettle}): phases are not settled`);
      return;
    }
    try {
      while (!settled(b)) {
        if (performance.now() - t0 > SETTLE_MAX_S * 1000) {
          timedOut = true;
          break;
        }
        await new Promise((r) => setTimeout(r, 200));
        b = await flushBacklog(this.admin);
      }
    } finally {
      await this.admin.query("SET GLOBAL innodb_max_dirty_pages_pct = ?", [pct]);
    }
    const seconds = (performance.now() - t0) / 1000;
    this.settled.push({ before, seconds, dirtyPages: first, timedOut });
    progress(`  MariaDB wrote out ${first} dirty pages in ${fmt(seconds, 1)} s before ${before}${timedOut ? " (not all: time limit)" : ""}`);
  }

  async begin(settleFor?: string): Promise<void> {
    if (settleFor !== undefined) await this.settle(settleFor);
    this.status0 = await dbStatus(this.admin);
    this.procs0 = await allProcessCpu();
    this.machine0 = await machineBusySeconds();
    this.server0 = await processCpuSeconds(this.serverPid);
    this.db0 = await processCpuSeconds(this.dbPid);
    this.bench0 = process.cpuUsage();
    this.events0 = acceptedTotal;
    this.t0 = performance.now();
  }

  async end(label: string, events = acceptedTotal - this.events0): Promise<PhaseRow> {
    const wallS = (performance.now() - this.t0) / 1000;
    const bench = process.cpuUsage(this.bench0);
    const server1 = await processCpuSeconds(this.serverPid);
    const db1 = await processCpuSeconds(this.dbPid);
    const machine1 = await machineBusySeconds();
    const procs1 = await allProcessCpu();
    const status1 = await dbStatus(this.admin);
    const rss = await this.rss.phase(label);
    const serverCpuS = server1 !== undefined && this.server0 !== undefined ? server1 - this.server0 : undefined;
    const dbCpuS = db1 !== undefined && this.db0 !== undefined ? db1 - this.db0 : undefined;
    const benchCpuS = (bench.user + bench.system) / 1e6;
    const otherCpuS = machine1 !== undefined && this.machine0 !== undefined ? Math.max(0, machine1 - this.machine0 - (serverCpuS ?? 0) - (dbCpuS ?? 0) - benchCpuS) : undefined;
    const status = Object.fromEntries(STATUS_VARS.map((v) => [v, status1[v] - (this.status0?.[v] ?? Number.NaN)])) as DbStatus;
    const row: PhaseRow = {
      label,
      wallS,
      events,
      serverCpuS,
      dbCpuS,
      benchCpuS,
      otherCpuS,
      otherTop: otherCpuS !== undefined && otherCpuS / wallS >= 0.1 ? await topProcesses(this.procs0, procs1, wallS, this.mine) : [],
      status,
      rssMaxMb: rss.maxMb,
      rssEndMb: rss.endMb,
    };
    this.rows.push(row);
    return row;
  }
}

// ---------------------------------------------------------------------------------------------
// Results

interface IngestResult {
  name: string;
  kind: "single" | "batch" | "batch-pair" | "stream" | "ceiling" | "ceiling-single" | "bound" | "bound-hourly";
  concurrency: number;
  /** Events counted in the measured window (or the whole stream). */
  events: number;
  eventsPerSec: number;
  /** Requests (statements for the ceiling) per second; NaN for the stream. */
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  errorReasons: Map<string, number>;
  note?: string;
}

interface LoadResult {
  label: string;
  events: number;
  seconds: number;
  errors: number;
  errorReasons: Map<string, number>;
}

/** Where a summary's period ends: now (the goal's case), or two diagnostics on the hour. */
type PeriodEnd = "now" | "hour" | "hour-1ms";

interface SummaryResult {
  label: string;
  end: PeriodEnd;
  events: number;
  rollupRows: number;
  /** Raw events in the partial hour at the period's end (what the server reads besides hourly totals), at the first and the last request. */
  edgeEvents: [number, number];
  p50: number;
  p99: number;
  mean: number;
  requests: number;
  expected: string;
  errors: number;
  errorReasons: Map<string, number>;
}

/**
 * One StreamUsageEvents call of already encoded messages through @grpc/grpc-js, on a connection
 * of its own (a local subchannel pool); resolves with the answer's bytes.
 */
function grpcJsStream(port: number, messages: Buffer[]): Promise<Buffer> {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { "grpc.use_local_subchannel_pool": 1 });
  const metadata = new grpc.Metadata();
  metadata.set("x-api-key", API_KEY);
  const identity = (b: Buffer) => b;
  return new Promise<Buffer>((resolve, reject) => {
    const call = client.makeClientStreamRequest("/billing.v1.UsageEventService/StreamUsageEvents", identity, identity, metadata, { deadline: Date.now() + LONG_TIMEOUT_MS }, (err, res) =>
      err || !res ? reject(err) : resolve(res),
    );
    for (const m of messages) call.write(m);
    call.end();
  }).finally(() => client.close());
}

const addReason = (m: Map<string, number>, err: unknown) => {
  const r = reasonOf(err);
  m.set(r, (m.get(r) ?? 0) + 1);
};

function fromLoop(name: string, kind: IngestResult["kind"], eventsPerRequest: number, r: LoopResult, note?: string): IngestResult {
  return {
    name,
    kind,
    concurrency: r.concurrency,
    events: r.requests * eventsPerRequest,
    eventsPerSec: r.rps * eventsPerRequest,
    rps: r.rps,
    p50: r.p50,
    p99: r.p99,
    errors: r.errors,
    errorReasons: r.errorReasons,
    note,
  };
}

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<number> {
  const db: ThrowawayDatabase = await createThrowawayDatabase(settings.mysqlUrl, "bench_metering");
  progress(`created database ${db.name} on ${db.version}`);
  let server: Server | undefined;
  let rss: RssSampler | undefined;
  const pools: mysql.Pool[] = [];
  const agents: http.Agent[] = [];
  const leanPools: LeanHttpPool[] = [];
  let sessionManager: Http2SessionManager | undefined;
  let cleaned: Promise<void> | undefined;
  const cleanup = () =>
    (cleaned ??= (async () => {
      rss?.stop();
      for (const a of agents) a.destroy();
      for (const p of leanPools) p.close();
      sessionManager?.abort();
      await Promise.allSettled(pools.map((p) => p.end()));
      if (server) {
        const s = server;
        server = undefined;
        await s.stop().catch((err) => progress(`stopping the server failed: ${reasonOf(err)}`));
      }
      await db.drop().catch((err) => progress(`dropping ${db.name} failed: ${reasonOf(err)}`));
    })());
  let interrupted = false;
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      interrupted = true;
      progress(`${signal}: stopping the server and dropping the database`);
      void cleanup().finally(() => process.exit(130));
    });
  }

  const ingest: IngestResult[] = [];
  const loads: LoadResult[] = [];
  const summaries: SummaryResult[] = [];
  /** What the final table check found (one line), and any mismatch (each an error). */
  let integrityNote: string | undefined;
  const integrity: string[] = [];
  let fatal: string | undefined;
  let stopNote = "";
  let problems: string[] = [];
  let phases: Phases | undefined;
  const startedAt = performance.now();
  // How busy the machine is without us: 2 s of every process's CPU.
  let quietBefore: number | undefined;
  {
    const m0 = await machineBusySeconds();
    await new Promise((r) => setTimeout(r, 2000));
    const m1 = await machineBusySeconds();
    if (m0 !== undefined && m1 !== undefined) quietBefore = (m1 - m0) / 2;
    if (quietBefore !== undefined && quietBefore > 0.1) progress(`warning: other processes use ${fmt(quietBefore * 100, 0)}% CPU: the figures will be lower`);
  }

  try {
    const port = await freePort();
    const serverEnv = serverEnvironment(process.env, {
      DATABASE_URL: db.url,
      PORT: String(port),
      BILLING_BOOTSTRAP_API_KEY: API_KEY,
      LOG_LEVEL: settings.serverLogLevel,
      ...(process.env.BENCH_INGEST_COMMITS_IN_FLIGHT ? { INGEST_COMMITS_IN_FLIGHT: process.env.BENCH_INGEST_COMMITS_IN_FLIGHT } : {}),
    });
    const nodeArgs = settings.serverNodeArgs.join(" ");
    progress(`starting the server in a child process${nodeArgs ? ` (node ${nodeArgs})` : ""}`);
    server = await startChildServer(serverEnv, settings.serverNodeArgs);
    const running = server;
    const baseUrl = `http://127.0.0.1:${port}`;
    progress(`server ready at ${baseUrl} (pid ${running.pid})`);
    if (running.pid === undefined) throw new Error("the server child has no pid");
    rss = new RssSampler(running.pid, settings.rssIntervalMs);
    const gone = () => running.exited() !== undefined;
    const assertRunning = (during: string) => {
      const why = running.exited();
      if (why) throw new Error(`${why} during ${during}`);
    };

    let dbPid: number | undefined;
    try {
      const [rows] = await db.admin.query("SELECT @@pid_file AS f");
      dbPid = Number((await readFile(String((rows as { f: string }[])[0]?.f), "utf8")).trim()) || undefined;
    } catch {
      dbPid = undefined; // MariaDB's CPU is then not reported
    }
    phases = new Phases(db.admin, running.pid, dbPid, rss);
    const ph = phases;

    // ---- 1. Setup: subjects and the pricing metric, through the API.
    await ph.begin();
    const setupAgent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    agents.push(setupAgent);
    const post = async (path: string, body: unknown): Promise<{ id: string }> => {
      const res = await restRequest(setupAgent, port, "POST", path, JSON.stringify(body), API_KEY);
      expectStatus200(res);
      return JSON.parse(res.body) as { id: string };
    };
    const subjectIds: string[] = [];
    let made = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (made < settings.subjects) {
          const n = made++;
          subjectIds.push((await post("/subjects", { name: `Meter ${n}`, external_id: `meter-${runTag}-${n}` })).id);
        }
      }),
    );
    const smallSubject = (await post("/subjects", { name: "Small", external_id: `small-${runTag}` })).id;
    const largeSubject = (await post("/subjects", { name: "Large", external_id: `large-${runTag}` })).id;
    const metric = await post("/pricing-metrics", {
      event_name: EVENT_NAME,
      name: "API calls",
      unit: "call",
      dimensions: ["region"],
      aggregation: { aggregation_type: "sum", value_field: "n" },
    });
    await ph.end("setup");
    progress(`created ${subjectIds.length + 2} subjects and pricing metric ${metric.id}`);

    const gen = new IngestEvents(subjectIds);
    const loop = (concurrency: number, call: () => Promise<void>) => closedLoop({ concurrency, call, gone, warmupSeconds: settings.warmupSeconds, seconds: settings.seconds, window: "completed" });
    const caseNote = `${settings.warmupSeconds} s warm-up + ${settings.seconds} s`;

    // ---- 2a. Single-event REST.
    {
      const c = settings.singleConcurrency;
      const client = new LeanHttpPool(port, c);
      leanPools.push(client);
      progress(`REST POST /usage-events, concurrency ${c}: ${caseNote}`);
      await ph.begin("single-event ingest");
      const r = await loop(c, async () => checkSingle(await client.request("POST", "/usage-events", JSON.stringify(restEvent(gen.next())), API_KEY)));
      await ph.end(`single, c=${c}`);
      ingest.push(fromLoop("REST `POST /usage-events` (1 event)", "single", 1, r));
      progress(`  ${fmt(r.rps, 0)} events/s, p50 ${fmt(r.p50, 1)} ms, p99 ${fmt(r.p99, 1)} ms, ${r.errors} errors`);
      client.close();
      assertRunning("single-event ingest");
    }

    // ---- 2b. Batch REST.
    const batchBody = (events: Ev[]) => JSON.stringify({ events: events.map(restEvent) });
    const batchPhase = async (c: number, kind: "batch" | "batch-pair", label: string): Promise<void> => {
      const client = new LeanHttpPool(port, c, LONG_TIMEOUT_MS);
      leanPools.push(client);
      progress(`REST POST /usage-events/batch (${settings.batchSize} events), concurrency ${c}${label}: ${caseNote}`);
      await ph.begin(`batch ingest, concurrency ${c}${label}`);
      const r = await loop(c, async () => checkBatch(await client.request("POST", "/usage-events/batch", batchBody(gen.take(settings.batchSize)), API_KEY), settings.batchSize));
      await ph.end(`batch ${settings.batchSize}, c=${c}${label}`);
      ingest.push(fromLoop(`REST \`POST /usage-events/batch\` (${settings.batchSize} events)${label}`, kind, settings.batchSize, r));
      progress(`  ${fmt(r.rps * settings.batchSize, 0)} events/s, p50 ${fmt(r.p50, 1)} ms, p99 ${fmt(r.p99, 1)} ms, ${r.errors} errors`);
      client.close();
      assertRunning("batch ingest");
    };
    for (const c of settings.batchConcurrencies) await batchPhase(c, "batch", "");
    // The best batch case: the stream's comparison (2c) runs at its concurrency, the summary loads (3) too.
    const bestBatch = ingest.filter((r) => r.kind === "batch").reduce<IngestResult | undefined>((a, b) => (!a || b.eventsPerSec > a.eventsPerSec ? b : a), undefined);

    // ---- 2c. The gRPC client stream against REST batches in the same database state. Two batch
    // phases in a row differ by half here (10,750 then 6,300 events/s: the tables grow past what
    // the buffer pool holds, and random-time index and totals writes start to read pages), so the
    // comparison is its own block, A B B A: a batch phase at the best batch concurrency, two
    // streams, a batch phase again, and the ratio of their sums (a linear drift cancels out).
    // Equal work: each stream carries as many events as the best batch case wrote in its window.
    const bestBatchConcurrency = bestBatch?.concurrency ?? Math.max(...settings.batchConcurrencies);
    const streamEvents = settings.streamEvents ?? Math.max(1000, Math.round((bestBatch?.events ?? 0) / 1000) * 1000);
    const streamPhase = async (label: string): Promise<void> => {
      const n = streamEvents;
      const message = (e: Ev) => ({ idempotencyKey: e.idempotencyKey, subjectId: e.subjectId, eventName: EVENT_NAME, data: e.data, timestamp: timestampFromDate(new Date(e.timestamp)) });
      // BENCH_STREAMS streams at once, each on its own connection, share the n events; for grpc-js
      // each stream's messages are encoded before the clock starts (this process shares the CPUs).
      const streams = settings.streams;
      const shares = Array.from({ length: streams }, (_, i) => Math.floor(n / streams) + (i < n % streams ? 1 : 0));
      const encoded =
        settings.streamClient === "connect"
          ? []
          : shares.map((count) => Array.from({ length: count }, () => Buffer.from(toBinary(UsageEventInputSchema, create(UsageEventInputSchema, message(gen.next()))))));
      progress(
        `gRPC StreamUsageEvents: ${fmtInt(n)} events in ${streams === 1 ? "one stream" : `${streams} streams at once`} (${settings.streamClient === "connect" ? "connect-es's gRPC transport" : "@grpc/grpc-js"})`,
      );
      await ph.begin(`the gRPC stream${label}`);
      const errorReasons = new Map<string, number>();
      let errors = 0;
      const t0 = performance.now();
      let seconds = Number.NaN;
      try {
        let res: StreamUsageEventsResponse;
        if (settings.streamClient === "connect") {
          sessionManager = new Http2SessionManager(baseUrl);
          const transport = createGrpcTransport({ baseUrl, sessionManager, defaultTimeoutMs: LONG_TIMEOUT_MS });
          const client = createClient(UsageEventService, transport);
          res = await client.streamUsageEvents(
            (async function* () {
              for (let i = 0; i < n; i++) yield message(gen.next());
            })(),
            { headers: { "x-api-key": API_KEY } },
          );
        } else {
          const answers = await Promise.all(encoded.map(async (messages) => fromBinary(StreamUsageEventsResponseSchema, await grpcJsStream(port, messages))));
          res = answers.reduce((a, b) => ({
            $typeName: a.$typeName,
            received: a.received + b.received,
            accepted: a.accepted + b.accepted,
            duplicate: a.duplicate + b.duplicate,
            rejected: a.rejected + b.rejected,
            rejections: [...a.rejections, ...b.rejections],
          }));
        }
        seconds = (performance.now() - t0) / 1000;
        acceptedTotal += Number(res.accepted);
        if (res.received !== n || res.accepted !== n || res.duplicate !== 0 || res.rejected !== 0 || res.rejections.length > 0) {
          errors++;
          const first = res.rejections[0];
          addReason(
            errorReasons,
            new Error(
              `stream of ${n}: received ${res.received}, accepted ${res.accepted}, duplicate ${res.duplicate}, rejected ${res.rejected}` +
                (first ? `; first rejection #${first.index}: ${first.error?.code} ${first.error?.message}` : ""),
            ),
          );
        }
      } catch (err) {
        errors++;
        addReason(errorReasons, err);
      }
      await ph.end(`gRPC stream${label}`);
      ingest.push({
        name: `gRPC \`StreamUsageEvents\` (client stream)${label}`,
        kind: "stream",
        concurrency: settings.streamClient === "connect" ? 1 : settings.streams,
        events: n,
        eventsPerSec: n / seconds,
        rps: Number.NaN,
        p50: Number.NaN,
        p99: Number.NaN,
        errors,
        errorReasons,
        note: `${fmtInt(n)} events in ${fmt(seconds, 2)} s`,
      });
      progress(`  ${fmt(n / seconds, 0)} events/s (${fmt(seconds, 2)} s), ${errors} errors`);
      sessionManager?.abort();
      sessionManager = undefined;
      assertRunning("the gRPC stream");
    };
    await batchPhase(bestBatchConcurrency, "batch-pair", " (A B B A: 1st A)");
    await streamPhase(" (A B B A: 1st B)");
    await streamPhase(" (A B B A: 2nd B)");
    await batchPhase(bestBatchConcurrency, "batch-pair", " (A B B A: 2nd A)");

    /**
     * The direct-to-MariaDB cases (no server): one closed loop per batch concurrency, each call of
     * `write` sending one batch of BENCH_BATCH_SIZE rows on its own pool; returns the rows written.
     */
    const directCases = async (
      o: { progressLabel: string; phaseLabel: string; unit: string; name: string; kind: "ceiling" | "bound" | "bound-hourly"; note: string; multipleStatements?: boolean },
      write: (pool: mysql.Pool) => Promise<void>,
    ): Promise<number> => {
      let rows = 0;
      for (const c of settings.batchConcurrencies) {
        const pool = mysql.createPool({ ...db.connection, database: db.name, connectionLimit: c, charset: "utf8mb4_unicode_ci", timezone: "Z", multipleStatements: o.multipleStatements ?? false });
        pools.push(pool);
        progress(`${o.progressLabel}, concurrency ${c}: ${caseNote}`);
        const before = rows;
        await ph.begin(`${o.phaseLabel}, concurrency ${c}`);
        const r = await loop(c, async () => {
          await write(pool);
          rows += settings.batchSize;
        });
        await ph.end(`${o.phaseLabel} ${settings.batchSize}, c=${c} (${o.unit})`, rows - before);
        ingest.push(fromLoop(o.name, o.kind, settings.batchSize, r, o.note));
        progress(`  ${fmt(r.rps * settings.batchSize, 0)} ${o.unit}/s, p50 ${fmt(r.p50, 1)} ms, p99 ${fmt(r.p99, 1)} ms, ${r.errors} errors`);
        await pool.end();
        pools.splice(pools.indexOf(pool), 1);
      }
      return rows;
    };

    // The environment of the bootstrap key: the direct cases write its rows as the server would.
    const [envRows] = await db.admin.query(`SELECT id FROM \`${db.name}\`.environments WHERE name = 'default'`);
    const environmentId = (envRows as { id: string }[])[0]?.id;
    if (!environmentId) throw new Error("no default environment in the database");

    // ---- 2d. The ceiling: the server's INSERT of the same rows, straight into a copy of the table.
    {
      await db.admin.query(`CREATE TABLE \`${db.name}\`.usage_events_ceiling LIKE \`${db.name}\`.usage_events`);
      // The statement is built as text, as the server's driver (mysql2, client-side placeholders) sends it,
      // but cheaply: the load generator shares the CPUs with MariaDB, so its own cost would lower the ceiling.
      // Every value is of the server's form: ue_ + 22 base62, a 64-hex fingerprint, DATETIME(3) text, the data as JSON.
      const head = "INSERT INTO usage_events_ceiling (id, environment_id, idempotency_key, fingerprint, subject_id, event_name, occurred_at, data, created_at) VALUES ";
      const idStem = `ue_${randomBase62(12)}`;
      let idSeq = 0;
      const quote = (v: string) => `'${v.replace(/[\\']/g, "\\$&")}'`;
      /** One row of the server's form for the ceiling's INSERTs. */
      const ceilingRow = (e: { idempotencyKey: string; subjectId: string; timestamp: string; data: unknown }, created: string) => {
        const id = `${idStem}${String(idSeq++).padStart(10, "0")}`;
        const fp = createHash("sha256").update(e.idempotencyKey).digest("hex");
        return `('${id}', '${environmentId}', ${quote(e.idempotencyKey)}, '${fp}', '${e.subjectId}', '${EVENT_NAME}', '${dbTime(new Date(e.timestamp))}', ${quote(JSON.stringify(e.data))}, ${created})`;
      };
      const ceilingRows = await directCases(
        {
          progressLabel: `ceiling: ${settings.batchSize}-row INSERTs into usage_events_ceiling`,
          phaseLabel: "ceiling",
          unit: "rows",
          name: `Ceiling: ${settings.batchSize}-row \`INSERT\` into MariaDB`,
          kind: "ceiling",
          note: "per statement",
        },
        async (pool) => {
          const created = quote(dbTime(new Date()));
          const values: string[] = [];
          for (const e of gen.take(settings.batchSize)) values.push(ceilingRow(e, created));
          const [res] = await pool.query(`${head}${values.join(", ")} ON DUPLICATE KEY UPDATE id = id`);
          const affected = (res as { affectedRows?: number }).affectedRows;
          if (affected !== settings.batchSize) throw new Error(`INSERT affected ${affected} rows, not ${settings.batchSize}`);
        },
      );
      // The single-row ceiling (issue 18: single-event REST against it, at the same concurrency):
      // one row per INSERT, autocommit (a commit each, as MariaDB groups concurrent commits), on
      // as many connections as the single-event case has clients.
      let singleRows = 0;
      {
        const c = settings.singleConcurrency;
        const pool = mysql.createPool({ ...db.connection, database: db.name, connectionLimit: c, charset: "utf8mb4_unicode_ci", timezone: "Z" });
        pools.push(pool);
        progress(`ceiling: 1-row INSERTs (autocommit) into usage_events_ceiling, concurrency ${c}: ${caseNote}`);
        await ph.begin("the 1-row ceiling");
        const r = await loop(c, async () => {
          const [e] = gen.take(1);
          if (!e) throw new Error("no event to insert");
          const [res] = await pool.query(`${head}${ceilingRow(e, quote(dbTime(new Date())))} ON DUPLICATE KEY UPDATE id = id`);
          if ((res as { affectedRows?: number }).affectedRows !== 1) throw new Error("a 1-row INSERT did not insert its row");
          singleRows++;
        });
        await ph.end(`ceiling 1, c=${c} (rows)`, singleRows);
        ingest.push(fromLoop("Ceiling: 1-row `INSERT` into MariaDB, autocommit", "ceiling-single", 1, r, "per statement"));
        progress(`  ${fmt(r.rps, 0)} rows/s, p50 ${fmt(r.p50, 1)} ms, p99 ${fmt(r.p99, 1)} ms, ${r.errors} errors`);
        await pool.end();
        pools.splice(pools.indexOf(pool), 1);
      }
      const [countRows] = await db.admin.query(`SELECT COUNT(*) AS n FROM \`${db.name}\`.usage_events_ceiling`);
      const stored = Number((countRows as { n: number | string }[])[0]?.n);
      if (stored !== ceilingRows + singleRows) integrity.push(`usage_events_ceiling holds ${stored} rows, but ${ceilingRows + singleRows} were inserted`);
      // Counted: the copy goes, so that its pages do not crowd the server's tables out of MariaDB's buffer pool in later phases.
      await db.admin.query(`DROP TABLE \`${db.name}\`.usage_events_ceiling`);
    }

    // ---- 2e. The database bound: what MariaDB alone spends on the writes a batch needs (the
    // events' INSERT and the server's own upserts of the hourly and minute totals, built by its
    // code), one transaction per batch in one round trip, into copies of the three tables. No
    // server can ingest faster on this machine than this, whatever it does in JavaScript.
    {
      for (const t of ["usage_events", "usage_rollups", "usage_rollups_minute"]) {
        await db.admin.query(`CREATE TABLE \`${db.name}\`.${t}_bound LIKE \`${db.name}\`.${t}`);
      }
      const boundMetric: PricingMetric = {
        id: metric.id,
        environmentId,
        eventName: EVENT_NAME,
        name: "",
        unit: "",
        dimensions: ["region"],
        aggregation: { type: "sum", valueField: "n" },
        createdAt: new Date(0),
        archivedAt: null,
      };
      const idStem = `ue_${randomBase62(12)}`;
      let idSeq = 0;
      // One batch's transaction: the INSERT and the totals upserts (the minute ones unless hourlyOnly).
      const boundWrite = (hourlyOnly: boolean) => async (pool: mysql.Pool) => {
        const created = dbTime(new Date());
        const params: unknown[] = [];
        const contributions = [];
        for (const e of gen.take(settings.batchSize)) {
          const at = new Date(e.timestamp).getTime();
          const fp = createHash("sha256").update(e.idempotencyKey).digest("hex");
          params.push(`${idStem}${String(idSeq++).padStart(10, "0")}`, environmentId, e.idempotencyKey, fp, e.subjectId, EVENT_NAME, dbTime(new Date(at)), JSON.stringify(e.data), created);
          contributions.push(...contributionsOf([boundMetric], e.subjectId, { eventName: EVENT_NAME, data: e.data, occurredAt: at, idempotencyKey: e.idempotencyKey }));
        }
        const totals = rollupStatements("mysql", mergeContributions(contributions)).filter(([sql]) => !hourlyOnly || !/^INSERT INTO usage_rollups_minute\b/.test(sql));
        const statements: (readonly [string, readonly unknown[]])[] = [
          ["SET TRANSACTION ISOLATION LEVEL READ COMMITTED", []], // as the server's ingest transactions
          ["START TRANSACTION", []],
          [
            `INSERT INTO usage_events_bound (id, environment_id, idempotency_key, fingerprint, subject_id, event_name, occurred_at, data, created_at) VALUES ${Array(settings.batchSize).fill("(?, ?, ?, ?, ?, ?, ?, ?, ?)").join(", ")} ON DUPLICATE KEY UPDATE id = id`,
            params,
          ],
          ...totals.map(([sql, p]) => [sql.replace(/^INSERT INTO (usage_rollups\w*)/, "INSERT INTO $1_bound"), p] as const),
          ["COMMIT", []],
        ];
        await pool.query(
          statements.map(([sql]) => sql).join(";\n"),
          statements.flatMap(([, p]) => p),
        );
      };
      let boundRows = await directCases(
        {
          progressLabel: `database bound: INSERT + totals upserts of ${settings.batchSize} events per transaction`,
          phaseLabel: "bound",
          unit: "events",
          name: "Database bound: the `INSERT` + hourly and minute totals, one transaction",
          kind: "bound",
          note: "per transaction",
          multipleStatements: true,
        },
        boundWrite(false),
      );
      // The same without the minute totals (this server's addition for summaries): the least that
      // DESIGN §7 allows (the events and their exact hourly totals, in the same transaction).
      boundRows += await directCases(
        {
          progressLabel: `database bound with hourly totals only: INSERT + hourly upserts of ${settings.batchSize} events per transaction`,
          phaseLabel: "bound hourly",
          unit: "events",
          name: "Database bound, hourly totals only (DESIGN §7's least): the `INSERT` + hourly totals, one transaction",
          kind: "bound-hourly",
          note: "per transaction",
          multipleStatements: true,
        },
        boundWrite(true),
      );
      const [countRows] = await db.admin.query(`SELECT COUNT(*) AS n FROM \`${db.name}\`.usage_events_bound`);
      const stored = Number((countRows as { n: number | string }[])[0]?.n);
      if (stored !== boundRows) integrity.push(`usage_events_bound holds ${stored} rows, but ${boundRows} were inserted`);
      for (const t of ["usage_events", "usage_rollups", "usage_rollups_minute"]) await db.admin.query(`DROP TABLE \`${db.name}\`.${t}_bound`);
    }

    // ---- 3. Summary subjects: load through the batch endpoint, then time summaries.
    const loadConcurrency = bestBatchConcurrency;
    const load = async (label: string, spread: SpreadEvents): Promise<LoadResult> => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: loadConcurrency });
      agents.push(agent);
      const errorReasons = new Map<string, number>();
      let errors = 0;
      progress(`loading ${fmtInt(spread.count)} events for the ${label} subject: batches of ${settings.batchSize}, concurrency ${loadConcurrency}`);
      await ph.begin(`the ${label} subject's load`);
      const t0 = performance.now();
      let lastReport = t0;
      let sent = 0;
      // Each worker sends a contiguous slice of the month, in time order.
      await Promise.all(
        Array.from({ length: loadConcurrency }, async (_, w) => {
          const from = Math.floor((w * spread.count) / loadConcurrency);
          const to = Math.floor(((w + 1) * spread.count) / loadConcurrency);
          for (let i = from; i < to && !gone(); i += settings.batchSize) {
            const events: Ev[] = [];
            for (let k = i; k < Math.min(to, i + settings.batchSize); k++) events.push(spread.event(k));
            try {
              checkBatch(await restRequest(agent, port, "POST", "/usage-events/batch", batchBody(events), API_KEY, LONG_TIMEOUT_MS), events.length);
            } catch (err) {
              errors++;
              addReason(errorReasons, err);
            }
            sent += events.length;
            if (performance.now() - lastReport > 10_000) {
              lastReport = performance.now();
              progress(`  ${fmtInt(sent)} / ${fmtInt(spread.count)} (${fmt(sent / ((lastReport - t0) / 1000), 0)} events/s)`);
            }
          }
        }),
      );
      const seconds = (performance.now() - t0) / 1000;
      await ph.end(`load ${label}`);
      agent.destroy();
      progress(`  ${fmtInt(spread.count)} events in ${fmt(seconds, 1)} s (${fmt(spread.count / seconds, 0)} events/s), ${errors} errors`);
      assertRunning(`the load of the ${label} subject`);
      return { label, events: spread.count, seconds, errors, errorReasons };
    };
    const loadStart = now();
    const small = new SpreadEvents(smallSubject, settings.summarySmall, loadStart, "sm");
    const large = new SpreadEvents(largeSubject, settings.summaryLarge, loadStart, "lg");
    loads.push(await load(fmtInt(small.count), small));
    loads.push(await load(fmtInt(large.count), large));

    const summarize = async (label: string, spread: SpreadEvents, end: PeriodEnd): Promise<SummaryResult> => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      agents.push(agent);
      const [rollupRows] = await db.admin.query(`SELECT COUNT(*) AS n FROM \`${db.name}\`.usage_rollups WHERE subject_id = ?`, [spread.subjectId]);
      const errorReasons = new Map<string, number>();
      let errors = 0;
      const latencies: number[] = [];
      const path = `/pricing-metrics/${metric.id}/summary`;
      // The period's (exclusive) end, and the raw events the server reads for the partial hour before it.
      const endAt = (): number => {
        const hourStart = Math.floor(now() / HOUR) * HOUR;
        return end === "now" ? now() : end === "hour" ? hourStart : hourStart - 1;
      };
      const edge = (t: number) => spread.countFrom(Math.floor(t / HOUR) * HOUR) - spread.countFrom(t);
      const edgeStart = edge(endAt());
      progress(
        `summary for the ${label} subject, period end ${end}: ${settings.summaryWarmup} warm-up + ${settings.summaryRequests} requests, sequential ` +
          `(${fmtInt(edgeStart)} raw events in the partial hour)`,
      );
      await ph.begin(`the ${label} subject's summaries`);
      let expected = "";
      for (let i = 0; i < settings.summaryWarmup + settings.summaryRequests && !gone(); i++) {
        const t = endAt();
        expected = centsText(spread.sumCentsBefore(t));
        const body = JSON.stringify({ subject_id: spread.subjectId, period: { start: new Date(MONTH_START).toISOString(), end: new Date(t).toISOString() } });
        const t0 = performance.now();
        try {
          const res = await restRequest(agent, port, "POST", path, body, API_KEY);
          const ms = performance.now() - t0;
          expectStatus200(res);
          const list = JSON.parse(res.body) as { value?: unknown }[];
          if (!Array.isArray(list) || list.length !== 1) throw new Error(`expected one summary, got ${res.body.slice(0, 200)}`);
          if (list[0]?.value !== expected) throw new Error(`summary value ${JSON.stringify(list[0]?.value)}, expected the exact sum ${expected}`);
          if (i >= settings.summaryWarmup) latencies.push(ms);
        } catch (err) {
          errors++;
          addReason(errorReasons, err);
        }
      }
      await ph.end(`summary ${label}, end ${end}`, 0);
      agent.destroy();
      const sorted = Float64Array.from(latencies).sort();
      const r: SummaryResult = {
        label,
        end,
        events: spread.count,
        rollupRows: Number((rollupRows as { n: number | string }[])[0]?.n),
        edgeEvents: [edgeStart, edge(endAt())],
        p50: percentile(sorted, 0.5),
        p99: percentile(sorted, 0.99),
        mean: latencies.reduce((a, b) => a + b, 0) / latencies.length,
        requests: latencies.length,
        expected,
        errors,
        errorReasons,
      };
      progress(`  p50 ${fmt(r.p50, 2)} ms, p99 ${fmt(r.p99, 2)} ms, ${errors} errors`);
      assertRunning(`the summaries of the ${label} subject`);
      return r;
    };
    summaries.push(await summarize(fmtInt(small.count), small, "now"));
    summaries.push(await summarize(fmtInt(large.count), large, "now"));
    summaries.push(await summarize(fmtInt(large.count), large, "hour"));
    summaries.push(await summarize(fmtInt(large.count), large, "hour-1ms"));

    // ---- Integrity: the tables hold exactly the accepted events.
    const [evRows] = await db.admin.query(`SELECT COUNT(*) AS n FROM \`${db.name}\`.usage_events`);
    const [ruRows] = await db.admin.query(`SELECT COALESCE(SUM(event_count), 0) AS n FROM \`${db.name}\`.usage_rollups`);
    const storedEvents = Number((evRows as { n: number | string }[])[0]?.n);
    const rolledUp = Number((ruRows as { n: number | string }[])[0]?.n);
    if (storedEvents !== acceptedTotal) integrity.push(`usage_events holds ${storedEvents} rows, but ${acceptedTotal} events were accepted`);
    if (rolledUp !== acceptedTotal) integrity.push(`usage_rollups counts ${rolledUp} events, but ${acceptedTotal} were accepted`);
    integrityNote = `usage_events holds ${fmtInt(storedEvents)} rows and usage_rollups counts ${fmtInt(rolledUp)} events; the API accepted ${fmtInt(acceptedTotal)}`;
  } catch (err) {
    fatal = err instanceof Error ? (err.stack ?? err.message) : String(err);
    progress(`failed: ${fatal}`);
  }

  if (interrupted) return 130;
  // Stop the server before the report, so that its last log lines are in.
  if (server) {
    const s = server;
    problems = s.problems;
    const died = s.exited();
    await rss?.phase("stop");
    server = undefined;
    stopNote = died ?? (await s.stop());
  }
  const elapsedS = (performance.now() - startedAt) / 1000;
  await cleanup();
  const errors = ingest.reduce((a, r) => a + r.errors, 0) + loads.reduce((a, r) => a + r.errors, 0) + summaries.reduce((a, r) => a + r.errors, 0) + integrity.length;
  report({
    dbVersion: db.version,
    ingest,
    loads,
    summaries,
    integrityNote,
    integrity,
    phases: phases?.rows ?? [],
    settled: phases?.settled ?? [],
    cannotSettle: phases?.cannotSettle,
    rss,
    quietBefore,
    problems,
    stopNote,
    fatal,
    elapsedS,
  });
  return fatal !== undefined || errors > 0 ? 1 : 0;
}

// ---------------------------------------------------------------------------------------------
// Report (stdout, Markdown)

function report(info: {
  dbVersion: string;
  ingest: IngestResult[];
  loads: LoadResult[];
  summaries: SummaryResult[];
  integrityNote: string | undefined;
  integrity: string[];
  phases: PhaseRow[];
  settled: Phases["settled"];
  cannotSettle: string | undefined;
  rss: RssSampler | undefined;
  /** Share of one CPU other processes used just before the run. */
  quietBefore: number | undefined;
  problems: string[];
  stopNote: string;
  fatal: string | undefined;
  elapsedS: number;
}): void {
  const cpus = cpuCount();
  const out: string[] = [];
  out.push("## Metering benchmark", "");
  out.push(machineLine(info.dbVersion));
  out.push(
    `The load generator, the server (a child process) and MariaDB share these ${cpus} CPUs, so the numbers are a lower bound for a dedicated server; ` +
      "MariaDB runs with its defaults here (innodb_flush_log_at_trx_commit=1: every commit is flushed to disk).",
  );
  out.push(
    `Ingest: closed loop, ${settings.warmupSeconds} s warm-up + ${settings.seconds} s measured per case (throughput counts requests completed inside the window); ` +
      `events go round-robin to ${settings.subjects} subjects and 3 regions, at random times of the current month, with unique idempotency keys; ` +
      `one pricing metric reads them (sum of \`n\`, dimension \`region\`). An event counts once its request answered: the API answers after the commit. ` +
      `REST over HTTP/1.1 keep-alive, one connection per worker, written and read by a lean client (bench/lib.ts LeanHttpConnection: Node's http client cost the shared CPUs twice as much); gRPC over one HTTP/2 connection, ${settings.streamClient === "connect" ? "sent by connect-es's gRPC transport" : "sent by @grpc/grpc-js (connect-es's transport cost this process about 80 µs of CPU per event)"}. Server LOG_LEVEL=${settings.serverLogLevel}` +
      `${settings.serverNodeArgs.length > 0 ? `, node options ${settings.serverNodeArgs.join(" ")}` : ""}.`,
    "",
  );

  // Ingest table.
  out.push("### Ingest", "");
  out.push(
    ...markdownTable(
      ["Case", "Concurrency", "Events/s", "Requests/s", "p50 ms", "p99 ms", "Errors"],
      info.ingest.map((r) => [
        r.name + (r.note ? ` (${r.note})` : ""),
        String(r.concurrency),
        fmtInt(r.eventsPerSec),
        Number.isFinite(r.rps) ? fmt(r.rps, r.rps < 100 ? 1 : 0) : "–",
        fmt(r.p50, 1),
        fmt(r.p99, 1),
        String(r.errors),
      ]),
    ),
    "",
  );
  const best = (kind: IngestResult["kind"]) => info.ingest.filter((r) => r.kind === kind).reduce<IngestResult | undefined>((a, b) => (!a || b.eventsPerSec > a.eventsPerSec ? b : a), undefined);
  const single = best("single");
  const ceilingSingle = best("ceiling-single");
  const batch = best("batch");
  const ceiling = best("ceiling");
  // The A B B A block (2c): the streams' events over their time against the mean of the two batch phases around them.
  const pairBatches = info.ingest.filter((r) => r.kind === "batch-pair");
  const pairStreams = info.ingest.filter((r) => r.kind === "stream");
  const pair =
    pairBatches.length > 0 && pairStreams.length > 0
      ? {
          concurrency: pairBatches[0]?.concurrency ?? 0,
          batches: pairBatches,
          streams: pairStreams,
          batchRate: pairBatches.reduce((a, b) => a + b.eventsPerSec, 0) / pairBatches.length,
          streamRate: pairStreams.reduce((a, b) => a + b.events, 0) / pairStreams.reduce((a, b) => a + b.events / b.eventsPerSec, 0),
        }
      : undefined;
  const share = batch && ceiling ? batch.eventsPerSec / ceiling.eventsPerSec : Number.NaN;
  if (ceiling) {
    out.push(
      `Ceiling (the best of the direct INSERTs): ${fmtInt(ceiling.eventsPerSec)} events/s at concurrency ${ceiling.concurrency} — ` +
        `the server's own \`usage_events\` INSERT (same 9 columns and kinds of values, as text the way its driver sends it, ON DUPLICATE KEY UPDATE included), ${settings.batchSize} rows per statement, autocommit, ` +
        "into `usage_events_ceiling` (`CREATE TABLE … LIKE usage_events`: same indexes), without the server's other statements (locks, lookups, hourly totals).",
    );
    const bound = best("bound");
    if (bound) {
      out.push(
        `Database bound (the best of the direct transactions): ${fmtInt(bound.eventsPerSec)} events/s at concurrency ${bound.concurrency} = ${fmt(bound.eventsPerSec / ceiling.eventsPerSec, 2)} of the ceiling — ` +
          `per ${settings.batchSize} events, one transaction in one round trip: the same INSERT plus the server's own upserts of the hourly and minute totals (its code builds them), ` +
          "into copies of the three tables. What MariaDB alone needs for the writes ingestion must make; no server in front of it goes faster on this machine.",
        `Batch ingest / database bound: **${fmt(batch ? batch.eventsPerSec / bound.eventsPerSec : Number.NaN, 2)}**.`,
      );
    }
    const hourly = best("bound-hourly");
    if (hourly) {
      out.push(
        `Database bound with hourly totals only (no minute totals: the least that DESIGN §7 allows, the events and their exact hourly totals in one transaction): ${fmtInt(hourly.eventsPerSec)} events/s at concurrency ${hourly.concurrency} = ${fmt(hourly.eventsPerSec / ceiling.eventsPerSec, 2)} of the ceiling.`,
      );
    }
    out.push(`Batch ingest / ceiling: **${fmt(share, 2)}** (best batch ${batch ? `${fmtInt(batch.eventsPerSec)} events/s at concurrency ${batch.concurrency}` : "–"}).`, "");
  }

  // Summary table.
  out.push("### Summary latency", "");
  out.push(
    ...markdownTable(
      ["Subject", "Loaded in", "Load events/s", "Load errors"],
      info.loads.map((l) => [`${l.label} events`, `${fmt(l.seconds, 1)} s`, fmtInt(l.events / l.seconds), String(l.errors)]),
    ),
    "",
  );
  const endName: Record<PeriodEnd, string> = {
    now: "now (the goal's case)",
    hour: "the current hour's start (hourly totals only)",
    "hour-1ms": "1 ms before it (59 minutes of minute totals, a minute of raw events)",
  };
  out.push(
    ...markdownTable(
      ["Subject", "Period end", "Hourly totals read", "Raw events in the partial hour", "Requests", "p50 ms", "p99 ms", "Sum check", "Errors"],
      info.summaries.map((s) => [
        `${s.label} events`,
        endName[s.end],
        fmtInt(s.rollupRows),
        s.edgeEvents[0] === s.edgeEvents[1] ? fmtInt(s.edgeEvents[0]) : `${fmtInt(s.edgeEvents[0])} → ${fmtInt(s.edgeEvents[1])}`,
        String(s.requests),
        fmt(s.p50, 2),
        fmt(s.p99, 2),
        s.errors === 0 ? `= ${s.expected}` : "failed",
        String(s.errors),
      ]),
    ),
    "",
  );
  const sSmall = info.summaries.find((s) => s.events === settings.summarySmall && s.end === "now");
  const sLarge = info.summaries.find((s) => s.events === settings.summaryLarge && s.end === "now");
  const sHour = info.summaries.find((s) => s.events === settings.summaryLarge && s.end === "hour");
  const sFull = info.summaries.find((s) => s.events === settings.summaryLarge && s.end === "hour-1ms");
  const ratio = sSmall && sLarge ? sLarge.p50 / sSmall.p50 : Number.NaN;
  out.push(
    "Period: from the first instant of the current UTC month (inclusive) to the end shown (exclusive), no dimensions, no granularity; sequential, " +
      `${settings.summaryWarmup} warm-up requests then ${settings.summaryRequests} measured per row; every answer's value is checked against the exact sum of the events in the period. ` +
      `Events were spread evenly over the month so far and loaded with batches of ${settings.batchSize} at the best batch concurrency, each worker a contiguous slice of the month. ` +
      "The server reads the whole hours from the hourly totals, the whole minutes of the partial hour at the period's end from the minute totals, " +
      'and only the events of the partial minute raw; "Raw events in the partial hour" is what a read of the partial hour from raw events would have to scan. The rows ending on the hour and 1 ms before it bound the case ending now.',
  );
  out.push(`p50 ${sLarge ? fmtInt(sLarge.events) : "–"} / p50 ${sSmall ? fmtInt(sSmall.events) : "–"} (period end now): **${fmt(ratio, 2)}**.`);
  if (sHour && sFull && sSmall) {
    out.push(
      `Ending 1 ms before the hour (59 minutes from the minute totals, the last minute's events raw): ${fmt(sFull.p50 / sSmall.p50, 2)}×; ` +
        `on the hour (hourly totals only): ${fmt(sHour.p50 / sSmall.p50, 2)}×.`,
    );
  }
  out.push("");

  // Resources per phase.
  out.push("### Resources per phase", "");
  const pct = (s: number | undefined, wall: number) => (s === undefined ? "–" : `${fmt((100 * s) / wall, 0)}%`);
  // CPU time per event (or per row, for the ceiling): what a machine of a given size can sustain.
  const perEvent = (s: number | undefined, events: number) => (s === undefined || !(events > 0) ? "–" : fmt((s * 1e6) / events, 1));
  out.push(
    ...markdownTable(
      [
        "Phase",
        "Wall s",
        "Events",
        "Server CPU",
        "MariaDB CPU",
        "Bench CPU",
        "Other CPU",
        "Server µs/event",
        "MariaDB µs/event",
        "Commits",
        "Events/commit",
        "fsyncs",
        "Row-lock waits",
        "Lock wait ms",
        "Deadlocks",
        "Server RSS max MB",
      ],
      info.phases.map((p) => [
        p.label,
        fmt(p.wallS, 1),
        Number.isFinite(p.events) ? fmtInt(p.events) : "–",
        pct(p.serverCpuS, p.wallS),
        pct(p.dbCpuS, p.wallS),
        pct(p.benchCpuS, p.wallS),
        pct(p.otherCpuS, p.wallS),
        perEvent(p.serverCpuS, p.events),
        perEvent(p.dbCpuS, p.events),
        fmtInt(p.status.Com_commit),
        p.status.Com_commit > 0 && p.events > 0 ? fmt(p.events / p.status.Com_commit, 1) : "–",
        fmtInt(p.status.Innodb_data_fsyncs),
        fmtInt(p.status.Innodb_row_lock_waits),
        fmtInt(p.status.Innodb_row_lock_time),
        fmtInt(p.status.Innodb_deadlocks),
        fmt(p.rssMaxMb, 0),
      ]),
    ),
    "",
  );
  out.push(
    `CPU is a share of one core (${cpus * 100}% is the whole machine). Commits are explicit COMMITs (the server's transactions; the ceiling's INSERTs autocommit); ` +
      "commits, fsyncs, lock waits and deadlocks are MariaDB's server-wide counters over the phase. " +
      "Other CPU is every other process on the machine: anything above a few percent competed with the benchmark for the CPUs, and its clients may show up in MariaDB's counters.",
  );
  if (info.quietBefore !== undefined) out.push(`Other processes before the run: ${fmt(info.quietBefore * 100, 0)}% CPU.`);
  const waits = info.settled.filter((w) => w.dirtyPages > 0 && w.seconds > 0);
  out.push(
    SETTLE_MAX_S <= 0 || info.cannotSettle !== undefined
      ? `Phases did not wait for MariaDB to settle (${info.cannotSettle !== undefined ? `it could not be made to flush: ${info.cannotSettle}` : "BENCH_SETTLE_SECONDS=0"}): each paid for the page flushing of the ones before it.`
      : `Before each phase MariaDB wrote out what the earlier ones left (innodb_max_dirty_pages_pct 0 until dirty pages and checkpoint age were under 1%, then its value again; at most ${fmt(SETTLE_MAX_S, 0)} s): ` +
          (waits.length === 0
            ? "nothing to write."
            : `${waits.map((w) => `${fmtInt(w.dirtyPages)} dirty pages in ${fmt(w.seconds, 1)} s before ${w.before}${w.timedOut ? " (not all)" : ""}`).join("; ")}.`),
  );
  const busy = info.phases.filter((p) => p.otherTop.length > 0 && p.wallS >= 1);
  if (busy.length > 0) {
    out.push("", "**The machine was not quiet** — other processes using CPU during:");
    for (const p of busy) out.push(`- ${p.label}: ${p.otherTop.join("; ")}`);
  }
  const maxRss = info.rss?.maxMb ?? Number.NaN;
  out.push(`Server resident memory (VmRSS every ${settings.rssIntervalMs} ms, ${info.rss?.sampleCount ?? 0} samples): max **${fmt(maxRss, 0)} MB**.`, "");

  // Goals.
  out.push("### Goals", "");
  const met = (ok: boolean | undefined) => (ok === undefined ? "not measured" : ok ? "**met**" : "**missed**");
  const goalRows: string[][] = [
    [
      "Single-event REST",
      `≥ ${fmtInt(GOALS.singleEventsPerSec)} events/s`,
      single ? `${fmtInt(single.eventsPerSec)} events/s` : "–",
      met(single ? single.eventsPerSec >= GOALS.singleEventsPerSec : undefined),
    ],
    [
      "Single-event REST / 1-row autocommit ceiling, same concurrency (issue 18)",
      "≥ 1.0×",
      single && ceilingSingle ? `${fmt(single.eventsPerSec / ceilingSingle.eventsPerSec, 2)}× (${fmtInt(single.eventsPerSec)} / ${fmtInt(ceilingSingle.eventsPerSec)})` : "–",
      met(single && ceilingSingle ? single.eventsPerSec >= ceilingSingle.eventsPerSec : undefined),
    ],
    ["Batch REST", `≥ ${fmtInt(GOALS.batchEventsPerSec)} events/s`, batch ? `${fmtInt(batch.eventsPerSec)} events/s` : "–", met(batch ? batch.eventsPerSec >= GOALS.batchEventsPerSec : undefined)],
    [
      "Batch REST / ceiling",
      `≥ ${fmt(GOALS.batchShareOfCeiling * 100, 0)}%`,
      Number.isFinite(share) ? `${fmt(share * 100, 0)}%` : "–",
      met(Number.isFinite(share) ? share >= GOALS.batchShareOfCeiling : undefined),
    ],
    [
      `Summary p50, ${fmtInt(settings.summaryLarge)} / ${fmtInt(settings.summarySmall)} events`,
      `≤ ${GOALS.summaryP50Ratio}×`,
      Number.isFinite(ratio)
        ? `${fmt(ratio, 2)}× (${fmt(sLarge?.p50 ?? Number.NaN, 2)} / ${fmt(sSmall?.p50 ?? Number.NaN, 2)} ms)` +
          (sFull && sSmall ? `; ${fmt(sFull.p50 / sSmall.p50, 2)}× ending 1 ms before the hour` : "")
        : "–",
      met(Number.isFinite(ratio) ? ratio <= GOALS.summaryP50Ratio : undefined),
    ],
    ["Server RSS", `< ${GOALS.rssMb} MB`, `${fmt(maxRss, 0)} MB`, met(Number.isFinite(maxRss) ? maxRss < GOALS.rssMb : undefined)],
    [
      "gRPC client stream / REST batches, same database state (A B B A; issue 18)",
      "≥ 1.0×",
      pair ? `${fmt(pair.streamRate / pair.batchRate, 2)}× (${fmtInt(pair.streamRate)} / ${fmtInt(pair.batchRate)} events/s)` : "–",
      met(pair ? pair.streamRate >= pair.batchRate : undefined),
    ],
  ];
  out.push(...markdownTable(["Goal", "Target", "Measured", "Result"], goalRows), "");
  const missed = goalRows.filter((r) => r[3] === "**missed**").map((r) => r[0]);
  const unmeasured = goalRows.filter((r) => r[3] === "not measured").map((r) => r[0]);
  out.push(
    missed.length === 0 && unmeasured.length === 0
      ? "Every goal was met."
      : `Met: ${goalRows.filter((r) => r[3] === "**met**").length} of ${goalRows.length}.` +
          (missed.length > 0 ? ` Missed: ${missed.join("; ")}.` : "") +
          (unmeasured.length > 0 ? ` Not measured: ${unmeasured.join("; ")}.` : ""),
  );
  if (pair) {
    out.push(
      `The stream against the batches: batch phases at concurrency ${pair.concurrency} of ${pair.batches.map((b) => fmtInt(b.eventsPerSec)).join(" and ")} events/s around two streams of ` +
        `${pair.streams.map((b) => `${fmtInt(b.events)} events at ${fmtInt(b.eventsPerSec)}/s`).join(" and ")}: all the streams' events over their time, against the mean of the batch phases.`,
    );
  }
  out.push("");

  // Checks, errors, server.
  out.push("### Checks", "");
  if (info.integrityNote) out.push(`- ${info.integrityNote}.`);
  for (const line of info.integrity) out.push(`- **Mismatch**: ${line}.`);
  out.push(
    "- Every response was checked: HTTP 200 and every event `accepted` (batch results one by one and their counts; the stream's received/accepted/duplicate/rejected), " +
      "and every summary's value against the exact sum of the values sent.",
  );
  const failed = [
    ...info.ingest.flatMap((r) => [...r.errorReasons].map(([reason, n]) => `${r.name}, concurrency ${r.concurrency}: ${n} × ${reason}`)),
    ...info.loads.flatMap((l) => [...l.errorReasons].map(([reason, n]) => `load of the ${l.label} subject: ${n} × ${reason}`)),
    ...info.summaries.flatMap((s) => [...s.errorReasons].map(([reason, n]) => `summary of the ${s.label} subject: ${n} × ${reason}`)),
  ];
  if (failed.length > 0) {
    out.push("", "**Errors** (warm-up included):", "");
    for (const f of failed) out.push(`- ${f}`);
  }
  if (info.fatal) out.push("", `**The run stopped early**: ${info.fatal.split("\n")[0]}`);
  out.push("");
  out.push(...serverReportLines(info.stopNote || "not started", info.problems));
  out.push(`Run time: ${fmt(info.elapsedS / 60, 1)} min.`);
  process.stdout.write(`${out.join("\n")}\n`);
}

await runBenchmark(main);
