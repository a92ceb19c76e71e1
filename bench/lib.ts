/**
 * Shared pieces of the benchmarks in bench/: settings from the environment, the closed-loop
 * driver and percentiles, a plain node:http client, the server in a child process, a throw-away
 * MariaDB database, the server's resident memory, and Markdown output.
 */
import { ConfigError } from "../src/config.js";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { readFile, readdir } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ConnectError } from "@connectrpc/connect";
import mysql from "mysql2/promise";

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const REQUEST_TIMEOUT_MS = 30_000;
const SERVER_START_TIMEOUT_MS = 60_000;
const SERVER_STOP_TIMEOUT_MS = 15_000;

/** Every variable the server's config reads; a child gets only the ones a benchmark sets. */
export const CONFIG_VARS = [
  "PORT",
  "DATABASE_URL",
  "BILLING_BOOTSTRAP_API_KEY",
  "PUBLIC_BASE_URL",
  "LOG_LEVEL",
  "RUN_MIGRATIONS",
  "API_KEY_CACHE_MS",
  "SCHEDULER_INTERVAL_MS",
  "WORKERS",
  "INGEST_COMMITS_IN_FLIGHT",
  "MAX_REQUESTS_IN_FLIGHT",
  "MAX_REQUEST_BYTES_IN_FLIGHT",
  "HTTP_PREFACE_TIMEOUT_MS",
  "HTTP_HEADERS_TIMEOUT_MS",
  "HTTP_REQUEST_TIMEOUT_MS",
  "HTTP_IDLE_TIMEOUT_MS",
  "HTTP_MAX_CONNECTIONS",
  "WEBHOOK_DELIVERY_INTERVAL_MS",
  "WEBHOOK_TIMEOUT_MS",
  "WEBHOOK_RETRY_BASE_MS",
  "WEBHOOK_RETRY_WINDOW_SECONDS",
  "WEBHOOK_ALLOW_PRIVATE_HOSTS",
  "USAGE_THRESHOLD_PERCENTS",
  "USAGE_THRESHOLD_CHECK_INTERVAL_MS",
  "LEAN_GRPC",
  "METRICS_TOKEN",
  "OTEL_EXPORTER_OTLP_ENDPOINT",
  "ENV_FILE",
];

// ---------------------------------------------------------------------------------------------
// Settings and progress

export function envNumber(name: string, fallback: number, min: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min) throw new Error(`${name} must be a number >= ${min} (got ${JSON.stringify(raw)})`);
  return n;
}

/** A comma-separated list of positive integers, e.g. BENCH_CONCURRENCY=1,32. */
export function envIntegers(name: string, fallback: string): number[] {
  return (process.env[name] || fallback).split(",").map((s) => {
    const n = Number(s.trim());
    if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must list positive integers (got ${JSON.stringify(s)})`);
    return n;
  });
}

export const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);

// ---------------------------------------------------------------------------------------------
// Measurement

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] as number;
}

export function reasonOf(err: unknown): string {
  if (err instanceof ConnectError) return `gRPC ${err.message}`.slice(0, 300);
  if (err instanceof Error) return err.message.slice(0, 300);
  return String(err).slice(0, 300);
}

export interface LoopResult {
  concurrency: number;
  /** Successful requests counted in the measured window. */
  requests: number;
  rps: number;
  p50: number;
  p99: number;
  /** Failed requests, warm-up included. */
  errors: number;
  errorReasons: Map<string, number>;
}

export interface LoopOptions {
  concurrency: number;
  warmupSeconds: number;
  seconds: number;
  /** One request; resolves when the answer was as expected, throws (with a short reason) if not. */
  call: () => Promise<void>;
  /** True once the server is gone: the workers stop. */
  gone: () => boolean;
  /**
   * Which successful requests are measured: "contained" (started after the warm-up and finished
   * before the end) or "completed" (finished inside the window, whenever they started: unbiased
   * throughput when single requests are long compared with the window).
   */
  window?: "contained" | "completed";
}

/**
 * Closed loop: `concurrency` workers, each calling `call` back to back until the end. Throughput
 * is the number of measured successful requests over the measured window.
 */
export async function closedLoop(o: LoopOptions): Promise<LoopResult> {
  const warmupEnd = process.hrtime.bigint() + BigInt(Math.round(o.warmupSeconds * 1e9));
  const end = warmupEnd + BigInt(Math.round(o.seconds * 1e9));
  const completed = o.window === "completed";
  const latencies: number[] = [];
  let errors = 0;
  const errorReasons = new Map<string, number>();

  const worker = async () => {
    for (;;) {
      const start = process.hrtime.bigint();
      if (start >= end || o.gone()) return;
      try {
        await o.call();
      } catch (err) {
        errors++;
        const reason = reasonOf(err);
        errorReasons.set(reason, (errorReasons.get(reason) ?? 0) + 1);
        continue;
      }
      const stop = process.hrtime.bigint();
      if ((completed || start >= warmupEnd) && stop >= warmupEnd && stop <= end) latencies.push(Number(stop - start) / 1e6);
    }
  };
  await Promise.all(Array.from({ length: o.concurrency }, worker));

  const sorted = Float64Array.from(latencies).sort();
  return {
    concurrency: o.concurrency,
    requests: sorted.length,
    rps: sorted.length / o.seconds,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    errors,
    errorReasons,
  };
}

/**
 * A closed loop (window "completed") with the CPU it cost: the process `pid`'s (a server child's
 * user + system seconds, from /proc) and this process's own, both over the measured window only
 * (timers at the end of the warm-up and of the window). Failed calls are left in `loop.errors`.
 */
export async function measuredLoop(o: Omit<LoopOptions, "window"> & { pid: number | undefined }): Promise<{ loop: LoopResult; cpuSeconds: number; clientCpuSeconds: number }> {
  let cpuStart: number | undefined;
  let cpuEnd: number | undefined;
  let clientStart: NodeJS.CpuUsage | undefined;
  let clientCpuSeconds = Number.NaN;
  const t1 = setTimeout(async () => {
    clientStart = process.cpuUsage();
    cpuStart = await processCpuSeconds(o.pid);
  }, o.warmupSeconds * 1000);
  setTimeout(
    async () => {
      if (clientStart) {
        const d = process.cpuUsage(clientStart);
        clientCpuSeconds = (d.user + d.system) / 1e6;
      }
      cpuEnd = await processCpuSeconds(o.pid);
    },
    (o.warmupSeconds + o.seconds) * 1000,
  );
  const loop = await closedLoop({ ...o, window: "completed" });
  clearTimeout(t1);
  // Not the end timer: the loop can end a moment before it runs (a late timer on a busy loop), and
  // clearing it then left cpuEnd unset and this wait spinning for ever (a run hung so).
  while (cpuEnd === undefined && !o.gone()) await new Promise((r) => setTimeout(r, 20));
  return { loop, cpuSeconds: (cpuEnd ?? Number.NaN) - (cpuStart ?? Number.NaN), clientCpuSeconds };
}

// ---------------------------------------------------------------------------------------------
// REST client

export interface RestResponse {
  status: number;
  body: string;
}

/** One HTTP/1.1 request over `agent`; the whole response body is read. */
export function restRequest(agent: http.Agent, port: number, method: string, path: string, body?: string, apiKey?: string, timeoutMs = REQUEST_TIMEOUT_MS): Promise<RestResponse> {
  return new Promise((resolvePromise, reject) => {
    const headers: http.OutgoingHttpHeaders = { accept: "application/json" };
    if (apiKey) headers["x-api-key"] = apiKey;
    if (body !== undefined) {
      headers["content-type"] = "application/json";
      headers["content-length"] = Buffer.byteLength(body);
    }
    const req = http.request({ agent, host: "127.0.0.1", port, method, path, headers, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolvePromise({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`timed out after ${timeoutMs} ms`)));
    req.on("error", reject);
    req.end(body);
  });
}

/**
 * A lean HTTP/1.1 keep-alive client: one socket, one request at a time, requests written as
 * bytes and answers read by Content-Length (the server always sends one). It exists because the
 * load generator shares the machine's CPUs with the server: Node's http client spent about a
 * third of a core on 3,000 single-event requests per second, CPU the server then lacks.
 */
export class LeanHttpConnection {
  private socket?: net.Socket;
  private pending?: { resolve: (r: RestResponse) => void; reject: (e: Error) => void; timer: NodeJS.Timeout };
  private buf: Buffer = Buffer.alloc(0);

  constructor(
    private readonly port: number,
    private readonly timeoutMs = REQUEST_TIMEOUT_MS,
  ) {}

  private connect(): net.Socket {
    const socket = net.connect({ port: this.port, host: "127.0.0.1", noDelay: true });
    socket.on("data", (chunk: Buffer) => {
      this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
      this.parse();
    });
    const fail = (err: Error) => {
      if (this.socket === socket) this.socket = undefined;
      this.buf = Buffer.alloc(0);
      const p = this.pending;
      this.pending = undefined;
      if (p) {
        clearTimeout(p.timer);
        p.reject(err);
      }
    };
    socket.on("error", fail);
    socket.on("close", () => fail(new Error("connection closed")));
    this.socket = socket;
    return socket;
  }

  private parse(): void {
    const end = this.buf.indexOf("\r\n\r\n");
    if (end === -1 || !this.pending) return;
    const head = this.buf.subarray(0, end).toString("latin1");
    const status = Number(head.slice(9, 12));
    const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
    if (!m) {
      this.socket?.destroy(new Error(`response without content-length: ${head.split("\r\n")[0]}`));
      return;
    }
    const length = Number(m[1]);
    if (this.buf.length < end + 4 + length) return;
    const body = this.buf.subarray(end + 4, end + 4 + length).toString("utf8");
    this.buf = this.buf.subarray(end + 4 + length);
    const p = this.pending;
    this.pending = undefined;
    clearTimeout(p.timer);
    p.resolve({ status, body });
  }

  request(method: string, path: string, body?: string, apiKey?: string): Promise<RestResponse> {
    if (this.pending) return Promise.reject(new Error("one request at a time per LeanHttpConnection"));
    const socket = this.socket ?? this.connect();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => socket.destroy(new Error(`timed out after ${this.timeoutMs} ms`)), this.timeoutMs);
      this.pending = { resolve, reject, timer };
      let head = `${method} ${path} HTTP/1.1\r\nhost: 127.0.0.1:${this.port}\r\naccept: application/json\r\n`;
      if (apiKey) head += `x-api-key: ${apiKey}\r\n`;
      if (body !== undefined) head += `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n`;
      socket.write(`${head}\r\n${body ?? ""}`);
    });
  }

  close(): void {
    this.socket?.destroy();
    this.socket = undefined;
  }
}

/** `size` LeanHttpConnections for a closed loop of `size` workers: each request takes a free one. */
export class LeanHttpPool {
  private readonly free: LeanHttpConnection[];
  constructor(port: number, size: number, timeoutMs = REQUEST_TIMEOUT_MS) {
    this.free = Array.from({ length: size }, () => new LeanHttpConnection(port, timeoutMs));
  }

  async request(method: string, path: string, body?: string, apiKey?: string): Promise<RestResponse> {
    const conn = this.free.pop();
    if (!conn) throw new Error("more requests in flight than connections");
    try {
      return await conn.request(method, path, body, apiKey);
    } finally {
      this.free.push(conn);
    }
  }

  close(): void {
    for (const c of this.free) c.close();
  }
}

/** Throws unless the status is 200: the error names the status and the Connect error's code and message. */
export function expectStatus200(res: RestResponse): void {
  if (res.status === 200) return;
  // Connect error JSON: {code, message, details}; keep the code and message only.
  let detail = res.body.slice(0, 200);
  try {
    const e = JSON.parse(res.body) as { code?: string; message?: string };
    if (e.code) detail = `${e.code}: ${e.message ?? ""}`;
  } catch {
    // not JSON: keep the raw start of the body
  }
  throw new Error(`HTTP ${res.status} ${detail}`);
}

// ---------------------------------------------------------------------------------------------
// The server in a child process

export interface Server {
  port: number;
  /** The server process's id, when it runs in a child process. */
  pid?: number;
  /** Lines the server logged at warn or error level. */
  problems: string[];
  /** Why the server is no longer running, if it stopped before stop() was called; undefined while it runs. */
  exited(): string | undefined;
  stop(): Promise<string>;
}

export function freePort(): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const addr = s.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      s.close(() => resolvePromise(port));
    });
  });
}

/** Polls GET /readyz (which queries the database) until it answers 200. */
async function waitReady(port: number, failed: () => Error | undefined): Promise<void> {
  const agent = new http.Agent({ keepAlive: false });
  const deadline = Date.now() + SERVER_START_TIMEOUT_MS;
  try {
    for (;;) {
      const f = failed();
      if (f) throw f;
      try {
        if ((await restRequest(agent, port, "GET", "/readyz")).status === 200) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`the server did not answer /readyz within ${SERVER_START_TIMEOUT_MS} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    agent.destroy();
  }
}

export function collectProblem(line: string, problems: string[]): void {
  try {
    const level = (JSON.parse(line) as { level?: string }).level;
    if (level === "warn" || level === "error") problems.push(line);
  } catch {
    if (line.trim() !== "") problems.push(line); // not a log line: a crash trace or console.error
  }
}

/** The server's environment: `base` without any of the config variables, then exactly `vars`. */
export function serverEnvironment(base: NodeJS.ProcessEnv, vars: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(base)) if (v !== undefined && !CONFIG_VARS.includes(k)) env[k] = v;
  Object.assign(env, vars);
  return env;
}

/** The node options `npm start` gives the server (package.json), so benchmarks run what ships. */
export const START_NODE_ARGS = ["--max-old-space-size=192"];

/**
 * Starts `node [START_NODE_ARGS] [nodeArgs] --import tsx src/main.ts` with `env` (PORT must be set) and waits until
 * /readyz answers. `nodeArgs` are options for the child's node only, e.g. ["--cpu-prof"] (which
 * NODE_OPTIONS does not allow); the profile is written when the server stops. `root`: the tree
 * whose src/main.ts runs (another commit's, see checkoutTree).
 */
export async function startChildServer(env: Record<string, string>, nodeArgs: string[] = [], root = REPO_ROOT): Promise<Server> {
  const port = Number(env.PORT);
  const problems: string[] = [];
  const child: ChildProcess = spawn(process.execPath, [...START_NODE_ARGS, ...nodeArgs, "--import", "tsx", "src/main.ts"], {
    cwd: root,
    env,
    stdio: ["ignore", "inherit", "pipe"],
  });
  let exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exit = new Promise<void>((r) =>
    child.once("exit", (code, signal) => {
      exited = { code, signal };
      r();
    }),
  );
  // Forward the server's log to our stderr, and keep its warnings and errors for the report.
  let pending = "";
  const onLine = (line: string) => {
    process.stderr.write(`[server] ${line}\n`);
    collectProblem(line, problems);
  };
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    pending += chunk;
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    lines.forEach(onLine);
  });

  const stop = async (): Promise<string> => {
    if (!exited) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), SERVER_STOP_TIMEOUT_MS);
      await exit;
      clearTimeout(timer);
    }
    if (pending.trim() !== "") onLine(pending);
    pending = "";
    return exited?.code === 0 ? "stopped cleanly (exit 0)" : `exited with code ${exited?.code}, signal ${exited?.signal}`;
  };

  try {
    await waitReady(port, () => (exited ? new Error(`the server exited during start (code ${exited.code}, signal ${exited.signal})`) : undefined));
  } catch (err) {
    await stop();
    throw err;
  }
  // Exit code 0 with nothing logged at warn is main.ts's graceful SIGTERM/SIGINT path: someone signalled it.
  const exitedEarly = () =>
    exited ? `the server exited unexpectedly (code ${exited.code}, signal ${exited.signal}${exited.code === 0 ? ": a graceful stop, so it was sent SIGTERM or SIGINT" : ""})` : undefined;
  return { port, pid: child.pid, problems, exited: exitedEarly, stop };
}

/**
 * The tree of `commit` (git archive) in a temporary directory, with this checkout's node_modules
 * linked in, to run that commit's server beside this one's; removed when this process exits.
 */
export function checkoutTree(commit: string): { root: string; commit: string } {
  const full = execFileSync("git", ["rev-parse", "--verify", `${commit}^{commit}`], { cwd: REPO_ROOT, encoding: "utf8" }).trim();
  const root = mkdtempSync(join(os.tmpdir(), `bench-tree-${full.slice(0, 7)}-`));
  process.once("exit", () => rmSync(root, { recursive: true, force: true }));
  execFileSync("bash", ["-c", 'git archive "$1" | tar -x -C "$2"', "archive", full, root], { cwd: REPO_ROOT });
  symlinkSync(join(REPO_ROOT, "node_modules"), join(root, "node_modules"));
  return { root, commit: full };
}

// ---------------------------------------------------------------------------------------------
// Resident memory of a process (Linux /proc)

async function rssKb(pid: number): Promise<number | undefined> {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(await readFile(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined; // gone, or not Linux
  }
}

export interface RssPhase {
  label: string;
  /** Highest sample during the phase, MiB. */
  maxMb: number;
  /** The last sample of the phase, MiB. */
  endMb: number;
}

/** Samples a process's VmRSS every `intervalMs`; keeps the overall maximum and one per phase. */
export class RssSampler {
  private timer: NodeJS.Timeout;
  private maxKb = 0;
  private phaseMaxKb = 0;
  private lastKb = 0;
  private samples = 0;
  readonly phases: RssPhase[] = [];

  constructor(
    private readonly pid: number,
    intervalMs: number,
  ) {
    this.timer = setInterval(() => void this.sample(), intervalMs);
    this.timer.unref();
    void this.sample();
  }

  private async sample(): Promise<void> {
    const kb = await rssKb(this.pid);
    if (kb === undefined) return;
    this.samples++;
    this.lastKb = kb;
    if (kb > this.maxKb) this.maxKb = kb;
    if (kb > this.phaseMaxKb) this.phaseMaxKb = kb;
  }

  /** Ends the current phase (sampling once more first) under `label`. */
  async phase(label: string): Promise<RssPhase> {
    await this.sample();
    const p = { label, maxMb: this.phaseMaxKb / 1024, endMb: this.lastKb / 1024 };
    this.phases.push(p);
    this.phaseMaxKb = this.lastKb;
    return p;
  }

  get maxMb(): number {
    return this.maxKb / 1024;
  }

  get sampleCount(): number {
    return this.samples;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

// ---------------------------------------------------------------------------------------------
// CPU time of processes and of the whole machine (Linux /proc; USER_HZ = 100)

/** User + system CPU seconds of a process (all its threads); undefined if unreadable. */
export async function processCpuSeconds(pid: number | undefined): Promise<number | undefined> {
  if (pid === undefined) return undefined;
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime
  } catch {
    return undefined;
  }
}

/** CPU seconds the whole machine spent busy (user, nice, system, irq, softirq, steal); undefined if unreadable. */
export async function machineBusySeconds(): Promise<number | undefined> {
  try {
    const f = ((await readFile("/proc/stat", "utf8")).split("\n")[0] ?? "").trim().split(/\s+/).slice(1).map(Number);
    const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = f;
    return (user + nice + system + irq + softirq + steal) / 100;
  } catch {
    return undefined;
  }
}

/** CPU seconds of every process now, by pid. */
export async function allProcessCpu(): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  let pids: string[];
  try {
    pids = (await readdir("/proc")).filter((d) => /^\d+$/.test(d));
  } catch {
    return out;
  }
  await Promise.all(
    pids.map(async (d) => {
      const s = await processCpuSeconds(Number(d));
      if (s !== undefined) out.set(Number(d), s);
    }),
  );
  return out;
}

/** The processes that used the most CPU between two allProcessCpu() snapshots, leaving out `exclude`: "12% node …/ava/…". */
export async function topProcesses(before: Map<number, number>, after: Map<number, number>, seconds: number, exclude: Set<number>, count = 3): Promise<string[]> {
  const deltas = [...after]
    .filter(([pid]) => !exclude.has(pid) && before.has(pid))
    .map(([pid, s]) => [pid, s - (before.get(pid) ?? s)] as const)
    .filter(([, d]) => d / seconds >= 0.05)
    .sort((a, b) => b[1] - a[1])
    .slice(0, count);
  return Promise.all(
    deltas.map(async ([pid, d]) => {
      let cmd = `pid ${pid}`;
      try {
        // The program and its non-option arguments, paths cut to their last components: "node ava/lib/worker/base.js".
        const [argv0 = "", ...args] = (await readFile(`/proc/${pid}/cmdline`, "utf8")).split("\0").filter(Boolean);
        const short = (a: string) => a.split("/").slice(-4).join("/");
        cmd = [argv0.split("/").pop() ?? argv0, ...args.filter((a) => !a.startsWith("-")).map(short)].join(" ").slice(0, 80).trim();
        if (cmd === "") cmd = `[${(await readFile(`/proc/${pid}/comm`, "utf8")).trim()}]`;
      } catch {
        // gone
      }
      return `${Math.round((100 * d) / seconds)}% ${cmd}`;
    }),
  );
}

// ---------------------------------------------------------------------------------------------
// A throw-away MariaDB/MySQL database

export interface ThrowawayDatabase {
  name: string;
  /** SELECT VERSION(). */
  version: string;
  /** The database's URL for the server's DATABASE_URL. */
  url: string;
  /** A connection to the server (no default database) for the benchmark's own statements. */
  admin: mysql.Connection;
  /** Connection settings, for pools of the benchmark's own. */
  connection: { host: string; port: number; user: string; password: string };
  /** Drops the database and closes the admin connection; safe to call twice. */
  drop(): Promise<void>;
}

/** Connects to `serverUrl` (mysql://user:pass@host:port) and creates an empty database named `prefix_<random>`. */
export async function createThrowawayDatabase(serverUrl: string, prefix = "bench"): Promise<ThrowawayDatabase> {
  const base = serverUrl.replace(/\/+$/, "");
  const name = `${prefix}_${randomBytes(6).toString("hex")}`;
  const u = new URL(base);
  const connection = {
    host: u.hostname,
    port: u.port ? Number(u.port) : 3306,
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
  };
  const admin = await mysql.createConnection(connection);
  const [versionRows] = await admin.query("SELECT VERSION() AS v");
  const version = String((versionRows as { v: string }[])[0]?.v);
  let dropped = false;
  const drop = async () => {
    if (dropped) return;
    dropped = true;
    try {
      await admin.query(`DROP DATABASE IF EXISTS \`${name}\``);
    } finally {
      await admin.end();
    }
  };
  try {
    await admin.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
  } catch (err) {
    await admin.end();
    throw err;
  }
  return { name, version, url: `${base}/${name}`, admin, connection, drop };
}

// ---------------------------------------------------------------------------------------------
// Markdown

export function fmt(n: number, digits: number): string {
  return Number.isFinite(n) ? n.toFixed(digits) : "–";
}

/** A number with thousands separators, e.g. 12,345. */
export function fmtInt(n: number): string {
  return Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "–";
}

/** A Markdown table: the first column left-aligned, the others right-aligned. */
export function markdownTable(header: string[], rows: string[][]): string[] {
  return [
    `| ${header.join(" | ")} |`,
    `|---|${header
      .slice(1)
      .map(() => "--:|")
      .join("")}`,
    ...rows.map((r) => `| ${r.join(" | ")} |`),
  ];
}

/** "Machine: 2 CPUs (model), 23.5 GiB RAM, Node v20…, linux …; database … on the same machine." */
export function machineLine(dbVersion: string): string {
  const cpus = os.cpus();
  return (
    `Machine: ${cpus.length} CPU${cpus.length === 1 ? "" : "s"} (${cpus[0]?.model.trim() ?? "unknown"}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ` +
    `Node ${process.version}, ${os.platform()} ${os.release()}; database ${dbVersion} on the same machine.`
  );
}

export function cpuCount(): number {
  return os.cpus().length;
}

/** The report's closing lines on the server: how it stopped, and its warning/error log lines. */
export function serverReportLines(stopNote: string, problems: readonly string[]): string[] {
  const out = [`Server: ${stopNote}; ${problems.length} warning/error log line${problems.length === 1 ? "" : "s"}.`];
  for (const line of problems.slice(0, 10)) out.push(`    ${line.slice(0, 400)}`);
  if (problems.length > 10) out.push(`    … and ${problems.length - 10} more`);
  return out;
}

/** Runs a benchmark's main and exits with its code; a failure (or a bad configuration) exits 1. */
export async function runBenchmark(main: () => Promise<number>): Promise<never> {
  try {
    process.exit(await main());
  } catch (err) {
    if (err instanceof ConfigError) process.stderr.write(`[bench] ${err.message}\n`);
    else process.stderr.write(`[bench] failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  }
}
