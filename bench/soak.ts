/**
 * Soak benchmark (issue 12): the real server, started as `npm start` starts it, on a fresh
 * MariaDB database, driven for a bounded time on loopback through four hostile phases while a
 * probe measures `GET /ping` and `GET /subjects/{id}` every 50 ms throughout.
 *
 * Phases, one after another (each bounded; the probe runs in all of them):
 *   0. baseline: the probe alone;
 *   1. over-capacity batch ingest: BENCH_INGEST_CONCURRENCY clients (32) each posting batches of
 *      1,000 events whose `pad` value is 1,000 characters (~1.1 MB a body) back to back: more body
 *      bytes than MAX_REQUEST_BYTES_IN_FLIGHT admits. A refused batch is sent again, unchanged
 *      (same idempotency keys), after its Retry-After, as a well-behaved client would; a failed
 *      one (no answer) likewise after 1 s;
 *   2. oversized unauthenticated bodies: 16 clients each sending a 6 MiB body (over every
 *      method's bound) to `POST /usage-events/batch`, half with no key and half with an unknown
 *      one, over a new connection each, written as fast as the socket takes it until the answer;
 *   3. 2,000 idle and slow-header connections: half send nothing, half send a request line and
 *      then one header line every 3 s; every one the server closes is opened again, so that 2,000
 *      are open (or opening) all through the phase;
 *   4. one gRPC `StreamUsageEvents` client stream of 300,000 events for an existing subject.
 * The server child's VmRSS is sampled every 250 ms; its exit at any time is a crash. At the end
 * the database is queried directly: every acknowledged event (200, status accepted or duplicate)
 * must be stored exactly once, and nothing of a batch that was only ever refused may be stored.
 *
 * Run:   npm run bench:soak                  (needs MariaDB/MySQL at 127.0.0.1:3306, user root)
 * Env:   BENCH_PHASE_SECONDS=25              length of phases 1–3 (the stream phase lasts until the stream ends)
 *        BENCH_BASELINE_SECONDS=5            length of phase 0
 *        BENCH_INGEST_CONCURRENCY=32         batch clients in phase 1
 *        BENCH_BATCH_SIZE=1000               events per batch (≤ 1000)
 *        BENCH_VALUE_CHARS=1000              characters of each event's `pad` value (≤ 1000)
 *        BENCH_OVERSIZED_CONCURRENCY=16      clients in phase 2
 *        BENCH_OVERSIZED_BYTES=6291456       declared and sent body length in phase 2
 *        BENCH_SLOW_CONNECTIONS=2000         connections held in phase 3 (half idle, half slow headers)
 *        BENCH_SLOW_HEADER_INTERVAL_MS=3000  pause between header lines in phase 3
 *        BENCH_STREAM_EVENTS=300000          events in the phase-4 stream
 *        BENCH_STREAM_TIMEOUT_SECONDS=300    the stream's deadline
 *        BENCH_PROBE_INTERVAL_MS=50          probe period (one /ping and one GET /subjects/{id} per tick)
 *        BENCH_SERVER_ENV="K=V K=V"          extra server environment (e.g. HTTP_HEADERS_TIMEOUT_MS=5000); none by default
 *        BENCH_MYSQL_URL=mysql://root@127.0.0.1:3306
 *        BENCH_SERVER_LOG_LEVEL=warn
 *        BENCH_SERVER_NODE_ARGS=…            node options for the server child only, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"
 * Output: progress on stderr; the report (Markdown) on stdout. The exit status is 0 whether or not
 * the goals are met (this is a benchmark); 1 only when the harness itself fails.
 */
import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import { ConnectError, createClient } from "@connectrpc/connect";
import { Http2SessionManager, createGrpcTransport } from "@connectrpc/connect-node";
import { UsageEventService } from "../src/gen/billing/v1/usage_event_service_pb.js";
import {
  RssSampler,
  type Server,
  type ThrowawayDatabase,
  allProcessCpu,
  createThrowawayDatabase,
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
  runBenchmark,
  serverEnvironment,
  serverReportLines,
  startChildServer,
  topProcesses,
} from "./lib.js";

// ---------------------------------------------------------------------------------------------
// Settings

const API_KEY = "sk_test_benchsoak00000000000000";
const BAD_KEY = "sk_test_nosuchkey0000000000000";
const EVENT_NAME = "soak_event";
const MiB = 1024 * 1024;

const settings = {
  phaseSeconds: envNumber("BENCH_PHASE_SECONDS", 25, 1),
  baselineSeconds: envNumber("BENCH_BASELINE_SECONDS", 5, 0),
  ingestConcurrency: Math.floor(envNumber("BENCH_INGEST_CONCURRENCY", 32, 1)),
  batchSize: Math.floor(envNumber("BENCH_BATCH_SIZE", 1000, 1)),
  valueChars: Math.floor(envNumber("BENCH_VALUE_CHARS", 1000, 1)),
  oversizedConcurrency: Math.floor(envNumber("BENCH_OVERSIZED_CONCURRENCY", 16, 1)),
  oversizedBytes: Math.floor(envNumber("BENCH_OVERSIZED_BYTES", 6 * MiB, 1)),
  slowConnections: Math.floor(envNumber("BENCH_SLOW_CONNECTIONS", 2000, 2)),
  slowHeaderIntervalMs: envNumber("BENCH_SLOW_HEADER_INTERVAL_MS", 3000, 10),
  streamEvents: Math.floor(envNumber("BENCH_STREAM_EVENTS", 300_000, 1)),
  streamTimeoutS: envNumber("BENCH_STREAM_TIMEOUT_SECONDS", 300, 1),
  probeIntervalMs: envNumber("BENCH_PROBE_INTERVAL_MS", 50, 1),
  rssIntervalMs: 250,
  mysqlUrl: process.env.BENCH_MYSQL_URL || "mysql://root@127.0.0.1:3306",
  serverLogLevel: process.env.BENCH_SERVER_LOG_LEVEL || "warn",
  serverNodeArgs: (process.env.BENCH_SERVER_NODE_ARGS || "").split(" ").filter(Boolean),
  serverExtraEnv: Object.fromEntries(
    (process.env.BENCH_SERVER_ENV || "")
      .split(" ")
      .filter(Boolean)
      .map((kv) => {
        const i = kv.indexOf("=");
        if (i < 1) throw new Error(`BENCH_SERVER_ENV entries must be K=V (got ${JSON.stringify(kv)})`);
        return [kv.slice(0, i), kv.slice(i + 1)];
      }),
  ) as Record<string, string>,
};
if (settings.batchSize > 1000) throw new Error("BENCH_BATCH_SIZE must be at most 1000 (the API's batch limit)");
if (settings.valueChars > 1000) throw new Error("BENCH_VALUE_CHARS must be at most 1000 (the API's value limit)");

const GOALS = { rssMb: 300, probeP99Ms: 250 };
const runTag = randomBytes(4).toString("hex");
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// Per-phase records

/** Answers that were not a success to a request that carried a valid key, by "status retry-after". */
class Refusals {
  readonly byKind = new Map<string, number>();
  total = 0;
  /** Refusals that were not a 429/503 with Retry-After. */
  bad = 0;
  add(status: number | string, retryAfter: string | undefined): void {
    this.total++;
    const ok = (status === 429 || status === 503 || status === "unavailable" || status === "resource_exhausted") && retryAfter !== undefined;
    if (!ok) this.bad++;
    const k = `${status} ${retryAfter !== undefined ? `Retry-After: ${retryAfter}` : "no Retry-After"}`;
    this.byKind.set(k, (this.byKind.get(k) ?? 0) + 1);
  }
  merge(o: Refusals): void {
    this.total += o.total;
    this.bad += o.bad;
    for (const [k, n] of o.byKind) this.byKind.set(k, (this.byKind.get(k) ?? 0) + n);
  }
  text(): string {
    if (this.total === 0) return "0";
    return [...this.byKind].map(([k, n]) => `${fmtInt(n)}× ${k}`).join("; ");
  }
}

interface PhaseRecord {
  label: string;
  wallS: number;
  ping: number[];
  subject: number[];
  /** Probe requests that got no answer (timeout or connection error), by reason. */
  probeErrors: Map<string, number>;
  refusals: Refusals;
  rssMaxMb: number;
  crashed: string | undefined;
  serverCpuS?: number;
  dbCpuS?: number;
  benchCpuS: number;
  otherCpuS?: number;
  otherTop: string[];
  /** What the phase's own load saw, one line each. */
  notes: string[];
}

const addCount = (m: Map<string, number>, k: string, n = 1) => m.set(k, (m.get(k) ?? 0) + n);

// ---------------------------------------------------------------------------------------------
// HTTP/1.1 with the response headers (the lib's lean client keeps status and body only)

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

function httpCall(agent: http.Agent, port: number, method: string, path: string, body: string | undefined, apiKey: string | undefined, timeoutMs: number): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: http.OutgoingHttpHeaders = { accept: "application/json" };
    if (apiKey) headers["x-api-key"] = apiKey;
    if (body !== undefined) {
      headers["content-type"] = "application/json";
      headers["content-length"] = Buffer.byteLength(body);
    }
    let answered = false;
    const req = http.request({ agent, host: "127.0.0.1", port, method, path, headers, timeout: timeoutMs }, (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`timed out after ${timeoutMs} ms`)));
    // An error after the answer (the server closing a refused upload's connection) is not a failure.
    req.on("error", (err) => {
      if (!answered) reject(err);
    });
    req.end(body);
  });
}

// ---------------------------------------------------------------------------------------------
// The probe: one /ping and one GET /subjects/{id} per tick, open loop (a slow answer does not
// delay the next tick: each request has its own connection from a keep-alive pool), latency from
// the tick.

class Probe {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });
  private timer?: NodeJS.Timeout;
  private inFlight = new Set<Promise<void>>();
  ping: number[] = [];
  subject: number[] = [];
  errors = new Map<string, number>();
  refusals = new Refusals();

  constructor(
    private readonly port: number,
    private readonly subjectId: string,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.tick(), settings.probeIntervalMs);
  }

  private tick(): void {
    const one = (path: string, key: string | undefined, into: () => number[]) => {
      const t0 = performance.now();
      const p = httpCall(this.agent, this.port, "GET", path, undefined, key, 30_000)
        .then((a) => {
          into().push(performance.now() - t0);
          if (a.status !== 200) this.refusals.add(a.status, a.headers["retry-after"] as string | undefined);
        })
        .catch((err) => {
          into().push(performance.now() - t0);
          addCount(this.errors, reasonOf(err));
        })
        .finally(() => this.inFlight.delete(p));
      this.inFlight.add(p);
    };
    one("/ping", undefined, () => this.ping);
    one(`/subjects/${this.subjectId}`, API_KEY, () => this.subject);
  }

  /** Hands over what was measured since the last take (requests still in flight land in the next). */
  take(): { ping: number[]; subject: number[]; errors: Map<string, number>; refusals: Refusals } {
    const out = { ping: this.ping, subject: this.subject, errors: this.errors, refusals: this.refusals };
    this.ping = [];
    this.subject = [];
    this.errors = new Map();
    this.refusals = new Refusals();
    return out;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await Promise.allSettled([...this.inFlight]);
    this.agent.destroy();
  }
}

// ---------------------------------------------------------------------------------------------
// Phase 1: over-capacity batch ingest

interface BatchRecord {
  id: string;
  /** Events acknowledged (accepted + duplicate) by the 200 answer, if there was one. */
  acked: number;
  rejected: number;
  state: "acked" | "refused" | "unknown";
  /** Whether any attempt ended without an answer (its outcome unknown: stored whole or not at all). */
  anyUnknown: boolean;
  attempts: number;
}

async function ingestPhase(port: number, subjectIds: string[], deadline: number, gone: () => boolean, refusals: Refusals, batches: BatchRecord[], notes: string[]): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: settings.ingestConcurrency });
  const pad = "p".repeat(settings.valueChars);
  let batchSeq = 0;
  let accepted = 0;
  let duplicate = 0;
  let rejected = 0;
  let okRequests = 0;
  let failed = 0;
  const failReasons = new Map<string, number>();
  const okLatencies: number[] = [];
  const bodyOf = (id: string) => {
    const parts: string[] = [];
    for (let i = 0; i < settings.batchSize; i++) {
      parts.push(`{"idempotency_key":"${id}-${i}","subject_id":"${subjectIds[i % subjectIds.length]}","event_name":"${EVENT_NAME}","data":{"n":"1","pad":"${pad}"}}`);
    }
    return `{"events":[${parts.join(",")}]}`;
  };
  const worker = async () => {
    while (performance.now() < deadline && !gone()) {
      const rec: BatchRecord = { id: `b-${runTag}-${batchSeq++}`, acked: 0, rejected: 0, state: "refused", anyUnknown: false, attempts: 0 };
      batches.push(rec);
      const body = bodyOf(rec.id);
      // Send until acknowledged or the phase is over; the same body (same keys) every time.
      while (performance.now() < deadline && !gone()) {
        rec.attempts++;
        const t0 = performance.now();
        let a: Answer;
        try {
          a = await httpCall(agent, port, "POST", "/usage-events/batch", body, API_KEY, 60_000);
        } catch (err) {
          failed++;
          rec.anyUnknown = true;
          rec.state = "unknown";
          addCount(failReasons, reasonOf(err));
          await sleep(1000);
          continue;
        }
        if (a.status === 200) {
          okLatencies.push(performance.now() - t0);
          okRequests++;
          const r = JSON.parse(a.body) as { accepted: number; duplicate: number; rejected: number };
          accepted += r.accepted;
          duplicate += r.duplicate;
          rejected += r.rejected;
          rec.acked = r.accepted + r.duplicate;
          rec.rejected = r.rejected;
          rec.state = "acked";
          break;
        }
        const retryAfter = a.headers["retry-after"] as string | undefined;
        refusals.add(a.status, retryAfter);
        if (!rec.anyUnknown) rec.state = "refused";
        const wait = Number(retryAfter);
        await sleep(Number.isFinite(wait) && wait > 0 ? wait * 1000 : 1000);
      }
    }
  };
  await Promise.all(Array.from({ length: settings.ingestConcurrency }, worker));
  agent.destroy();
  const sorted = Float64Array.from(okLatencies).sort();
  notes.push(
    `${settings.ingestConcurrency} clients, batches of ${fmtInt(settings.batchSize)} events (~${fmt(Buffer.byteLength(bodyOf("b-x-0")) / MiB, 2)} MiB a body): ` +
      `${fmtInt(okRequests)} batches answered 200 (p50 ${fmt(percentile(sorted, 0.5), 0)} ms, p99 ${fmt(percentile(sorted, 0.99), 0)} ms), ` +
      `events accepted ${fmtInt(accepted)}, duplicate ${fmtInt(duplicate)}, rejected ${fmtInt(rejected)} ` +
      `(${fmt(accepted / ((performance.now() - (deadline - settings.phaseSeconds * 1000)) / 1000), 0)} accepted events/s); ` +
      `refusals ${fmtInt(refusals.total)}; no answer ${fmtInt(failed)}${failReasons.size ? ` (${[...failReasons].map(([k, n]) => `${n}× ${k}`).join("; ")})` : ""}; ` +
      `${fmtInt(batches.filter((b) => b.state !== "acked").length)} batches not acknowledged when the phase ended.`,
  );
}

// ---------------------------------------------------------------------------------------------
// Phase 2: oversized unauthenticated bodies over raw sockets

interface UploadOutcome {
  status: number | undefined;
  retryAfter: boolean;
  answerMs: number | undefined;
  bytesSent: number;
  /** The server closed the connection (within 5 s of the answer, or before any). */
  serverClosed: boolean;
  error?: string;
}

function oversizedUpload(port: number, key: string | undefined): Promise<UploadOutcome> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const socket = net.connect({ port, host: "127.0.0.1" });
    const chunk = Buffer.alloc(64 * 1024, 0x78);
    let head = Buffer.alloc(0);
    let status: number | undefined;
    let retryAfter = false;
    let answerMs: number | undefined;
    let sent = 0;
    let error: string | undefined;
    let done = false;
    let giveUp: NodeJS.Timeout | undefined;
    const finish = (serverClosed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(giveUp);
      socket.destroy();
      resolve({ status, retryAfter, answerMs, bytesSent: sent, serverClosed, error });
    };
    socket.on("data", (c: Buffer) => {
      if (status !== undefined) return;
      head = Buffer.concat([head, c]);
      const end = head.indexOf("\r\n\r\n");
      if (end === -1) return;
      const text = head.subarray(0, end).toString("latin1");
      status = Number(text.slice(9, 12));
      retryAfter = /\r\nretry-after:/i.test(text);
      answerMs = performance.now() - t0;
      // Answered: stop sending, and see whether the server closes the connection.
      clearTimeout(giveUp);
      giveUp = setTimeout(() => finish(false), 5000);
    });
    socket.on("error", (err) => {
      error ??= (err as NodeJS.ErrnoException).code ?? err.message;
    });
    socket.on("close", () => finish(true));
    giveUp = setTimeout(() => {
      error ??= "no answer within 60 s";
      finish(false);
    }, 60_000);
    socket.on("connect", async () => {
      let h = `POST /usage-events/batch HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\ncontent-length: ${settings.oversizedBytes}\r\n`;
      if (key) h += `x-api-key: ${key}\r\n`;
      socket.write(`${h}\r\n`);
      while (sent < settings.oversizedBytes && status === undefined && !done) {
        const n = Math.min(chunk.length, settings.oversizedBytes - sent);
        const more = socket.write(n === chunk.length ? chunk : chunk.subarray(0, n));
        sent += n;
        if (!more)
          await new Promise<void>((r) => {
            const go = () => {
              socket.off("drain", go);
              socket.off("close", go);
              r();
            };
            socket.once("drain", go);
            socket.once("close", go);
          });
      }
    });
  });
}

async function oversizedPhase(port: number, deadline: number, gone: () => boolean, notes: string[]): Promise<void> {
  const byStatus = new Map<string, number>();
  const answerMs: number[] = [];
  let uploads = 0;
  let fullySent = 0;
  let serverClosed = 0;
  let bytes = 0;
  const worker = async (w: number) => {
    const key = w % 2 === 0 ? undefined : BAD_KEY;
    while (performance.now() < deadline && !gone()) {
      const o = await oversizedUpload(port, key);
      uploads++;
      bytes += o.bytesSent;
      if (o.bytesSent >= settings.oversizedBytes) fullySent++;
      if (o.serverClosed) serverClosed++;
      if (o.answerMs !== undefined) answerMs.push(o.answerMs);
      addCount(byStatus, `${key ? "unknown key" : "no key"} → ${o.status ?? "no answer"}${o.retryAfter ? " (Retry-After)" : ""}${o.error ? ` [${o.error}]` : ""}`);
    }
  };
  await Promise.all(Array.from({ length: settings.oversizedConcurrency }, (_, w) => worker(w)));
  const sorted = Float64Array.from(answerMs).sort();
  notes.push(
    `${settings.oversizedConcurrency} clients, ${fmtInt(uploads)} uploads declaring ${fmt(settings.oversizedBytes / MiB, 1)} MiB each: ` +
      `${[...byStatus].map(([k, n]) => `${fmtInt(n)}× ${k}`).join("; ")}; answer after p50 ${fmt(percentile(sorted, 0.5), 1)} ms, max ${fmt(sorted[sorted.length - 1] ?? Number.NaN, 1)} ms; ` +
      `${fmtInt(fullySent)} bodies sent whole before the answer, ${fmt(bytes / uploads / MiB, 2)} MiB sent per upload on average; ` +
      `the server closed ${fmtInt(serverClosed)} of ${fmtInt(uploads)} connections after answering.`,
  );
}

// ---------------------------------------------------------------------------------------------
// Phase 3: idle and slow-header connections

async function slowConnectionsPhase(port: number, deadline: number, gone: () => boolean, notes: string[]): Promise<void> {
  const open = new Set<net.Socket>();
  const lifetimes = { idle: [] as number[], slow: [] as number[] };
  let opened = 0;
  let got408 = 0;
  let gotOther = 0;
  let connectErrors = 0;
  let closedByServer = 0;
  let maxOpen = 0;
  const errors = new Map<string, number>();
  const stopping = () => performance.now() >= deadline || gone();

  const openOne = (kind: "idle" | "slow") => {
    const t0 = performance.now();
    const socket = net.connect({ port, host: "127.0.0.1" });
    opened++;
    open.add(socket);
    maxOpen = Math.max(maxOpen, open.size);
    let timer: NodeJS.Timeout | undefined;
    let connected = false;
    let line = 0;
    socket.on("connect", () => {
      connected = true;
      if (kind === "slow") {
        socket.write(`GET /ping HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n`);
        timer = setInterval(() => socket.write(`x-slow-${line++}: ${"v".repeat(20)}\r\n`), settings.slowHeaderIntervalMs);
      }
    });
    socket.on("data", (c: Buffer) => {
      const s = c.toString("latin1", 0, 12);
      if (s.startsWith("HTTP/1.1 408")) got408++;
      else gotOther++;
    });
    socket.on("error", (err) => addCount(errors, (err as NodeJS.ErrnoException).code ?? err.message));
    socket.on("close", () => {
      clearInterval(timer);
      open.delete(socket);
      if (stopping()) return; // we closed it, or it closed as we stopped
      if (connected) {
        closedByServer++;
        lifetimes[kind].push(performance.now() - t0);
      } else connectErrors++;
      // Keep the count up: open another of the same kind (after a moment, if connecting failed).
      if (connected) openOne(kind);
      else setTimeout(() => !stopping() && openOne(kind), 200);
    });
  };

  // Open them in waves, so as not to overflow the listen backlog.
  for (let i = 0; i < settings.slowConnections && !stopping(); i += 200) {
    for (let j = i; j < Math.min(settings.slowConnections, i + 200); j++) openOne(j % 2 === 0 ? "idle" : "slow");
    await sleep(100);
  }
  const openAtFull = open.size;
  while (!stopping()) await sleep(100);
  const stillOpen = open.size;
  for (const s of open) s.destroy();
  const sIdle = Float64Array.from(lifetimes.idle).sort();
  const sSlow = Float64Array.from(lifetimes.slow).sort();
  notes.push(
    `${fmtInt(settings.slowConnections)} connections held (${fmtInt(openAtFull)} open once all were started; at most ${fmtInt(maxOpen)} at once), each one the server closed replaced at once: ` +
      `${fmtInt(opened)} opened in all, ${fmtInt(closedByServer)} closed by the server ` +
      `(idle ${fmtInt(sIdle.length)}, after p50 ${fmt(percentile(sIdle, 0.5) / 1000, 1)} s, max ${fmt((sIdle[sIdle.length - 1] ?? Number.NaN) / 1000, 1)} s; ` +
      `slow headers ${fmtInt(sSlow.length)}, after p50 ${fmt(percentile(sSlow, 0.5) / 1000, 1)} s, max ${fmt((sSlow[sSlow.length - 1] ?? Number.NaN) / 1000, 1)} s), ` +
      `${fmtInt(got408)} answered 408 first, ${fmtInt(gotOther)} other answers; ${fmtInt(connectErrors)} failed to connect; ${fmtInt(stillOpen)} still open at the end` +
      `${errors.size ? ` (socket errors: ${[...errors].map(([k, n]) => `${n}× ${k}`).join(", ")})` : ""}.`,
  );
}

// ---------------------------------------------------------------------------------------------
// Phase 4: the gRPC client stream

interface StreamResult {
  acked: number;
  note: string;
}

async function streamPhase(port: number, subjectId: string, refusals: Refusals, notes: string[]): Promise<StreamResult> {
  const baseUrl = `http://127.0.0.1:${port}`;
  const sessionManager = new Http2SessionManager(baseUrl);
  const transport = createGrpcTransport({ baseUrl, sessionManager, defaultTimeoutMs: settings.streamTimeoutS * 1000 });
  const client = createClient(UsageEventService, transport);
  const n = settings.streamEvents;
  let sent = 0;
  async function* events() {
    for (let i = 0; i < n; i++) {
      sent++;
      yield { idempotencyKey: `st-${runTag}-${i}`, subjectId, eventName: EVENT_NAME, data: { n: "1" } };
    }
  }
  const t0 = performance.now();
  let acked = 0;
  let note: string;
  try {
    const res = await client.streamUsageEvents(events(), { headers: { "x-api-key": API_KEY } });
    const s = (performance.now() - t0) / 1000;
    acked = Number(res.accepted + res.duplicate);
    const first = res.rejections[0];
    note =
      `${fmtInt(n)} events in one stream, answered after ${fmt(s, 1)} s (${fmt(n / s, 0)} events/s): received ${res.received}, accepted ${res.accepted}, ` +
      `duplicate ${res.duplicate}, rejected ${res.rejected}${first ? ` (first #${first.index}: ${first.error?.code} ${first.error?.message})` : ""}.`;
  } catch (err) {
    const s = (performance.now() - t0) / 1000;
    if (err instanceof ConnectError) refusals.add(err.code === 14 ? "unavailable" : `gRPC code ${err.code}`, err.metadata.get("retry-after") ?? undefined);
    note = `the stream failed after ${fmt(s, 1)} s, ${fmtInt(sent)} events sent: ${reasonOf(err)} (its outcome per event is unknown: the check below only counts what is stored).`;
  }
  sessionManager.abort();
  notes.push(note);
  return { acked, note };
}

// ---------------------------------------------------------------------------------------------
// Main

async function mariadbPid(db: ThrowawayDatabase): Promise<number | undefined> {
  try {
    const [rows] = await db.admin.query("SELECT @@pid_file AS f");
    return Number((await readFile(String((rows as { f: string }[])[0]?.f), "utf8")).trim()) || undefined;
  } catch {
    return undefined;
  }
}

async function main(): Promise<number> {
  const db = await createThrowawayDatabase(settings.mysqlUrl, "bench_soak");
  progress(`created database ${db.name} on ${db.version}`);
  let server: Server | undefined;
  let rss: RssSampler | undefined;
  let probe: Probe | undefined;
  let cleaned: Promise<void> | undefined;
  const cleanup = () =>
    (cleaned ??= (async () => {
      rss?.stop();
      await probe?.stop().catch(() => undefined);
      if (server) {
        const s = server;
        server = undefined;
        stopNotes.push(await s.stop().catch((err) => `stopping failed: ${reasonOf(err)}`));
      }
      await db.drop().catch((err) => progress(`dropping ${db.name} failed: ${reasonOf(err)}`));
    })());
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      progress(`${signal}: stopping the server and dropping the database`);
      void cleanup().finally(() => process.exit(130));
    });
  }

  const out: string[] = [];
  const phases: PhaseRecord[] = [];
  const crashes: string[] = [];
  const stopNotes: string[] = [];
  const earlierProblems: string[] = [];
  let rssMaxMb = 0;
  let rssSamples = 0;
  try {
    // How busy the machine is without us.
    const m0 = await machineBusySeconds();
    const p0 = await allProcessCpu();
    await sleep(2000);
    const m1 = await machineBusySeconds();
    const quietCpu = m0 !== undefined && m1 !== undefined ? (m1 - m0) / 2 : undefined;
    const quietTop = await topProcesses(p0, await allProcessCpu(), 2, new Set([process.pid, process.ppid]));

    const port = await freePort();
    const serverVars: Record<string, string> = {
      DATABASE_URL: db.url,
      PORT: String(port),
      BILLING_BOOTSTRAP_API_KEY: API_KEY,
      LOG_LEVEL: settings.serverLogLevel,
      ...settings.serverExtraEnv,
    };
    progress(`starting the server on port ${port} (node --max-old-space-size=192 --import tsx src/main.ts)`);
    let running!: Server;
    // Starts the server (again, after a crash: same database, same port), with a new RSS sampler.
    const startServer = async () => {
      if (server) {
        stopNotes.push(await server.stop());
        earlierProblems.push(...server.problems);
      }
      if (rss) {
        rssMaxMb = Math.max(rssMaxMb, rss.maxMb);
        rssSamples += rss.sampleCount;
        rss.stop();
      }
      running = await startChildServer(serverEnvironment(process.env, serverVars), settings.serverNodeArgs);
      server = running;
      if (running.pid === undefined) throw new Error("the server child has no pid");
      rss = new RssSampler(running.pid, settings.rssIntervalMs);
    };
    await startServer();
    const dbPid = await mariadbPid(db);
    let crashedInPhase: string | undefined;
    const gone = () => {
      const e = running.exited();
      if (e && !crashedInPhase) {
        crashedInPhase = e;
        progress(`CRASH: ${e}`);
      }
      return e !== undefined;
    };

    // Setup: subjects and a pricing metric reading `n` (so every event also updates the totals).
    const setupAgent = new http.Agent({ keepAlive: true, maxSockets: 4 });
    const post = async (path: string, body: unknown) => {
      const res = await restRequest(setupAgent, port, "POST", path, JSON.stringify(body), API_KEY);
      expectStatus200(res);
      return JSON.parse(res.body) as { id: string };
    };
    const subjectIds: string[] = [];
    for (let i = 0; i < 20; i++) subjectIds.push((await post("/subjects", { name: `Soak ${i}`, external_id: `soak-${runTag}-${i}` })).id);
    const metric = await post("/pricing-metrics", { event_name: EVENT_NAME, name: "Soak", unit: "event", aggregation: { aggregation_type: "sum", value_field: "n" } });
    setupAgent.destroy();
    const probeSubject = subjectIds[0] as string;
    progress(`created ${subjectIds.length} subjects and pricing metric ${metric.id}; probe on /ping and /subjects/${probeSubject}`);

    probe = new Probe(port, probeSubject);
    probe.start();
    const batches: BatchRecord[] = [];
    let streamAcked = 0;

    const runPhase = async (label: string, body: (deadline: number, refusals: Refusals, notes: string[]) => Promise<void>, seconds: number) => {
      progress(`phase: ${label}`);
      crashedInPhase = undefined;
      const t0 = performance.now();
      const server0 = await processCpuSeconds(running.pid);
      const db0 = await processCpuSeconds(dbPid);
      const mach0 = await machineBusySeconds();
      const procs0 = await allProcessCpu();
      const bench0 = process.cpuUsage();
      probe?.take();
      const refusals = new Refusals();
      const notes: string[] = [];
      await body(t0 + seconds * 1000, refusals, notes);
      gone();
      const wallS = (performance.now() - t0) / 1000;
      const p = probe?.take() ?? { ping: [], subject: [], errors: new Map<string, number>(), refusals: new Refusals() };
      refusals.merge(p.refusals); // the probe's carry a valid key too
      const server1 = await processCpuSeconds(running.pid);
      const db1 = await processCpuSeconds(dbPid);
      const mach1 = await machineBusySeconds();
      const procs1 = await allProcessCpu();
      const bench = process.cpuUsage(bench0);
      const serverCpuS = server1 !== undefined && server0 !== undefined ? server1 - server0 : undefined;
      const dbCpuS = db1 !== undefined && db0 !== undefined ? db1 - db0 : undefined;
      const benchCpuS = (bench.user + bench.system) / 1e6;
      const otherCpuS = mach1 !== undefined && mach0 !== undefined ? Math.max(0, mach1 - mach0 - (serverCpuS ?? 0) - (dbCpuS ?? 0) - benchCpuS) : undefined;
      const mine = new Set([process.pid, process.ppid, running.pid as number, ...(dbPid ? [dbPid] : [])]);
      const r = await rss!.phase(label);
      phases.push({
        label,
        wallS,
        ping: p.ping,
        subject: p.subject,
        probeErrors: p.errors,
        refusals,
        rssMaxMb: r.maxMb,
        crashed: crashedInPhase,
        serverCpuS,
        dbCpuS,
        benchCpuS,
        otherCpuS,
        otherTop: otherCpuS !== undefined && otherCpuS / wallS >= 0.1 ? await topProcesses(procs0, procs1, wallS, mine) : [],
        notes,
      });
      if (crashedInPhase) {
        crashes.push(`${label}: ${crashedInPhase}`);
        notes.push(`the server crashed (${crashedInPhase}); restarted on the same database for the next phase.`);
        progress("  restarting the server");
        await startServer();
      }
      for (const n of notes) progress(`  ${n}`);
      progress(
        `  probe p99 ping ${fmt(percentile(Float64Array.from(p.ping).sort(), 0.99), 1)} ms, subject ${fmt(percentile(Float64Array.from(p.subject).sort(), 0.99), 1)} ms; RSS max ${fmt(r.maxMb, 0)} MB`,
      );
    };

    if (settings.baselineSeconds > 0)
      await runPhase(
        "0. baseline (probe only)",
        async (deadline) => {
          await sleep(Math.max(0, deadline - performance.now()));
        },
        settings.baselineSeconds,
      );
    await runPhase("1. over-capacity batch ingest", (deadline, refusals, notes) => ingestPhase(port, subjectIds, deadline, gone, refusals, batches, notes), settings.phaseSeconds);
    await runPhase("2. oversized unauthenticated bodies", (deadline, _r, notes) => oversizedPhase(port, deadline, gone, notes), settings.phaseSeconds);
    await runPhase("3. idle and slow-header connections", (deadline, _r, notes) => slowConnectionsPhase(port, deadline, gone, notes), settings.phaseSeconds);
    await runPhase(
      "4. gRPC stream",
      async (_d, refusals, notes) => {
        streamAcked = (await streamPhase(port, probeSubject, refusals, notes)).acked;
      },
      settings.streamTimeoutS,
    );
    await probe.stop();
    probe = undefined;
    gone();

    // ---- Exactness: straight from the database.
    progress("checking the stored events");
    const q = async <T>(sql: string, params: unknown[] = []) => (await db.admin.query(sql, params))[0] as T[];
    const perBatch = new Map<string, number>();
    for (const r of await q<{ b: string; n: number | string }>(
      `SELECT SUBSTRING_INDEX(idempotency_key, '-', 3) AS b, COUNT(*) AS n FROM \`${db.name}\`.usage_events WHERE idempotency_key LIKE ? GROUP BY b`,
      [`b-${runTag}-%`],
    ))
      perBatch.set(r.b, Number(r.n));
    const [streamRow] = await q<{ n: number | string }>(`SELECT COUNT(*) AS n FROM \`${db.name}\`.usage_events WHERE idempotency_key LIKE ?`, [`st-${runTag}-%`]);
    const streamStored = Number(streamRow?.n);
    const [dupRow] = await q<{ n: number | string; d: number | string }>(`SELECT COUNT(*) AS n, COUNT(DISTINCT environment_id, idempotency_key) AS d FROM \`${db.name}\`.usage_events`);
    const [rollRow] = await q<{ n: number | string | null }>(`SELECT SUM(event_count) AS n FROM \`${db.name}\`.usage_rollups WHERE metric_id = ?`, [metric.id]);
    const totalRows = Number(dupRow?.n);
    const distinctKeys = Number(dupRow?.d);
    const rolled = Number(rollRow?.n ?? 0);

    let ackedEvents = 0;
    let ackedMismatch = 0;
    let refusedStored = 0;
    let unknownBatches = 0;
    let unknownStored = 0;
    let unknownPartial = 0;
    const mismatchExamples: string[] = [];
    for (const b of batches) {
      const stored = perBatch.get(b.id) ?? 0;
      if (b.state === "acked") {
        ackedEvents += b.acked;
        if (stored !== b.acked) {
          ackedMismatch++;
          if (mismatchExamples.length < 5) mismatchExamples.push(`${b.id}: acknowledged ${b.acked}, stored ${stored}`);
        }
      } else if (b.anyUnknown) {
        unknownBatches++;
        unknownStored += stored;
        if (stored !== 0 && stored !== settings.batchSize) unknownPartial++;
      } else if (stored !== 0) {
        refusedStored += stored;
        if (mismatchExamples.length < 5) mismatchExamples.push(`${b.id}: only ever refused, ${stored} stored`);
      }
    }
    const streamMismatch = streamStored !== streamAcked;
    const exactOk = ackedMismatch === 0 && refusedStored === 0 && unknownPartial === 0 && !streamMismatch && totalRows === distinctKeys;

    // ---- Report
    const refusalsAll = new Refusals();
    for (const ph of phases) refusalsAll.merge(ph.refusals);
    const p99s = phases.map((ph) => ({
      label: ph.label,
      ping: percentile(Float64Array.from(ph.ping).sort(), 0.99),
      subject: percentile(Float64Array.from(ph.subject).sort(), 0.99),
    }));
    const worstPing = p99s.reduce((a, b) => (b.ping > a.ping ? b : a), p99s[0] ?? { label: "–", ping: Number.NaN, subject: Number.NaN });
    const worstSubject = p99s.reduce((a, b) => (b.subject > a.subject ? b : a), p99s[0] ?? { label: "–", ping: Number.NaN, subject: Number.NaN });
    rssMaxMb = Math.max(rssMaxMb, rss?.maxMb ?? 0);
    rssSamples += rss?.sampleCount ?? 0;
    await cleanup();
    const rssMax = rssMaxMb;
    const samples = rssSamples;
    const problems = [...earlierProblems, ...running.problems];

    out.push(`# Soak (bench/soak.ts)`, "");
    out.push(machineLine(db.version));
    out.push(
      `The load generator, the server (a child process: \`node --max-old-space-size=192 --import tsx src/main.ts\`, as \`npm start\`) and MariaDB share these CPUs, all on loopback. ` +
        `Server environment: DATABASE_URL (fresh database), PORT, BILLING_BOOTSTRAP_API_KEY, LOG_LEVEL=${settings.serverLogLevel}` +
        `${
          Object.keys(settings.serverExtraEnv).length
            ? `, ${Object.entries(settings.serverExtraEnv)
                .map(([k, v]) => `${k}=${v}`)
                .join(", ")}`
            : ""
        }; everything else (admission control, HTTP timeouts, connection cap) at its default.`,
    );
    out.push(
      `Probe: every ${settings.probeIntervalMs} ms one \`GET /ping\` and one \`GET /subjects/{id}\` (valid key), open loop (latency from the tick; a slow answer does not hold back the next). ` +
        `Load on the machine before the run: ${quietCpu !== undefined ? `${fmt(quietCpu * 100, 0)}% of one core` : "unknown"}${quietTop.length ? ` (${quietTop.join(", ")})` : ""}.`,
      "",
    );
    const cpu = (s: number | undefined, wall: number) => (s === undefined ? "–" : `${fmt((100 * s) / wall, 0)}%`);
    out.push(
      ...markdownTable(
        ["Phase", "s", "ping p50 / p99 / max ms", "subject p50 / p99 / max ms", "probe errors", "RSS max MB", "refusals (valid key)", "crash", "CPU server / MariaDB / bench / other"],
        phases.map((ph) => {
          const pr = (v: number[]) => {
            const s = Float64Array.from(v).sort();
            return `${fmt(percentile(s, 0.5), 1)} / ${fmt(percentile(s, 0.99), 1)} / ${fmt(s[s.length - 1] ?? Number.NaN, 1)}`;
          };
          const errs = [...ph.probeErrors].reduce((a, [, n]) => a + n, 0);
          return [
            ph.label,
            fmt(ph.wallS, 1),
            `${pr(ph.ping)} (${fmtInt(ph.ping.length)})`,
            `${pr(ph.subject)} (${fmtInt(ph.subject.length)})`,
            errs === 0 ? "0" : `${errs}: ${[...ph.probeErrors].map(([k, n]) => `${n}× ${k}`).join("; ")}`,
            fmt(ph.rssMaxMb, 0),
            ph.refusals.text(),
            ph.crashed ? `**yes**: ${ph.crashed}` : "no",
            `${cpu(ph.serverCpuS, ph.wallS)} / ${cpu(ph.dbCpuS, ph.wallS)} / ${cpu(ph.benchCpuS, ph.wallS)} / ${cpu(ph.otherCpuS, ph.wallS)}${ph.otherTop.length ? ` (${ph.otherTop.join(", ")})` : ""}`,
          ];
        }),
      ),
      "",
      "CPU is a share of one core (200% is the whole machine); other is every other process on the machine. Probe counts in parentheses.",
      "",
    );
    for (const ph of phases) for (const n of ph.notes) out.push(`- ${ph.label}: ${n}`);
    out.push("");
    out.push(
      `Exactness (queried from \`usage_events\` after the run): ${fmtInt(batches.length)} batches, ${fmtInt(batches.filter((b) => b.state === "acked").length)} acknowledged ` +
        `(${fmtInt(ackedEvents)} events acknowledged, ${fmtInt(ackedMismatch)} batches whose stored count differs); ` +
        `${fmtInt(batches.filter((b) => b.state === "refused").length)} only ever refused (${fmtInt(refusedStored)} of their events stored); ` +
        `${fmtInt(unknownBatches)} without a final answer (${fmtInt(unknownStored)} events stored, ${fmtInt(unknownPartial)} partially); ` +
        `stream: ${fmtInt(streamAcked)} acknowledged, ${fmtInt(streamStored)} stored. ` +
        `The table holds ${fmtInt(totalRows)} rows with ${fmtInt(distinctKeys)} distinct keys; the metric's hourly totals count ${fmtInt(rolled)} events.` +
        (mismatchExamples.length ? ` Examples: ${mismatchExamples.join("; ")}.` : ""),
      "",
    );
    const goals: [string, string, string, boolean][] = [
      ["Crashes", "0", crashes.length === 0 ? "0" : `${crashes.length} (${crashes.join("; ")})`, crashes.length === 0],
      ["Server RSS (VmRSS every 250 ms)", `< ${GOALS.rssMb} MB`, `${fmt(rssMax, 0)} MB max (${fmtInt(samples)} samples)`, rssMax < GOALS.rssMb],
      ["Probe `/ping` p99, every phase", `< ${GOALS.probeP99Ms} ms`, `${fmt(worstPing.ping, 1)} ms worst (${worstPing.label})`, worstPing.ping < GOALS.probeP99Ms],
      ["Probe `GET /subjects/{id}` p99, every phase", `< ${GOALS.probeP99Ms} ms`, `${fmt(worstSubject.subject, 1)} ms worst (${worstSubject.label})`, worstSubject.subject < GOALS.probeP99Ms],
      [
        "Acknowledged events stored exactly once",
        "every one",
        `${fmtInt(ackedEvents + streamAcked)} acknowledged, ${fmtInt(ackedMismatch)} batch mismatches, ${fmtInt(refusedStored)} refused stored, stream ${streamMismatch ? "mismatch" : "exact"}`,
        exactOk,
      ],
      ["Refusals (valid key) that are 429/503 with Retry-After", "all", `${fmtInt(refusalsAll.total - refusalsAll.bad)} of ${fmtInt(refusalsAll.total)}`, refusalsAll.bad === 0],
    ];
    out.push(
      ...markdownTable(
        ["Goal", "Ceiling", "Measured", "Result"],
        goals.map(([g, c, m, ok]) => [g, c, m, ok ? "met" : "**missed**"]),
      ),
      "",
    );
    out.push(`Met: ${goals.filter((g) => g[3]).length} of ${goals.length}.`, "");
    out.push(...serverReportLines(stopNotes.join("; "), problems));
    process.stdout.write(`${out.join("\n")}\n`);
    return 0;
  } finally {
    await cleanup();
  }
}

await runBenchmark(main);
