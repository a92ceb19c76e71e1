/**
 * gRPC through the lean path and through connect-node, and REST beside them, in one run: the
 * figure issue 35's rule needs (the lean gRPC path stays only while it costs the server at most
 * half the CPU per call that connect-node does, for the same call in the same run).
 *
 * Two servers on one throw-away MariaDB database, started as `npm start` starts one: the lean one
 * (LEAN_GRPC=on, the default: unary binary gRPC on the lean path; the ingest stream too before
 * 86294ea) and the connect-node one (LEAN_GRPC=off: every gRPC call through connect-node). REST goes to the lean
 * one. BENCH_BASELINE=<commit> runs that commit's two servers too (its tree from git archive, on a
 * database of its own), to show what a change did to each path in the same run. Per case,
 * BENCH_ROUNDS rounds of phases interleaved (lean, connect-node, [baseline's lean, connect-node,]
 * REST, lean, …), so a drift of the machine shows in every path alike:
 *   get     SubjectService/GetSubject  and  REST GET /subjects/{id}   (the same subject)
 *   ping    HealthService/Ping         and  REST GET /ping            (no key, no database)
 *   ingest  UsageEventService/StreamUsageEvents  and  REST POST /usage-events/batch
 *           (BENCH_EVENTS_PER_CALL events a call, default 500, every one new and accepted)
 *
 * Unary calls are sent by h2load (bench/h2load.ts): the request is the gRPC frame of the message
 * (protobuf-es toBinary), `-c BENCH_GRPC_CONNECTIONS -m BENCH_GRPC_STREAMS` (2 × 8: a real gRPC
 * client multiplexes), REST with `--h1` over as many connections as gRPC has streams in flight.
 * Each phase is a warm-up run (BENCH_WARMUP_CALLS) and a measured run (BENCH_CALLS); h2load counts
 * HTTP statuses only, so the server's billing_requests_total by code must have grown by exactly
 * the measured calls, all ok; and before the phases a few calls to each server through
 * @grpc/grpc-js check the answers themselves (the subject's id, the stream's counts).
 * The ingest stream is sent by @grpc/grpc-js (every event new: h2load would repeat one body),
 * BENCH_INGEST_STREAMS streams at once on one channel, BENCH_INGEST_CALLS calls each after one
 * warm-up call; REST batches the same way over lean HTTP/1.1 connections (lib.ts LeanHttpPool).
 *
 * Server CPU per call: the server process's user + system time (/proc/<pid>/stat) over the
 * measured run, divided by its calls (ingest: by its events). Load generator CPU: h2load's (bash
 * `times`), or this process's for the ingest phases.
 *
 * Run:   npm run bench:grpc        (needs h2load: apt-get install -y nghttp2-client; MariaDB/MySQL
 *                                   at 127.0.0.1:3306, user root)
 * Env:   BENCH_CALLS=20000 BENCH_WARMUP_CALLS=2000 BENCH_GRPC_CONNECTIONS=2 BENCH_GRPC_STREAMS=8
 *        BENCH_ROUNDS=2 BENCH_GRPC_CASES=get,ping,ingest BENCH_EVENTS_PER_CALL=500
 *        BENCH_INGEST_STREAMS=4 BENCH_INGEST_CALLS=8 BENCH_SEED_SUBJECTS=50
 *        BENCH_MYSQL_URL=mysql://root@127.0.0.1:3306 BENCH_SERVER_LOG_LEVEL=warn BENCH_BASELINE=<commit>
 *        BENCH_SERVER_NODE_ARGS="--cpu-prof"   more node options for the server children
 * Output: progress on stderr; the report (Markdown) on stdout.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import http from "node:http";
import os from "node:os";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { PingRequestSchema } from "../src/gen/billing/v1/health_service_pb.js";
import { GetSubjectRequestSchema, GetSubjectResponseSchema } from "../src/gen/billing/v1/subject_service_pb.js";
import { UsageEventInputSchema } from "../src/gen/billing/v1/usage_event_pb.js";
import { StreamUsageEventsResponseSchema } from "../src/gen/billing/v1/usage_event_service_pb.js";
import { type H2loadOptions, checkCodes, grpcFrame, h2load, h2loadCommand, requestCounts, requireH2load } from "./h2load.js";
import {
  LeanHttpPool,
  REPO_ROOT,
  type Server,
  type ThrowawayDatabase,
  checkoutTree,
  cpuCount,
  createThrowawayDatabase,
  envNumber,
  expectStatus200,
  fmt,
  fmtInt,
  freePort,
  machineLine,
  markdownTable,
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
  calls: Math.floor(envNumber("BENCH_CALLS", 20_000, 1)),
  warmupCalls: Math.floor(envNumber("BENCH_WARMUP_CALLS", 2_000, 1)),
  connections: Math.floor(envNumber("BENCH_GRPC_CONNECTIONS", 2, 1)),
  streams: Math.floor(envNumber("BENCH_GRPC_STREAMS", 8, 1)),
  rounds: Math.floor(envNumber("BENCH_ROUNDS", 2, 1)),
  eventsPerCall: Math.floor(envNumber("BENCH_EVENTS_PER_CALL", 500, 1)),
  ingestStreams: Math.floor(envNumber("BENCH_INGEST_STREAMS", 4, 1)),
  ingestCalls: Math.floor(envNumber("BENCH_INGEST_CALLS", 8, 1)),
  seedSubjects: Math.floor(envNumber("BENCH_SEED_SUBJECTS", 50, 1)),
  mysqlUrl: process.env.BENCH_MYSQL_URL || "mysql://root@127.0.0.1:3306",
  serverLogLevel: process.env.BENCH_SERVER_LOG_LEVEL || "warn",
  cases: new Set((process.env.BENCH_GRPC_CASES || "get,ping,ingest").split(",").map((c) => c.trim())),
  /** More node options for the server children, space-separated (e.g. --cpu-prof: a profile per server in its tree's root on stop). */
  serverNodeArgs: (process.env.BENCH_SERVER_NODE_ARGS || "").split(" ").filter(Boolean),
  /** A commit whose servers run beside this checkout's, on a database of their own (e.g. the tree before a change). */
  baseline: process.env.BENCH_BASELINE || undefined,
};

/** "lean", "connect-node", "REST", with " @<commit>" for the baseline tree's servers. */
type Path = string;

interface Phase {
  case: string;
  path: Path;
  round: number;
  calls: number;
  /** Events per call (ingest) or 1. */
  perCall: number;
  rps: number;
  p50: number;
  p99: number;
  cpuSeconds: number;
  clientCpuSeconds: number;
}

interface Target {
  path: Path;
  server: Server;
  client: grpc.Client;
}

/** A tree's two servers (LEAN_GRPC on and off) on a database of its own, seeded through its API. */
interface Tree {
  /** "" for this checkout, " @abc1234" for BENCH_BASELINE. */
  suffix: string;
  lean: Target;
  connect: Target;
  /** REST over HTTP/1.1 to the lean server: the setup and the batch phases. */
  rest: LeanHttpPool;
  subjects: string[];
}

// ---------------------------------------------------------------------------------------------
// Unary phases: h2load

async function unaryPhase(name: string, path: Path, round: number, server: Server, agent: http.Agent, o: Omit<H2loadOptions, "requests">): Promise<Phase> {
  const protocol = path === "REST" ? "rest" : "grpc";
  await h2load({ ...o, requests: settings.warmupCalls });
  const before = await requestCounts(server.port, agent);
  const cpuStart = await processCpuSeconds(server.pid);
  const r = await h2load({ ...o, requests: settings.calls });
  const cpuSeconds = ((await processCpuSeconds(server.pid)) ?? Number.NaN) - (cpuStart ?? Number.NaN);
  checkCodes(before, await requestCounts(server.port, agent), protocol, settings.calls);
  const phase: Phase = { case: name, path, round, calls: r.succeeded, perCall: 1, rps: r.rps, p50: r.p50, p99: r.p99, cpuSeconds, clientCpuSeconds: r.clientCpuSeconds };
  progress(`  ${name} ${path} round ${round}: ${fmtInt(r.rps)} calls/s, server CPU ${fmt((cpuSeconds * 1e6) / r.succeeded, 1)} µs per call`);
  return phase;
}

function grpcOptions(port: number, method: string, message: Uint8Array, key?: string): Omit<H2loadOptions, "requests"> {
  const headers: Record<string, string> = { "content-type": "application/grpc", te: "trailers" };
  if (key) headers["x-api-key"] = key;
  return { url: `http://127.0.0.1:${port}/${method}`, body: grpcFrame(message), headers, connections: settings.connections, streams: settings.streams };
}

function restOptions(port: number, path: string, key?: string): Omit<H2loadOptions, "requests"> {
  return { url: `http://127.0.0.1:${port}${path}`, headers: key ? { "x-api-key": key } : {}, connections: settings.connections * settings.streams, streams: 1, h1: true };
}

// ---------------------------------------------------------------------------------------------
// @grpc/grpc-js: the answers checked, and the ingest stream

const identity = (b: Buffer) => b;

function unaryCall(client: grpc.Client, method: string, request: Uint8Array, key?: string): Promise<Buffer> {
  const metadata = new grpc.Metadata();
  if (key) metadata.set("x-api-key", key);
  return new Promise((resolve, reject) => client.makeUnaryRequest(method, identity, identity, Buffer.from(request), metadata, (err, res) => (err || !res ? reject(err) : resolve(res))));
}

/** One client stream of already encoded messages; resolves with the answer's message. */
function streamCall(client: grpc.Client, method: string, messages: Buffer[], key: string): Promise<Buffer> {
  const metadata = new grpc.Metadata();
  metadata.set("x-api-key", key);
  return new Promise((resolve, reject) => {
    const call = client.makeClientStreamRequest(method, identity, identity, metadata, (err, res) => (err || !res ? reject(err) : resolve(res)));
    for (const m of messages) call.write(m);
    call.end();
  });
}

/** Checks each server's answers through grpc-js: GetSubject (the subject asked for), Ping. */
async function checkAnswers(targets: Target[], subjectId: string): Promise<void> {
  for (const t of targets) {
    for (let i = 0; i < 3; i++) {
      const res = fromBinary(
        GetSubjectResponseSchema,
        await unaryCall(t.client, "/billing.v1.SubjectService/GetSubject", toBinary(GetSubjectRequestSchema, create(GetSubjectRequestSchema, { subjectId })), API_KEY),
      );
      if (res.subject?.id !== subjectId) throw new Error(`${t.path}: GetSubject answered ${res.subject?.id} for ${subjectId}`);
      await unaryCall(t.client, "/billing.v1.HealthService/Ping", toBinary(PingRequestSchema, create(PingRequestSchema)));
    }
  }
  progress(`GetSubject and Ping answered as expected through @grpc/grpc-js by ${targets.map((t) => t.path).join(" and ")}`);
}

/** Fixed work: `ingestStreams` workers, one warm-up call each, then `ingestCalls` calls each. */
async function fixedWork(name: string, path: Path, round: number, server: Server, call: () => Promise<void>): Promise<Phase> {
  await Promise.all(Array.from({ length: settings.ingestStreams }, () => call()));
  const cpuStart = await processCpuSeconds(server.pid);
  const clientStart = process.cpuUsage();
  const start = process.hrtime.bigint();
  const latencies: number[] = [];
  await Promise.all(
    Array.from({ length: settings.ingestStreams }, async () => {
      for (let i = 0; i < settings.ingestCalls; i++) {
        const t = process.hrtime.bigint();
        await call();
        latencies.push(Number(process.hrtime.bigint() - t) / 1e6);
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const client = process.cpuUsage(clientStart);
  const cpuSeconds = ((await processCpuSeconds(server.pid)) ?? Number.NaN) - (cpuStart ?? Number.NaN);
  const sorted = Float64Array.from(latencies).sort();
  const n = settings.eventsPerCall;
  const phase: Phase = {
    case: name,
    path,
    round,
    calls: sorted.length,
    perCall: n,
    rps: sorted.length / seconds,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    cpuSeconds,
    clientCpuSeconds: (client.user + client.system) / 1e6,
  };
  progress(`  ${name} ${path} round ${round}: ${fmtInt(phase.rps * n)} events/s, server CPU ${fmt((cpuSeconds * 1e6) / (phase.calls * n), 1)} µs per event`);
  return phase;
}

// ---------------------------------------------------------------------------------------------
// Main

interface Run {
  id: string;
  db: ThrowawayDatabase[];
  servers: Server[];
}

/** Starts a tree's two servers on a new database and creates its subjects and pricing metric. */
async function startTree(run: Run, root: string | undefined, suffix: string): Promise<Tree> {
  const db = await createThrowawayDatabase(settings.mysqlUrl, "bench");
  run.db.push(db);
  const start = async (lean: "on" | "off"): Promise<Target> => {
    const env = serverEnvironment(process.env, {
      DATABASE_URL: db.url,
      PORT: String(await freePort()),
      BILLING_BOOTSTRAP_API_KEY: API_KEY,
      LOG_LEVEL: settings.serverLogLevel,
      LEAN_GRPC: lean,
      // No per-key limit: the benchmark sends from one key as fast as the server answers.
      RATE_LIMIT_API_RPS: "0",
      RATE_LIMIT_INGEST_RPS: "0",
    });
    const server = await startChildServer(env, settings.serverNodeArgs, root);
    run.servers.push(server);
    const path = `${lean === "on" ? "lean" : "connect-node"}${suffix}`;
    progress(`${path}: LEAN_GRPC=${lean} ready at http://127.0.0.1:${server.port} (pid ${server.pid}), database ${db.name}`);
    return { path, server, client: new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure()) };
  };
  const lean = await start("on");
  const connect = await start("off");
  const rest = new LeanHttpPool(lean.server.port, settings.ingestStreams + 1);
  const subjects: string[] = [];
  for (let i = 0; i < settings.seedSubjects; i++) {
    const r = await rest.request("POST", "/subjects", JSON.stringify({ name: `Bench ${i}`, external_id: `grpc-${run.id}-${i}` }), API_KEY);
    expectStatus200(r);
    subjects.push((JSON.parse(r.body) as { id: string }).id);
  }
  const metric = { event_name: "api_call", name: "API calls", unit: "call", dimensions: ["region"], aggregation: { aggregation_type: "sum", value_field: "n" } };
  expectStatus200(await rest.request("POST", "/pricing-metrics", JSON.stringify(metric), API_KEY));
  progress(`created ${subjects.length} subjects and a pricing metric`);
  await checkAnswers([lean, connect], subjects[0] as string);
  return { suffix, lean, connect, rest, subjects };
}

/** A unary case: per round, each tree's lean and connect-node servers, then REST to this checkout's lean one. */
async function unaryCase(
  trees: Tree[],
  agent: http.Agent,
  commands: Map<string, string>,
  name: string,
  method: string,
  message: (t: Tree) => Uint8Array,
  restPath: (t: Tree) => string,
  key?: string,
): Promise<Phase[]> {
  progress(`${name}: ${settings.rounds} rounds of ${settings.warmupCalls} warm-up + ${settings.calls} measured calls per phase`);
  const phases: Phase[] = [];
  for (let round = 1; round <= settings.rounds; round++) {
    for (const tree of trees) {
      for (const t of [tree.lean, tree.connect]) {
        const o = grpcOptions(t.server.port, method, message(tree), key);
        commands.set(`${name} gRPC`, h2loadCommand({ ...o, requests: settings.calls }));
        phases.push(await unaryPhase(name, t.path, round, t.server, agent, o));
      }
    }
    const tree = trees[0] as Tree;
    const o = restOptions(tree.lean.server.port, restPath(tree), key);
    commands.set(`${name} REST`, h2loadCommand({ ...o, requests: settings.calls }));
    phases.push(await unaryPhase(name, "REST", round, tree.lean.server, agent, o));
  }
  return phases;
}

/** The ingest case: per round, each tree's client streams through grpc-js, then REST batches to this checkout. */
async function ingestCase(trees: Tree[], runId: string): Promise<Phase[]> {
  const n = settings.eventsPerCall;
  progress(`ingest: ${settings.rounds} rounds; ${settings.ingestStreams} calls at once, one warm-up and ${settings.ingestCalls} measured each, ${n} events a call`);
  const now = Date.now();
  let seq = 0;
  const event = (subjects: string[]) => {
    const k = seq++;
    return {
      idempotencyKey: `${runId}-${k}`,
      subjectId: subjects[k % subjects.length] as string,
      eventName: "api_call",
      data: { n: "1", region: ["eu", "us", "ap"][k % 3] as string },
      at: new Date(now - (k % 3_600_000)),
    };
  };
  // Every call's body is made before its phase starts: the load generator's CPU in the measured
  // window is then the transport's (grpc-js framing, HTTP/1.1 writes), not encoding.
  const callsPerPhase = settings.ingestStreams * (1 + settings.ingestCalls);
  const streamBodies = (tree: Tree) =>
    Array.from({ length: callsPerPhase }, () =>
      Array.from({ length: n }, () => {
        const e = event(tree.subjects);
        return Buffer.from(toBinary(UsageEventInputSchema, create(UsageEventInputSchema, { ...e, timestamp: timestampFromDate(e.at) })));
      }),
    );
  const batchBodies = (tree: Tree) =>
    Array.from({ length: callsPerPhase }, () => {
      const events = Array.from({ length: n }, () => {
        const e = event(tree.subjects);
        return { idempotency_key: e.idempotencyKey, subject_id: e.subjectId, event_name: e.eventName, data: e.data, timestamp: e.at.toISOString() };
      });
      return JSON.stringify({ events });
    });
  const streamOnce = (t: Target, bodies: Buffer[][]) => async () => {
    const res = fromBinary(StreamUsageEventsResponseSchema, await streamCall(t.client, "/billing.v1.UsageEventService/StreamUsageEvents", bodies.pop() as Buffer[], API_KEY));
    if (res.accepted !== n) throw new Error(`${t.path}: ${res.accepted} of ${n} events accepted (${res.duplicate} duplicate, ${res.rejected} rejected)`);
  };
  const batchOnce = (rest: LeanHttpPool, bodies: string[]) => async () => {
    const r = await rest.request("POST", "/usage-events/batch", bodies.pop() as string, API_KEY);
    expectStatus200(r);
    const accepted = (JSON.parse(r.body) as { accepted: number }).accepted;
    if (accepted !== n) throw new Error(`REST: ${accepted} of ${n} events accepted`);
  };
  const phases: Phase[] = [];
  for (let round = 1; round <= settings.rounds; round++) {
    for (const tree of trees) for (const t of [tree.lean, tree.connect]) phases.push(await fixedWork("StreamUsageEvents", t.path, round, t.server, streamOnce(t, streamBodies(tree))));
    const tree = trees[0] as Tree;
    phases.push(await fixedWork("StreamUsageEvents", "REST", round, tree.lean.server, batchOnce(tree.rest, batchBodies(tree))));
  }
  return phases;
}

async function main(): Promise<number> {
  const h2loadVersion = requireH2load();
  const loadBefore = loadAverage();
  const baseline = settings.baseline ? checkoutTree(settings.baseline) : undefined;
  const run: Run = { id: randomBytes(4).toString("hex"), db: [], servers: [] };
  // One cleanup, however many ask for it (an interrupt, and main's own end when its calls fail).
  let cleaned: Promise<void> | undefined;
  const cleanup = () =>
    (cleaned ??= (async () => {
      for (const s of run.servers.splice(0)) await s.stop();
      for (const db of run.db.splice(0)) await db.drop();
    })());
  process.once("SIGINT", () => {
    progress("interrupted: stopping the servers and dropping the databases");
    cleanup().finally(() => process.exit(130));
  });
  try {
    progress(`${h2loadVersion}; load average ${loadBefore}${baseline ? `; baseline ${baseline.commit} in ${baseline.root}` : ""}`);
    const trees = [await startTree(run, undefined, "")];
    if (baseline) trees.push(await startTree(run, baseline.root, ` @${baseline.commit.slice(0, 7)}`));
    const agent = new http.Agent({ keepAlive: true });
    const commands = new Map<string, string>();
    const phases: Phase[] = [];
    const subject = (t: Tree) => t.subjects[0] as string;
    if (settings.cases.has("get"))
      phases.push(
        ...(await unaryCase(
          trees,
          agent,
          commands,
          "GetSubject",
          "billing.v1.SubjectService/GetSubject",
          (t) => toBinary(GetSubjectRequestSchema, create(GetSubjectRequestSchema, { subjectId: subject(t) })),
          (t) => `/subjects/${subject(t)}`,
          API_KEY,
        )),
      );
    const ping = toBinary(PingRequestSchema, create(PingRequestSchema));
    if (settings.cases.has("ping"))
      phases.push(
        ...(await unaryCase(
          trees,
          agent,
          commands,
          "Ping",
          "billing.v1.HealthService/Ping",
          () => ping,
          () => "/ping",
        )),
      );
    if (settings.cases.has("ingest")) phases.push(...(await ingestCase(trees, run.id)));

    for (const t of trees) {
      t.lean.client.close();
      t.connect.client.close();
      t.rest.close();
    }
    agent.destroy();
    const notes: string[] = [];
    const problems: string[] = [];
    for (const t of trees)
      for (const target of [t.lean, t.connect]) {
        notes.push(`${target.path} ${await target.server.stop()}`);
        problems.push(...target.server.problems);
      }
    run.servers.splice(0);
    const dbVersion = (run.db[0] as ThrowawayDatabase).version;
    report(phases, { dbVersion, h2loadVersion, commands, loadBefore, loadAfter: loadAverage(), stopNote: notes.join("; "), problems, baseline: trees[1]?.suffix });
    return 0;
  } finally {
    await cleanup();
  }
}

/** HEAD's short hash, with "+ uncommitted changes" when the tree differs from it. */
function treeState(): string {
  try {
    const head = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: REPO_ROOT, encoding: "utf8" }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain", "--", "src"], { cwd: REPO_ROOT, encoding: "utf8" }).trim() !== "";
    return dirty ? `${head} + uncommitted changes in src/` : head;
  } catch {
    return "an unknown commit (no git)";
  }
}

const loadAverage = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");

// ---------------------------------------------------------------------------------------------
// Report

interface RunNotes {
  dbVersion: string;
  h2loadVersion: string;
  commands: Map<string, string>;
  loadBefore: string;
  loadAfter: string;
  stopNote: string;
  problems: string[];
  /** " @abc1234" when a baseline tree ran too. */
  baseline: string | undefined;
}

/** Server CPU µs per call (per event for ingest) over every round of one case and path. */
function cpuPer(phases: Phase[], name: string, path: Path): number {
  const ps = phases.filter((p) => p.case === name && p.path === path);
  const units = ps.reduce((a, p) => a + p.calls * p.perCall, 0);
  return (ps.reduce((a, p) => a + p.cpuSeconds, 0) * 1e6) / units;
}

/** Calls (or events) per second, the mean over the rounds of one case and path. */
function ratePer(phases: Phase[], name: string, path: Path): number {
  const ps = phases.filter((p) => p.case === name && p.path === path);
  return ps.reduce((a, p) => a + p.rps * p.perCall, 0) / ps.length;
}

const unitOf = (name: string) => (name === "StreamUsageEvents" ? "event" : "call");

/** Issue 35's rule: connect-node's server CPU ÷ the lean path's, for each case, ≥ 2. */
function ruleLines(phases: Phase[], cases: string[], suffix: string): string[] {
  const rows = cases.map((name) => {
    const lean = cpuPer(phases, name, `lean${suffix}`);
    const connect = cpuPer(phases, name, `connect-node${suffix}`);
    const unit = unitOf(name);
    return [`${name}${suffix}`, `${fmt(lean, 2)} µs/${unit}`, `${fmt(connect, 2)} µs/${unit}`, `${fmt(connect / lean, 2)}×`, "≥ 2×", connect / lean >= 2 ? "met" : "missed"];
  });
  const note = cases.includes("StreamUsageEvents")
    ? ["A tree whose lean path serves unary calls only (86294ea on) sends the stream through connect-node on both servers: its ratio is then about 1 by construction.", ""]
    : [];
  return [...markdownTable(["server CPU, all rounds", "lean", "connect-node", "connect-node ÷ lean", "rule", ""], rows), "", ...(suffix === "" ? note : [])];
}

/** This checkout against the baseline tree, path by path. */
function baselineLines(phases: Phase[], cases: string[], suffix: string): string[] {
  const rows: string[][] = [];
  for (const name of cases)
    for (const path of ["lean", "connect-node"]) {
      const now = cpuPer(phases, name, path);
      const before = cpuPer(phases, name, `${path}${suffix}`);
      rows.push([name, path, fmt(before, 2), fmt(now, 2), `${now >= before ? "+" : ""}${fmt(now - before, 2)}`, `${fmt(now / before, 2)}×`]);
    }
  return [...markdownTable(["server CPU µs per call or event", "path", `baseline${suffix}`, "this checkout", "difference", "ratio"], rows), ""];
}

function report(phases: Phase[], notes: RunNotes): void {
  const ingest = `${settings.eventsPerCall} events a call, ${settings.ingestStreams} calls at once`;
  const lines = [
    "## gRPC: the lean path, connect-node and REST, one run",
    "",
    machineLine(notes.dbVersion),
    `This checkout at ${treeState()}; ${notes.h2loadVersion}; load average ${notes.loadBefore} before, ${notes.loadAfter} after (the load generators, the servers and MariaDB share these ${cpuCount()} CPUs).`,
    `Unary: ${settings.warmupCalls} warm-up + ${settings.calls} measured calls per phase, gRPC -c ${settings.connections} -m ${settings.streams}, REST --h1 -c ${settings.connections * settings.streams}; ingest: ${ingest}, one warm-up + ${settings.ingestCalls} each, gRPC by @grpc/grpc-js, REST batches over HTTP/1.1. ${settings.rounds} rounds, interleaved.`,
    "",
    ...[...notes.commands].map(([k, v]) => `    ${k}: ${v}`),
    "",
    ...markdownTable(
      ["case", "path", "round", "calls/s", "events/s", "p50 ms", "p99 ms", "server CPU µs per call", "per event", "load generator CPU µs per call"],
      phases.map((p) => [
        p.case,
        p.path,
        String(p.round),
        fmtInt(p.rps),
        p.perCall > 1 ? fmtInt(p.rps * p.perCall) : "",
        fmt(p.p50, 2),
        fmt(p.p99, 2),
        fmt((p.cpuSeconds * 1e6) / p.calls, 1),
        p.perCall > 1 ? fmt((p.cpuSeconds * 1e6) / (p.calls * p.perCall), 2) : "",
        fmt((p.clientCpuSeconds * 1e6) / p.calls, 1),
      ]),
    ),
    "",
  ];
  const cases = [...new Set(phases.map((p) => p.case))];
  lines.push(...ruleLines(phases, cases, ""));
  if (notes.baseline) lines.push(...ruleLines(phases, cases, notes.baseline), ...baselineLines(phases, cases, notes.baseline));
  const goal = (label: string, name: string, factor: number) => {
    if (!cases.includes(name)) return [];
    const a = ratePer(phases, name, "lean");
    const b = ratePer(phases, name, "REST");
    return [[label, fmtInt(a), `≥ ${fmtInt(factor * b)}`, a >= factor * b ? "met" : "missed"]];
  };
  lines.push(
    ...markdownTable(
      ["goal (lean gRPC against REST, mean of rounds)", "figure", "target", ""],
      [
        ...goal("GetSubject calls/s ≥ REST GET /subjects/{id}", "GetSubject", 1),
        ...goal("Ping calls/s ≥ 0.7 × REST /ping", "Ping", 0.7),
        ...goal("stream ingest events/s ≥ REST batch", "StreamUsageEvents", 1),
      ],
    ),
    "",
    ...serverReportLines(notes.stopNote, notes.problems),
  );
  process.stdout.write(`${lines.join("\n")}\n`);
}

await runBenchmark(main);
