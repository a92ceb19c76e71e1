/**
 * h2load (nghttp2's load generator, Debian's nghttp2-client) driven from the benchmarks: a gRPC
 * unary call is an HTTP/2 POST of one enveloped message with `content-type: application/grpc` and
 * `te: trailers`, which h2load sends as any gRPC client does (its own HPACK, flow control and
 * multiplexing); `--h1` drives the same server over HTTP/1.1 for REST.
 *
 * h2load counts HTTP statuses only, and a gRPC error is HTTP 200 with grpc-status in its trailers,
 * so every run here is checked by the server's own count: `billing_requests_total` by protocol and
 * code (GET /metrics) before and after, which must have grown by exactly the calls h2load says
 * succeeded, all with code ok (grpcMetrics, checkCodes).
 */
import { spawn, spawnSync } from "node:child_process";
import type http from "node:http";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { restRequest } from "./lib.js";

/** Throws with how to install h2load when it is not on the PATH. */
export function requireH2load(): string {
  const r = spawnSync("h2load", ["--version"], { encoding: "utf8" });
  if (r.error || r.status !== 0) throw new Error("h2load not found: install it with `apt-get install -y nghttp2-client` (Debian/Ubuntu; `brew install nghttp2` on macOS)");
  return r.stdout.trim();
}

/** The 5-byte gRPC prefix (uncompressed) and the message. */
export function grpcFrame(message: Uint8Array): Buffer {
  const b = Buffer.allocUnsafe(5 + message.byteLength);
  b[0] = 0;
  b.writeUInt32BE(message.byteLength, 1);
  b.set(message, 5);
  return b;
}

export interface H2loadOptions {
  /** The whole URL, e.g. http://127.0.0.1:8080/billing.v1.SubjectService/GetSubject. */
  url: string;
  requests: number;
  connections: number;
  /** Concurrent streams per connection (HTTP/2); 1 for --h1. */
  streams: number;
  /** The request body (POST), e.g. a gRPC frame; none: GET. */
  body?: Uint8Array;
  headers?: Record<string, string>;
  h1?: boolean;
}

export interface H2loadResult {
  seconds: number;
  rps: number;
  succeeded: number;
  failed: number;
  errored: number;
  /** Status codes by class, as h2load counts them. */
  statuses: string;
  p50: number;
  p99: number;
  /** h2load's own user + system CPU seconds. */
  clientCpuSeconds: number;
  command: string;
}

const tmp = mkdtempSync(join(os.tmpdir(), "bench-h2load-"));
process.once("exit", () => rmSync(tmp, { recursive: true, force: true }));
let files = 0;

/** The command line, for the report (the body file and the log file named by what they hold). */
export function h2loadArgs(o: H2loadOptions, bodyFile?: string, logFile?: string): string[] {
  const args = ["-n", String(o.requests), "-c", String(o.connections), "-m", String(o.streams)];
  if (o.h1) args.push("--h1");
  if (o.body) args.push("-d", bodyFile ?? "frame.bin");
  for (const [k, v] of Object.entries(o.headers ?? {})) args.push("-H", `${k}: ${v}`);
  if (logFile) args.push("--log-file", logFile);
  args.push(o.url);
  return args;
}

/** The command line as a shell would take it, the body file named frame.bin. */
export function h2loadCommand(o: H2loadOptions): string {
  return ["h2load", ...h2loadArgs(o).map((a) => (/[\s']/.test(a) ? `'${a}'` : a))].join(" ");
}

/** One h2load run to its end; throws if h2load fails or any request did not get a 2xx. */
export async function h2load(o: H2loadOptions): Promise<H2loadResult> {
  const n = files++;
  const bodyFile = join(tmp, `body-${n}.bin`);
  const logFile = join(tmp, `log-${n}.tsv`);
  if (o.body) writeFileSync(bodyFile, o.body);
  const args = h2loadArgs(o, bodyFile, logFile);
  // bash's `times` after h2load: the CPU time of its children, i.e. h2load's.
  const child = spawn("bash", ["-c", 'h2load "$@"; rc=$?; times >&2; exit $rc', "h2load", ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => {
    out += c;
  });
  child.stderr.setEncoding("utf8").on("data", (c: string) => {
    err += c;
  });
  const code = await new Promise<number | null>((r) => child.once("close", r));
  const shown = h2loadCommand(o);
  if (code !== 0) throw new Error(`${shown} exited with ${code}: ${(err || out).slice(-500)}`);
  const finished = /finished in ([\d.]+)(m?s), ([\d.]+) req\/s/.exec(out);
  const counts = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored/.exec(out);
  const statuses = /status codes: ([^\n]*)/.exec(out)?.[1] ?? "";
  if (!finished || !counts) throw new Error(`unexpected h2load output: ${out.slice(0, 800)}`);
  const seconds = Number(finished[1]) / (finished[2] === "ms" ? 1000 : 1);
  const succeeded = Number(counts[4]);
  const failed = Number(counts[5]);
  const errored = Number(counts[6]);
  if (succeeded !== o.requests || !/^(\d+) 2xx, 0 3xx, 0 4xx, 0 5xx/.test(statuses))
    throw new Error(`${shown}: ${succeeded} of ${o.requests} succeeded, ${failed} failed, ${errored} errored; status codes ${statuses}`);
  const latencies = Float64Array.from(
    readFileSync(logFile, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => Number(l.split("\t")[2]) / 1000),
  ).sort();
  const pick = (p: number) => latencies[Math.min(latencies.length - 1, Math.max(0, Math.ceil(p * latencies.length) - 1))] ?? Number.NaN;
  const times = /\n?\S+ \S+\n(\d+)m([\d.]+)s (\d+)m([\d.]+)s\s*$/.exec(err);
  const clientCpuSeconds = times ? Number(times[1]) * 60 + Number(times[2]) + Number(times[3]) * 60 + Number(times[4]) : Number.NaN;
  return { seconds, rps: Number(finished[3]), succeeded, failed, errored, statuses, p50: pick(0.5), p99: pick(0.99), clientCpuSeconds, command: shown };
}

/** The server's `billing_requests_total`, by "protocol code", summed over procedures. */
export async function requestCounts(port: number, agent: http.Agent): Promise<Map<string, number>> {
  const r = await restRequest(agent, port, "GET", "/metrics");
  if (r.status !== 200) throw new Error(`GET /metrics: HTTP ${r.status}`);
  const out = new Map<string, number>();
  for (const line of r.body.split("\n")) {
    if (!line.startsWith("billing_requests_total{")) continue;
    const protocol = /protocol="([^"]*)"/.exec(line)?.[1];
    const code = /code="([^"]*)"/.exec(line)?.[1];
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    const key = `${protocol} ${code}`;
    out.set(key, (out.get(key) ?? 0) + value);
  }
  return out;
}

/**
 * Throws unless, between the two counts, the server answered exactly `calls` requests of
 * `protocol` (grpc, rest) and all with code ok.
 */
export function checkCodes(before: Map<string, number>, after: Map<string, number>, protocol: string, calls: number): void {
  const grown: string[] = [];
  let ok = 0;
  for (const [key, value] of after) {
    if (!key.startsWith(`${protocol} `)) continue;
    const d = value - (before.get(key) ?? 0);
    if (d === 0) continue;
    if (key === `${protocol} ok`) ok = d;
    else grown.push(`${d}× ${key.slice(protocol.length + 1)}`);
  }
  if (grown.length > 0 || ok !== calls) throw new Error(`the server counted ${ok} ${protocol} answers ok of ${calls}${grown.length ? `, and ${grown.join(", ")}` : ""}`);
}
