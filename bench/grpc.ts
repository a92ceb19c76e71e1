/**
 * gRPC against REST in one run (issue 13): the same server, the same MariaDB database, the same
 * concurrency, one phase after the other, each with the server's CPU time per call.
 *
 * Phases, each a closed loop (BENCH_CONCURRENCY workers, default 16, each sending its next call as
 * soon as the previous one answered) for BENCH_SECONDS after a warm-up:
 *   1. REST `GET /subjects/{id}`                 vs  2. gRPC `SubjectService/GetSubject`
 *      (round-robin over subjects created before the run; one SELECT + cached key lookup)
 *   3. REST `GET /ping`                          vs  4. gRPC `HealthService/Ping` (no key, no database)
 *   5. REST `POST /usage-events/batch`           vs  6. gRPC `UsageEventService/StreamUsageEvents`
 *      (BENCH_EVENTS_PER_CALL events per batch or per stream, default 500, every one accepted;
 *      not a timed window: after one warm-up call each worker makes BENCH_INGEST_CALLS calls,
 *      default 3, and events/s and CPU are over the wall time of all of them)
 * Server CPU per call: the server child's user + system CPU time (/proc/<pid>/stat, all its
 * threads: what process.cpuUsage() reports inside it) over the measured window, divided by the
 * calls that completed in it (for ingest: per event). The window is "completed" (every call that
 * finished inside it counts) so that calls and CPU cover the same interval.
 *
 * Clients, both lean so that the load generator (which shares the CPUs) is not the limit: REST
 * over one keep-alive HTTP/1.1 connection per worker (LeanHttpPool); gRPC over
 * BENCH_GRPC_CONNECTIONS HTTP/2 connections (default 4) framed by lean-grpc.ts, calls spread
 * round-robin, messages encoded with the generated schemas, every answer checked (grpc-status 0;
 * the subject's ID in the reply; the stream's counts). Any error makes the run exit with status 1.
 * The report gives the load generator's own CPU per call beside the server's: node:http2's client
 * (BENCH_GRPC_CLIENT=node) cost about 71 µs per GetSubject here, the lean one 23–29, REST's 17–20.
 *
 * Run:   npm run bench:grpc                  (needs MariaDB/MySQL at 127.0.0.1:3306, user root)
 * Env:   BENCH_SECONDS=5 BENCH_WARMUP_SECONDS=1 BENCH_CONCURRENCY=16 BENCH_GRPC_CONNECTIONS=4
 *        BENCH_EVENTS_PER_CALL=500 BENCH_INGEST_CALLS=3 BENCH_SEED_SUBJECTS=200
 *        BENCH_MYSQL_URL=mysql://root@127.0.0.1:3306 BENCH_SERVER_LOG_LEVEL=warn
 *        BENCH_CPU_PROF=1                    run the server with --cpu-prof (profile written to the repo root on stop)
 *        BENCH_SERVER_NODE_ARGS="…"          more node options for the server child only, space-separated
 *        BENCH_GRPC_CLIENT=node              gRPC over node:http2's client instead of the lean one
 *        BENCH_GRPC_STOCK_BIND=1             node:http2's client with Node's own AsyncResource.bind (see leanAsyncResourceBind)
 *        BENCH_GRPC_CASES=get,ping,ingest    which pairs of phases run (all three by default; e.g. `get` to profile GetSubject alone)
 * Output: progress on stderr; the report (Markdown) on stdout. About a minute with the defaults on
 *        a quiet machine (the ingest phases are fixed work: a busy machine makes them longer).
 */
import { AsyncResource } from "node:async_hooks";
import { randomBytes } from "node:crypto";
import http2 from "node:http2";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { GetSubjectRequestSchema } from "../src/gen/billing/v1/subject_service_pb.js";
import { UsageEventInputSchema } from "../src/gen/billing/v1/usage_event_pb.js";
import { LeanGrpcConnection, envelope, unwrap } from "./lean-grpc.js";
import { StreamUsageEventsResponseSchema } from "../src/gen/billing/v1/usage_event_service_pb.js";
import {
  type LoopResult,
  LeanHttpPool,
  type Server,
  cpuCount,
  createThrowawayDatabase,
  envNumber,
  expectStatus200,
  fmt,
  fmtInt,
  freePort,
  machineLine,
  markdownTable,
  measuredLoop,
  percentile,
  processCpuSeconds,
  progress,
  runBenchmark,
  serverEnvironment,
  serverReportLines,
  startChildServer,
} from "./lib.js";

const API_KEY = "sk_test_bench000000000000000000";

const settings = {
  seconds: envNumber("BENCH_SECONDS", 5, 0.1),
  warmupSeconds: envNumber("BENCH_WARMUP_SECONDS", 1, 0),
  concurrency: Math.floor(envNumber("BENCH_CONCURRENCY", 16, 1)),
  connections: Math.floor(envNumber("BENCH_GRPC_CONNECTIONS", 4, 1)),
  eventsPerCall: Math.floor(envNumber("BENCH_EVENTS_PER_CALL", 500, 1)),
  ingestCallsPerWorker: Math.floor(envNumber("BENCH_INGEST_CALLS", 3, 1)),
  seedSubjects: Math.floor(envNumber("BENCH_SEED_SUBJECTS", 200, 1)),
  mysqlUrl: process.env.BENCH_MYSQL_URL || "mysql://root@127.0.0.1:3306",
  serverLogLevel: process.env.BENCH_SERVER_LOG_LEVEL || "warn",
  cpuProf: process.env.BENCH_CPU_PROF === "1",
  stockBind: process.env.BENCH_GRPC_STOCK_BIND === "1",
  client: process.env.BENCH_GRPC_CLIENT === "node" ? "node" : "lean",
  cases: new Set((process.env.BENCH_GRPC_CASES || "get,ping,ingest").split(",").map((c) => c.trim())),
};

// ---------------------------------------------------------------------------------------------
// A lean gRPC client over node:http2

/**
 * The load generator's one change to Node (none to the server): node:http2's client `request()`
 * binds each new stream's connect callback with `AsyncResource.prototype.bind`, which on Node 20
 * also defines a deprecated `asyncResource` accessor (DEP0172) out of two fresh
 * `util.deprecate()` wrappers, on every call: about a sixth of this client's CPU per call in a
 * profile, on the two CPUs the server shares. This `bind` does what the callback needs (it runs in
 * the resource's async scope, with the caller's `this`) without the deprecated property, so the
 * client stays node:http2's and the bytes on the wire are the same. BENCH_GRPC_STOCK_BIND=1
 * keeps Node's own.
 */
function leanAsyncResourceBind(): void {
  type Bindable = { bind(fn: (...args: unknown[]) => unknown, thisArg?: unknown): (...args: unknown[]) => unknown };
  (AsyncResource.prototype as unknown as Bindable).bind = function bind(this: AsyncResource, fn, thisArg) {
    const resource = this;
    if (thisArg !== undefined) return resource.runInAsyncScope.bind(resource, fn, thisArg) as (...args: unknown[]) => unknown;
    return function (this: unknown, ...args: unknown[]) {
      return resource.runInAsyncScope(fn, this, ...args);
    };
  };
}
if (!settings.stockBind) leanAsyncResourceBind();

/** BENCH_GRPC_CLIENT=node: node:http2's client, as before the lean one (lean-grpc.ts). */
class NodeGrpcClient {
  private readonly sessions: http2.ClientHttp2Session[];
  private next = 0;
  constructor(url: string, count: number) {
    this.sessions = Array.from({ length: count }, () => {
      const s = http2.connect(url);
      s.on("error", () => {}); // a failed call reports it
      return s;
    });
  }

  /** Request headers per path and key, built once (node:http2 copies them per request). */
  private readonly headers = new Map<string, http2.OutgoingHttpHeaders>();

  /**
   * One call: `body` is the whole request (envelopes); resolves with the answer's body once
   * grpc-status is 0. The listeners are anonymous arrows: tsx (esbuild keepNames) names every
   * named closure with Object.defineProperty, per call.
   */
  call(path: string, body: Buffer | Buffer[], key?: string): Promise<Buffer> {
    const session = this.sessions[this.next++ % this.sessions.length] as http2.ClientHttp2Session;
    const id = key ? `${path} ${key}` : path;
    let headers = this.headers.get(id);
    if (!headers) {
      headers = { ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers" };
      if (key) headers["x-api-key"] = key;
      this.headers.set(id, headers);
    }
    return new Promise((resolve, reject) => {
      const stream = session.request(headers);
      const chunks: Buffer[] = [];
      let status: string | undefined;
      let message = "";
      // grpc-status comes in the trailers, or in the headers of a trailers-only answer.
      stream.on("response", (h: http2.IncomingHttpHeaders) => {
        if (h["grpc-status"] === undefined) return;
        status = String(h["grpc-status"]);
        message = String(h["grpc-message"] ?? "");
      });
      stream.on("trailers", (h: http2.IncomingHttpHeaders) => {
        if (h["grpc-status"] === undefined) return;
        status = String(h["grpc-status"]);
        message = String(h["grpc-message"] ?? "");
      });
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("error", reject);
      stream.on("close", () => {
        if (status === "0") resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks));
        else reject(new Error(status === undefined ? `gRPC stream closed without a status (code ${stream.rstCode})` : `grpc-status ${status}: ${decodeURIComponent(message)}`));
      });
      if (Array.isArray(body)) {
        for (const b of body) stream.write(b);
        stream.end();
      } else stream.end(body);
    });
  }

  close(): void {
    for (const s of this.sessions) s.close();
  }
}

/** The lean client's connections, calls spread round-robin. */
class LeanGrpcClient {
  private readonly connections: LeanGrpcConnection[];
  private next = 0;
  constructor(port: number, count: number) {
    this.connections = Array.from({ length: count }, () => new LeanGrpcConnection(port));
  }

  call(path: string, body: Buffer | Buffer[], key?: string): Promise<Buffer> {
    return (this.connections[this.next++ % this.connections.length] as LeanGrpcConnection).call(path, body, key);
  }

  close(): void {
    for (const c of this.connections) c.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Phases

interface Phase {
  name: string;
  protocol: "REST" | "gRPC";
  loop: LoopResult;
  /** Events per call (ingest) or 1. */
  perCall: number;
  /** Server CPU seconds over the measured window and calls completed in it. */
  cpuSeconds: number;
  /** The load generator's own CPU seconds (this process, all threads) over the same window. */
  clientCpuSeconds: number;
  windowCalls: number;
}

/**
 * Ingest: calls take seconds each, too long for a window of a few seconds to count them fairly,
 * so each worker makes `callsPerWorker` calls after one warm-up call, and the figures are the
 * events sent over the wall time from the first measured call to the last answer, with the
 * server's CPU over exactly that interval.
 */
async function fixedWork(name: string, protocol: "REST" | "gRPC", server: Server, callsPerWorker: number, call: () => Promise<void>, perCall: number): Promise<Phase> {
  progress(`${protocol} ${name}: one warm-up call per worker, then ${callsPerWorker} each, concurrency ${settings.concurrency}`);
  await Promise.all(Array.from({ length: settings.concurrency }, () => call()));
  const cpuStart = await processCpuSeconds(server.pid);
  const clientStart = process.cpuUsage();
  const start = process.hrtime.bigint();
  const latencies: number[] = [];
  await Promise.all(
    Array.from({ length: settings.concurrency }, async () => {
      for (let i = 0; i < callsPerWorker; i++) {
        const t = process.hrtime.bigint();
        await call();
        latencies.push(Number(process.hrtime.bigint() - t) / 1e6);
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const clientCpuSeconds = cpuSecondsSince(clientStart);
  const cpuSeconds = ((await processCpuSeconds(server.pid)) ?? Number.NaN) - (cpuStart ?? Number.NaN);
  const sorted = Float64Array.from(latencies).sort();
  const loop: LoopResult = {
    concurrency: settings.concurrency,
    requests: sorted.length,
    rps: sorted.length / seconds,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    errors: 0,
    errorReasons: new Map(),
  };
  progress(`  ${fmtInt(loop.rps * perCall)} events/s, server CPU ${fmt((cpuSeconds * 1e6) / (loop.requests * perCall), 0)} µs per event`);
  return { name, protocol, loop, perCall, cpuSeconds, clientCpuSeconds, windowCalls: loop.requests };
}

function cpuSecondsSince(start: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1e6;
}

async function phase(name: string, protocol: "REST" | "gRPC", server: Server, call: () => Promise<void>, perCall = 1): Promise<Phase> {
  progress(`${protocol} ${name}: ${settings.warmupSeconds} s warm-up, ${settings.seconds} s measured, concurrency ${settings.concurrency}`);
  const { loop, cpuSeconds, clientCpuSeconds } = await measuredLoop({
    concurrency: settings.concurrency,
    warmupSeconds: settings.warmupSeconds,
    seconds: settings.seconds,
    call,
    gone: () => server.exited() !== undefined,
    pid: server.pid,
  });
  if (loop.errors > 0) {
    const reasons = [...loop.errorReasons].map(([r, n]) => `${n}× ${r}`).join("; ");
    throw new Error(`${protocol} ${name}: ${loop.errors} calls failed: ${reasons}`);
  }
  progress(`  ${fmtInt(loop.rps * perCall)} ${perCall > 1 ? "events" : "calls"}/s, server CPU ${fmt((cpuSeconds * 1e6) / (loop.requests * perCall), 0)} µs per ${perCall > 1 ? "event" : "call"}`);
  return { name, protocol, loop, perCall, cpuSeconds, clientCpuSeconds, windowCalls: loop.requests };
}

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<number> {
  const db = await createThrowawayDatabase(settings.mysqlUrl, "bench");
  let server: Server | undefined;
  const cleanup = async () => {
    if (server) await server.stop();
    server = undefined;
    await db.drop();
  };
  process.once("SIGINT", () => {
    progress("interrupted: stopping the server and dropping the database");
    cleanup().finally(() => process.exit(130));
  });
  try {
    progress(`created database ${db.name} on ${db.version}`);
    const port = await freePort();
    const env = serverEnvironment(process.env, {
      DATABASE_URL: db.url,
      PORT: String(port),
      BILLING_BOOTSTRAP_API_KEY: API_KEY,
      LOG_LEVEL: settings.serverLogLevel,
      // No per-key limit: the benchmark sends from one key as fast as the server answers.
      RATE_LIMIT_API_RPS: "0",
      RATE_LIMIT_INGEST_RPS: "0",
    });
    server = await startChildServer(env, [...(settings.cpuProf ? ["--cpu-prof"] : []), ...(process.env.BENCH_SERVER_NODE_ARGS || "").split(" ").filter(Boolean)]);
    const s = server;
    const url = `http://127.0.0.1:${s.port}`;
    progress(`server ready at ${url} (pid ${s.pid})`);

    const rest = new LeanHttpPool(s.port, settings.concurrency);
    const grpc = settings.client === "node" ? new NodeGrpcClient(url, settings.connections) : new LeanGrpcClient(s.port, settings.connections);
    const run = randomBytes(4).toString("hex");

    // Setup through the API: subjects, and a metric for the events.
    const ids: string[] = [];
    for (let i = 0; i < settings.seedSubjects; i++) {
      const r = await rest.request("POST", "/subjects", JSON.stringify({ name: `Bench ${i}`, external_id: `grpc-${run}-${i}` }), API_KEY);
      expectStatus200(r);
      ids.push((JSON.parse(r.body) as { id: string }).id);
    }
    expectStatus200(
      await rest.request(
        "POST",
        "/pricing-metrics",
        JSON.stringify({ event_name: "api_call", name: "API calls", unit: "call", dimensions: ["region"], aggregation: { aggregation_type: "sum", value_field: "n" } }),
        API_KEY,
      ),
    );
    progress(`created ${ids.length} subjects and a pricing metric`);

    const phases: Phase[] = [];
    let restGet = 0;
    if (settings.cases.has("get"))
      phases.push(
        await phase("GET /subjects/{id}", "REST", s, async () => {
          const id = ids[restGet++ % ids.length] as string;
          const r = await rest.request("GET", `/subjects/${id}`, undefined, API_KEY);
          expectStatus200(r);
          if (!r.body.includes(id)) throw new Error(`the answer lacks ${id}`);
        }),
      );
    const getRequests = ids.map((id) => envelope(toBinary(GetSubjectRequestSchema, create(GetSubjectRequestSchema, { subjectId: id }))));
    let grpcGet = 0;
    if (settings.cases.has("get"))
      phases.push(
        await phase("SubjectService/GetSubject", "gRPC", s, async () => {
          const i = grpcGet++ % ids.length;
          const body = await grpc.call("/billing.v1.SubjectService/GetSubject", getRequests[i] as Buffer, API_KEY);
          if (!body.includes(ids[i] as string)) throw new Error(`the answer lacks ${ids[i]}`);
        }),
      );
    if (settings.cases.has("ping"))
      phases.push(
        await phase("GET /ping", "REST", s, async () => {
          expectStatus200(await rest.request("GET", "/ping"));
        }),
      );
    const emptyMessage = envelope(new Uint8Array(0));
    if (settings.cases.has("ping"))
      phases.push(
        await phase("HealthService/Ping", "gRPC", s, async () => {
          await grpc.call("/billing.v1.HealthService/Ping", emptyMessage);
        }),
      );

    const n = settings.eventsPerCall;
    const now = Date.now();
    let seq = 0;
    const event = () => {
      const k = seq++;
      return {
        idempotency_key: `${run}-${k}`,
        subject_id: ids[k % ids.length] as string,
        event_name: "api_call",
        data: { n: "1", region: ["eu", "us", "ap"][k % 3] as string },
        timestamp: new Date(now - (k % 3_600_000)).toISOString(),
      };
    };
    if (settings.cases.has("ingest"))
      phases.push(
        await fixedWork(
          `POST /usage-events/batch (${n} events)`,
          "REST",
          s,
          settings.ingestCallsPerWorker,
          async () => {
            const r = await rest.request("POST", "/usage-events/batch", JSON.stringify({ events: Array.from({ length: n }, event) }), API_KEY);
            expectStatus200(r);
            const accepted = (JSON.parse(r.body) as { accepted: number }).accepted;
            if (accepted !== n) throw new Error(`${accepted} of ${n} events accepted`);
          },
          n,
        ),
      );
    if (settings.cases.has("ingest"))
      phases.push(
        await fixedWork(
          `UsageEventService/StreamUsageEvents (${n} events)`,
          "gRPC",
          s,
          settings.ingestCallsPerWorker,
          async () => {
            const messages = Array.from({ length: n }, () => {
              const e = event();
              return envelope(
                toBinary(
                  UsageEventInputSchema,
                  create(UsageEventInputSchema, {
                    idempotencyKey: e.idempotency_key,
                    subjectId: e.subject_id,
                    eventName: e.event_name,
                    data: e.data,
                    timestamp: timestampFromDate(new Date(e.timestamp)),
                  }),
                ),
              );
            });
            // Written in slices of 50 events, as a client streaming them would.
            const slices: Buffer[] = [];
            for (let i = 0; i < messages.length; i += 50) slices.push(Buffer.concat(messages.slice(i, i + 50)));
            const res = fromBinary(StreamUsageEventsResponseSchema, unwrap(await grpc.call("/billing.v1.UsageEventService/StreamUsageEvents", slices, API_KEY)));
            if (res.accepted !== n) throw new Error(`${res.accepted} of ${n} events accepted (${res.rejected} rejected)`);
          },
          n,
        ),
      );

    rest.close();
    grpc.close();
    const stopNote = await s.stop();
    server = undefined;
    report(phases, db.version, stopNote, s.problems);
    return 0;
  } finally {
    await cleanup();
  }
}

// ---------------------------------------------------------------------------------------------
// Report

function report(phases: Phase[], dbVersion: string, stopNote: string, problems: string[]): void {
  const rate = (p: Phase) => p.loop.rps * p.perCall;
  const cpu = (p: Phase) => (p.cpuSeconds * 1e6) / (p.windowCalls * p.perCall);
  const lines = [
    "## gRPC and REST, one run",
    "",
    machineLine(dbVersion),
    `Concurrency ${settings.concurrency}; ${settings.warmupSeconds} s warm-up and ${settings.seconds} s measured per phase; gRPC over ${settings.connections} HTTP/2 connections (${settings.client === "node" ? "node:http2's client" : "the lean client, bench/lean-grpc.ts"}), REST over one HTTP/1.1 connection per worker (LeanHttpPool). ` +
      `The load generator and the server share these ${cpuCount()} CPUs: figures from a busy machine are low and noisy.`,
    "",
    ...markdownTable(
      ["case", "protocol", "calls/s", "events/s", "p50 ms", "p99 ms", "server CPU µs per call", "per event", "load generator CPU µs per call"],
      phases.map((p) => [
        p.name,
        p.protocol,
        fmtInt(p.loop.rps),
        p.perCall > 1 ? fmtInt(rate(p)) : "",
        fmt(p.loop.p50, 2),
        fmt(p.loop.p99, 2),
        fmt(cpu(p) * p.perCall, 0),
        p.perCall > 1 ? fmt(cpu(p), 1) : "",
        fmt((p.clientCpuSeconds * 1e6) / p.windowCalls, 0),
      ]),
    ),
    "",
  ];
  const named = (name: string) => phases.find((p) => p.name.startsWith(name));
  const goal = (name: string, a: Phase | undefined, b: Phase | undefined, factor: number) =>
    a && b ? [[name, fmtInt(rate(a)), `≥ ${fmtInt(factor * rate(b))}`, rate(a) >= factor * rate(b) ? "met" : "missed"]] : [];
  lines.push(
    ...markdownTable(
      ["goal", "figure", "target", ""],
      [
        ...goal("gRPC GetSubject req/s ≥ REST GET /subjects/{id}", named("SubjectService/GetSubject"), named("GET /subjects"), 1),
        ...goal("gRPC Ping req/s ≥ 0.7 × REST /ping", named("HealthService/Ping"), named("GET /ping"), 0.7),
        ...goal("gRPC stream ingest events/s ≥ REST batch", named("UsageEventService/StreamUsageEvents"), named("POST /usage-events/batch"), 1),
      ],
    ),
    "",
    ...serverReportLines(stopNote, problems),
  );
  process.stdout.write(`${lines.join("\n")}\n`);
}

await runBenchmark(main);
