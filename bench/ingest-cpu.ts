/**
 * Server CPU per batched event, a measure that holds on a shared machine: on a fresh MariaDB
 * database (or an embedded SQLite file with BENCH_STORE=sqlite), a server child process ingests
 * BENCH_BATCHES batches of BENCH_BATCH_SIZE events (concurrency BENCH_BATCH_CONCURRENCY, events of
 * the metering benchmark's kind: 100 subjects, 3 regions, random times of the month) while a
 * probe asks `GET /ping` every 20 ms. Reports the server's user + system CPU µs per event over
 * the ingest (from /proc), events/s, and the probe's p50/p99/max latency: how long another request
 * waits behind the batches on the server's event loop. Every batch answer is checked (all
 * accepted); at the end the events table must hold exactly the events sent.
 *
 * Run:   npx tsx bench/ingest-cpu.ts
 * Env:   BENCH_BATCHES=200 BENCH_BATCH_SIZE=500 BENCH_BATCH_CONCURRENCY=2 BENCH_STORE=mariadb|sqlite
 *        BENCH_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof"  (node options for the server child)
 *        BENCH_PROBE=0   no ping probe: the CPU figure is then the batches' alone
 *        BENCH_LOOP_DELAY=0   no event-loop delay histogram in the server (bench/loop-delay.mjs, 5 ms resolution)
 *        BENCH_SINGLE=1   single events instead (`POST /usage-events`, one event a request): BENCH_BATCHES
 *                         requests at BENCH_BATCH_CONCURRENCY; e.g. BENCH_BATCHES=30000 BENCH_BATCH_CONCURRENCY=64
 *        BENCH_INGEST_COMMITS_IN_FLIGHT=N   the server's INGEST_COMMITS_IN_FLIGHT (default: the config's, 2)
 *        BENCH_SERVER_LOG_LEVEL=debug   the server's LOG_LEVEL (default warn; debug logs each group commit with its events and ms)
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  LeanHttpConnection,
  LeanHttpPool,
  createThrowawayDatabase,
  envNumber,
  expectStatus200,
  fmt,
  freePort,
  percentile,
  processCpuSeconds,
  progress,
  serverEnvironment,
  startChildServer,
} from "./lib.js";

const API_KEY = `sk_test_${randomBytes(12).toString("hex")}`;
const batches = Math.floor(envNumber("BENCH_BATCHES", 200, 1));
const batchSize = process.env.BENCH_SINGLE === "1" ? 1 : Math.floor(envNumber("BENCH_BATCH_SIZE", 500, 1));
const concurrency = Math.floor(envNumber("BENCH_BATCH_CONCURRENCY", 2, 1));
/** BENCH_SINGLE=1: one event a request to the single-event path. */
const single = process.env.BENCH_SINGLE === "1";
const store = process.env.BENCH_STORE === "sqlite" ? "sqlite" : "mariadb";
const nodeArgs = (process.env.BENCH_SERVER_NODE_ARGS || "").split(" ").filter(Boolean);
/** BENCH_PROBE=0: no ping probe (its requests' CPU then does not count in the per-event figure). */
const probeOn = process.env.BENCH_PROBE !== "0";
/** The server's own event-loop delay over the measured batches (bench/loop-delay.mjs), unless BENCH_LOOP_DELAY=0. */
const loopDelayOn = process.env.BENCH_LOOP_DELAY !== "0";
const REGIONS = ["eu", "us", "ap"];
const runTag = randomBytes(4).toString("hex");
const d = new Date();
const MONTH_START = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);

async function main(): Promise<void> {
  const db = store === "mariadb" ? await createThrowawayDatabase(process.env.BENCH_MYSQL_URL || "mysql://root@127.0.0.1:3306", "bench_cpu") : undefined;
  const dir = store === "sqlite" ? await mkdtemp(join(tmpdir(), "bench-cpu-")) : undefined;
  const port = await freePort();
  const delayFile = join(await mkdtemp(join(tmpdir(), "bench-delay-")), "delay.json");
  const server = await startChildServer(
    serverEnvironment(process.env, {
      DATABASE_URL: db ? db.url : `sqlite:${join(dir as string, "bench.db")}`,
      PORT: String(port),
      BILLING_BOOTSTRAP_API_KEY: API_KEY,
      LOG_LEVEL: process.env.BENCH_SERVER_LOG_LEVEL || "warn",
      ...(process.env.BENCH_INGEST_COMMITS_IN_FLIGHT ? { INGEST_COMMITS_IN_FLIGHT: process.env.BENCH_INGEST_COMMITS_IN_FLIGHT } : {}),
      ...(loopDelayOn ? { BENCH_LOOP_DELAY_FILE: delayFile } : {}),
    }),
    loopDelayOn ? [...nodeArgs, "--import", "./bench/loop-delay.mjs"] : nodeArgs,
  );
  /** Asks the server for its event-loop delay since the last ask (and starts over). */
  const loopDelay = async (): Promise<{ p50: number; p99: number; max: number; mean: number } | undefined> => {
    if (!loopDelayOn || server.pid === undefined) return undefined;
    await rm(delayFile, { force: true });
    process.kill(server.pid, "SIGUSR2");
    for (let i = 0; i < 100; i++) {
      try {
        return JSON.parse(await readFile(delayFile, "utf8"));
      } catch {
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    return undefined;
  };
  try {
    const setup = new LeanHttpConnection(port);
    const post = async (path: string, body: unknown) => {
      const res = await setup.request("POST", path, JSON.stringify(body), API_KEY);
      expectStatus200(res);
      return JSON.parse(res.body) as { id: string };
    };
    const subjects: string[] = [];
    for (let i = 0; i < 100; i++) subjects.push((await post("/subjects", { name: `S ${i}`, external_id: `s-${runTag}-${i}` })).id);
    await post("/pricing-metrics", { event_name: "api_call", name: "API calls", unit: "call", dimensions: ["region"], aggregation: { aggregation_type: "sum", value_field: "n" } });
    let seq = 0;
    const body = () => {
      const events = [];
      for (let i = 0; i < batchSize; i++) {
        const n = seq++;
        events.push({
          idempotency_key: `k-${runTag}-${String(n).padStart(10, "0")}`,
          subject_id: subjects[n % subjects.length],
          event_name: "api_call",
          data: { n: `${(n * 7919) % 1000}.${n % 100}`, region: REGIONS[n % 3] },
          timestamp: new Date(MONTH_START + Math.floor(Math.random() * (Date.now() - MONTH_START))).toISOString(),
        });
      }
      return JSON.stringify(single ? events[0] : { events });
    };
    const path = single ? "/usage-events" : "/usage-events/batch";
    const acceptedOf = (answer: string) => {
      const r = JSON.parse(answer) as { accepted?: number; status?: string };
      return single ? (r.status === "accepted" ? 1 : 0) : r.accepted;
    };
    const pool = new LeanHttpPool(port, concurrency);
    // Warm-up: 10 batches.
    for (let i = 0; i < 10; i++) expectStatus200(await pool.request("POST", path, body(), API_KEY));
    const bodies = Array.from({ length: batches }, body);
    const probe = new LeanHttpConnection(port);
    const lat: number[] = [];
    let probing = probeOn;
    const probeLoop = (async () => {
      while (probing) {
        const t0 = performance.now();
        expectStatus200(await probe.request("GET", "/ping", undefined, API_KEY));
        lat.push(performance.now() - t0);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await loopDelay();
    const cpu0 = await processCpuSeconds(server.pid);
    const t0 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < bodies.length) {
          const b = bodies[next++] as string;
          const res = await pool.request("POST", path, b, API_KEY);
          expectStatus200(res);
          const accepted = acceptedOf(res.body);
          if (accepted !== batchSize) throw new Error(`accepted ${accepted} of ${batchSize}: ${res.body.slice(0, 300)}`);
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    const cpu1 = await processCpuSeconds(server.pid);
    const delay = await loopDelay();
    probing = false;
    await probeLoop;
    const events = batches * batchSize;
    if (db) {
      const [rows] = await db.admin.query(`SELECT COUNT(*) AS n FROM \`${db.name}\`.usage_events`);
      const n = Number((rows as { n: number }[])[0]?.n);
      if (n !== events + 10 * batchSize) throw new Error(`usage_events holds ${n}, expected ${events + 10 * batchSize}`);
    }
    const sorted = Float64Array.from(lat).sort();
    const cpuUs = cpu0 !== undefined && cpu1 !== undefined ? ((cpu1 - cpu0) * 1e6) / events : Number.NaN;
    process.stdout.write(
      `${store} ${single ? `single events=${batches}` : `batches=${batches}x${batchSize}`} c=${concurrency}: ${fmt(events / seconds, 0)} events/s, server CPU ${fmt(cpuUs, 1)} µs/event; ${
        delay ? `event-loop delay p50 ${delay.p50} ms p99 ${delay.p99} ms max ${delay.max} ms; ` : ""
      }${
        lat.length === 0
          ? "no probe"
          : `ping p50 ${fmt(percentile(sorted, 0.5), 1)} ms p99 ${fmt(percentile(sorted, 0.99), 1)} ms max ${fmt(sorted[sorted.length - 1] ?? 0, 1)} ms (${lat.length} pings)`
      }\n`,
    );
    pool.close();
    probe.close();
    setup.close();
  } finally {
    progress(`server ${await server.stop()}`);
    await db?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  }
}

await main();
