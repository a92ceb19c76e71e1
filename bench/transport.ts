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
 *     the calls the lean path's reply (src/edge/lean/serve.ts) makes for an answer.
 * The load generator is h2load (bench/h2load.ts), as in bench:grpc: gRPC `-c BENCH_GRPC_CONNECTIONS
 * -m BENCH_GRPC_STREAMS`, HTTP/1.1 `--h1` over as many connections as gRPC has streams in flight;
 * phases HTTP/1.1, gRPC, HTTP/1.1, gRPC (so a drift of the machine shows), each BENCH_WARMUP_CALLS
 * then BENCH_CALLS measured; h2load checks every status, and one call of each kind through
 * node:http and @grpc/grpc-js checks the answer's bytes first.
 *
 * Run: npm run bench:transport     (needs h2load: apt-get install -y nghttp2-client)
 * Env: BENCH_CALLS=40000 BENCH_WARMUP_CALLS=4000 BENCH_GRPC_CONNECTIONS=2 BENCH_GRPC_STREAMS=8
 *      BENCH_TRANSPORT_BYTES=256
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import http from "node:http";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { createInterface } from "node:readline";
import * as grpc from "@grpc/grpc-js";
import { type H2loadOptions, grpcFrame, h2load, h2loadCommand, requireH2load } from "./h2load.js";
import { REPO_ROOT, START_NODE_ARGS, cpuCount, envNumber, fmt, fmtInt, markdownTable, processCpuSeconds, progress, restRequest, runBenchmark } from "./lib.js";

const settings = {
  calls: Math.floor(envNumber("BENCH_CALLS", 40_000, 1)),
  warmupCalls: Math.floor(envNumber("BENCH_WARMUP_CALLS", 4_000, 1)),
  connections: Math.floor(envNumber("BENCH_GRPC_CONNECTIONS", 2, 1)),
  streams: Math.floor(envNumber("BENCH_GRPC_STREAMS", 8, 1)),
  bytes: Math.floor(envNumber("BENCH_TRANSPORT_BYTES", 256, 0)),
};

const GRPC_PATH = "/bench.v1.Transport/Call";

// ---------------------------------------------------------------------------------------------
// The child: two bare servers

function serve(): void {
  const body = Buffer.alloc(settings.bytes, "x");
  const answer = grpcFrame(body);
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

async function phase(protocol: Row["protocol"], child: Child, o: Omit<H2loadOptions, "requests">): Promise<Row> {
  progress(`${protocol}: ${settings.warmupCalls} warm-up calls, ${settings.calls} measured`);
  await h2load({ ...o, requests: settings.warmupCalls });
  const cpuStart = await processCpuSeconds(child.pid);
  const r = await h2load({ ...o, requests: settings.calls });
  const cpuSeconds = ((await processCpuSeconds(child.pid)) ?? Number.NaN) - (cpuStart ?? Number.NaN);
  const serverUs = (cpuSeconds * 1e6) / r.succeeded;
  const clientUs = (r.clientCpuSeconds * 1e6) / r.succeeded;
  progress(`  ${fmtInt(r.rps)} calls/s, server CPU ${fmt(serverUs, 1)} µs per call`);
  return { protocol, rps: r.rps, p50: r.p50, p99: r.p99, serverUs, clientUs };
}

/** One call of each kind, its answer checked (h2load counts statuses only). */
async function checkAnswers(child: Child, expected: Buffer, request: Buffer): Promise<void> {
  const res = await restRequest(new http.Agent(), child.h1, "GET", "/x");
  if (res.status !== 200 || res.body !== expected.toString("utf8")) throw new Error(`HTTP ${res.status}, ${res.body.length} bytes`);
  const client = new grpc.Client(`127.0.0.1:${child.h2}`, grpc.credentials.createInsecure());
  const identity = (b: Buffer) => b;
  try {
    const body = await new Promise<Buffer>((resolve, reject) => client.makeUnaryRequest(GRPC_PATH, identity, identity, request, (err, answer) => (err || !answer ? reject(err) : resolve(answer))));
    if (!body.equals(expected)) throw new Error(`a gRPC answer of ${body.length} bytes`);
  } finally {
    client.close();
  }
}

async function main(): Promise<number> {
  requireH2load();
  const child = await startChild();
  const expected = Buffer.alloc(settings.bytes, "x");
  const request = randomBytes(32);
  const h1: Omit<H2loadOptions, "requests"> = { url: `http://127.0.0.1:${child.h1}/x`, connections: settings.connections * settings.streams, streams: 1, h1: true };
  const h2: Omit<H2loadOptions, "requests"> = {
    url: `http://127.0.0.1:${child.h2}${GRPC_PATH}`,
    body: grpcFrame(request),
    headers: { "content-type": "application/grpc", te: "trailers" },
    connections: settings.connections,
    streams: settings.streams,
  };
  const rows: Row[] = [];
  try {
    await checkAnswers(child, expected, request);
    for (let round = 0; round < 2; round++) {
      rows.push(await phase("HTTP/1.1", child, h1));
      rows.push(await phase("HTTP/2 gRPC", child, h2));
    }
  } finally {
    child.process.kill("SIGTERM");
  }
  const mean = (p: Row["protocol"]) => {
    const r = rows.filter((x) => x.protocol === p);
    return r.reduce((s, x) => s + x.serverUs, 0) / r.length;
  };
  const h1Us = mean("HTTP/1.1");
  const h2Us = mean("HTTP/2 gRPC");
  const lines = [
    "## The transports' floor, one run",
    "",
    `Machine: ${cpuCount()} CPUs, Node ${process.version}. Each call answered with ${settings.bytes} fixed bytes by a bare server (no service, no database); ${settings.warmupCalls} warm-up and ${settings.calls} measured calls per phase, sent by h2load: gRPC \`-c ${settings.connections} -m ${settings.streams}\`, HTTP/1.1 \`--h1 -c ${settings.connections * settings.streams}\`.`,
    "",
    `    ${h2loadCommand({ ...h2, requests: settings.calls })}`,
    `    ${h2loadCommand({ ...h1, requests: settings.calls })}`,
    "",
    ...markdownTable(
      ["phase", "transport", "calls/s", "p50 ms", "p99 ms", "server CPU µs per call", "load generator CPU µs per call"],
      rows.map((r, i) => [String(i + 1), r.protocol, fmtInt(r.rps), fmt(r.p50, 2), fmt(r.p99, 2), fmt(r.serverUs, 1), fmt(r.clientUs, 1)]),
    ),
    "",
    `Server CPU per call, mean of the two phases: HTTP/1.1 ${fmt(h1Us, 1)} µs, HTTP/2 gRPC ${fmt(h2Us, 1)} µs: HTTP/2 costs ${fmt(h2Us - h1Us, 1)} µs more per call (${fmt(h2Us / h1Us, 2)}×) before any of the service's work.`,
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
  return 0;
}

if (process.argv[2] === "serve") serve();
else runBenchmark(main);
