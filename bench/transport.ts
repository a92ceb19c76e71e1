/**
 * The transports' own cost per call, without the service: what Node's HTTP/1.1 server and its
 * HTTP/2 server (node:http2, under connect-node and the lean gRPC path alike) cost the server's
 * CPU for one call answered with fixed bytes, driven by the same load generator as bench:grpc.
 * It separates the part of issue 13's gap between REST GetSubject and gRPC GetSubject that is the
 * transport's from the part that is ours (bench/README.md, "The transports' floor").
 *
 * A child process (this file with the argument `serve`, run as `npm start` runs the server: the
 * same node options) listens on two ports and answers every call with BENCH_TRANSPORT_BYTES bytes:
 *   - HTTP/1.1 (node:http): `GET /x` → 200 with content-type, content-length and x-request-id, the
 *     body in one `end()`, as the REST path answers;
 *   - HTTP/2 (node:http2, h2c, a 'stream' listener: no compatibility objects) a unary gRPC call →
 *     the body read to its end, then `respond()` with :status, content-type and x-request-id
 *     (waitForTrailers), `end()` with one envelope, `sendTrailers()` with grpc-status 0, exactly
 *     the calls grpc-unary.ts's GrpcReply makes for an answer.
 * The load generator: REST over one HTTP/1.1 connection per worker (LeanHttpPool), gRPC over
 * BENCH_GRPC_CONNECTIONS HTTP/2 connections (lean-grpc.ts, HPACK as gRPC's clients code it);
 * phases REST, gRPC, REST, gRPC (so a drift of the machine shows), each BENCH_WARMUP_SECONDS +
 * BENCH_SECONDS at BENCH_CONCURRENCY; every answer is checked (status, bytes, grpc-status 0).
 *
 * Run: npm run bench:transport
 * Env: BENCH_SECONDS=5 BENCH_WARMUP_SECONDS=1 BENCH_CONCURRENCY=16 BENCH_GRPC_CONNECTIONS=4
 *      BENCH_TRANSPORT_BYTES=256 BENCH_GRPC_HPACK=indexed|literal (lean-grpc.ts)
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import http from "node:http";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { createInterface } from "node:readline";
import { LeanGrpcConnection, envelope, unwrap } from "./lean-grpc.js";
import { LeanHttpPool, REPO_ROOT, START_NODE_ARGS, cpuCount, envNumber, fmt, fmtInt, markdownTable, measuredLoop, progress, runBenchmark } from "./lib.js";

const settings = {
  seconds: envNumber("BENCH_SECONDS", 5, 0.1),
  warmupSeconds: envNumber("BENCH_WARMUP_SECONDS", 1, 0),
  concurrency: Math.floor(envNumber("BENCH_CONCURRENCY", 16, 1)),
  connections: Math.floor(envNumber("BENCH_GRPC_CONNECTIONS", 4, 1)),
  bytes: Math.floor(envNumber("BENCH_TRANSPORT_BYTES", 256, 0)),
};

const GRPC_PATH = "/bench.v1.Transport/Call";

// ---------------------------------------------------------------------------------------------
// The child: two bare servers

function serve(): void {
  const body = Buffer.alloc(settings.bytes, "x");
  const answer = envelope(body);
  let n = 0;
  const requestId = () => `req_${(n++).toString(36).padStart(12, "0")}`;
  const h1 = http.createServer((req, res) => {
    req.resume();
    if (req.url !== "/x") {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": "application/json", "content-length": body.length, "x-request-id": requestId() });
    res.end(body);
  });
  const h2 = http2.createServer({});
  const sendOk = function (this: http2.ServerHttp2Stream) {
    this.sendTrailers({ "grpc-status": "0" });
  };
  h2.on("stream", (stream, headers) => {
    if (headers[":path"] !== GRPC_PATH) {
      stream.respond({ ":status": 404 }, { endStream: true });
      return;
    }
    stream.on("data", () => {});
    stream.on("end", () => {
      if (stream.destroyed || stream.closed) return;
      stream.respond({ ":status": 200, "content-type": "application/grpc+proto", "x-request-id": requestId() }, { waitForTrailers: true });
      stream.on("wantTrailers", sendOk);
      stream.end(answer);
    });
  });
  h1.listen(0, "127.0.0.1", () => {
    h2.listen(0, "127.0.0.1", () => {
      process.stdout.write(`ready ${(h1.address() as AddressInfo).port} ${(h2.address() as AddressInfo).port}\n`);
    });
  });
  process.on("SIGTERM", () => {
    h1.close();
    h2.close();
    process.exit(0);
  });
}

// ---------------------------------------------------------------------------------------------
// The load generator

interface Child {
  pid: number | undefined;
  h1: number;
  h2: number;
  process: ChildProcess;
}

function startChild(): Promise<Child> {
  const child = spawn(process.execPath, [...START_NODE_ARGS, "--import", "tsx", "bench/transport.ts", "serve"], {
    cwd: REPO_ROOT,
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, NODE_ENV: "production" },
  });
  return new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`the transport server exited (${code}) before it was ready`)));
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).once("line", (line) => {
      const m = /^ready (\d+) (\d+)$/.exec(line);
      if (!m) return reject(new Error(`unexpected line from the transport server: ${line}`));
      resolve({ pid: child.pid, h1: Number(m[1]), h2: Number(m[2]), process: child });
    });
  });
}

interface Row {
  protocol: "HTTP/1.1" | "HTTP/2 gRPC";
  rps: number;
  p50: number;
  p99: number;
  serverUs: number;
  clientUs: number;
}

async function phase(protocol: Row["protocol"], child: Child, call: () => Promise<void>): Promise<Row> {
  progress(`${protocol}: ${settings.warmupSeconds} s warm-up, ${settings.seconds} s measured, concurrency ${settings.concurrency}`);
  const { loop, cpuSeconds, clientCpuSeconds } = await measuredLoop({
    concurrency: settings.concurrency,
    warmupSeconds: settings.warmupSeconds,
    seconds: settings.seconds,
    call,
    gone: () => child.process.exitCode !== null,
    pid: child.pid,
  });
  if (loop.errors > 0) throw new Error(`${protocol}: ${loop.errors} calls failed: ${[...loop.errorReasons].map(([r, k]) => `${k}× ${r}`).join("; ")}`);
  const serverUs = (cpuSeconds * 1e6) / loop.requests;
  const clientUs = (clientCpuSeconds * 1e6) / loop.requests;
  progress(`  ${fmtInt(loop.rps)} calls/s, server CPU ${fmt(serverUs, 1)} µs per call`);
  return { protocol, rps: loop.rps, p50: loop.p50, p99: loop.p99, serverUs, clientUs };
}

async function main(): Promise<number> {
  const child = await startChild();
  const expected = Buffer.alloc(settings.bytes, "x");
  const rest = new LeanHttpPool(child.h1, settings.concurrency);
  const grpc = Array.from({ length: settings.connections }, () => new LeanGrpcConnection(child.h2));
  const request = envelope(randomBytes(32));
  let next = 0;
  const restCall = async () => {
    const res = await rest.request("GET", "/x");
    if (res.status !== 200 || res.body !== expected.toString("utf8")) throw new Error(`HTTP ${res.status}, ${res.body.length} bytes`);
  };
  const grpcCall = async () => {
    const body = unwrap(await (grpc[next++ % grpc.length] as LeanGrpcConnection).call(GRPC_PATH, request));
    if (!body.equals(expected)) throw new Error(`an answer of ${body.length} bytes`);
  };
  const rows: Row[] = [];
  try {
    for (let round = 0; round < 2; round++) {
      rows.push(await phase("HTTP/1.1", child, restCall));
      rows.push(await phase("HTTP/2 gRPC", child, grpcCall));
    }
  } finally {
    rest.close();
    for (const c of grpc) c.close();
    child.process.kill("SIGTERM");
  }
  const mean = (p: Row["protocol"]) => {
    const r = rows.filter((x) => x.protocol === p);
    return r.reduce((s, x) => s + x.serverUs, 0) / r.length;
  };
  const h1 = mean("HTTP/1.1");
  const h2 = mean("HTTP/2 gRPC");
  const lines = [
    "## The transports' floor, one run",
    "",
    `Machine: ${cpuCount()} CPUs, Node ${process.version}. Each call answered with ${settings.bytes} fixed bytes by a bare server (no service, no database); concurrency ${settings.concurrency}, ${settings.warmupSeconds} s warm-up and ${settings.seconds} s measured per phase; gRPC over ${settings.connections} HTTP/2 connections (lean-grpc.ts, HPACK ${process.env.BENCH_GRPC_HPACK || "indexed"}), HTTP/1.1 over one connection per worker.`,
    "",
    ...markdownTable(
      ["phase", "transport", "calls/s", "p50 ms", "p99 ms", "server CPU µs per call", "load generator CPU µs per call"],
      rows.map((r, i) => [String(i + 1), r.protocol, fmtInt(r.rps), fmt(r.p50, 2), fmt(r.p99, 2), fmt(r.serverUs, 1), fmt(r.clientUs, 1)]),
    ),
    "",
    `Server CPU per call, mean of the two phases: HTTP/1.1 ${fmt(h1, 1)} µs, HTTP/2 gRPC ${fmt(h2, 1)} µs: HTTP/2 costs ${fmt(h2 - h1, 1)} µs more per call (${fmt(h2 / h1, 2)}×) before any of the service's work.`,
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
  return 0;
}

if (process.argv[2] === "serve") serve();
else runBenchmark(main);
