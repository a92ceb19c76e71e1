/**
 * Multi-process scaling (WORKERS, src/cluster.ts): usage ingestion through the same port with 1,
 * 2, … server processes on one MariaDB database, each run on a fresh database and a fresh server.
 *
 * Per WORKERS value, in this order:
 *   1. setup: BENCH_SUBJECTS subjects and a pricing metric (event "api_call", sum of "n"), through the API;
 *   2. REST `POST /usage-events`, one event per request, closed loop at BENCH_SINGLE_CONCURRENCY
 *      connections (the primary hands each connection to a worker, round robin);
 *   3. REST `POST /usage-events/batch`, BENCH_BATCH_SIZE events per request, closed loop at
 *      BENCH_BATCH_CONCURRENCY connections;
 *   then the table must hold exactly the accepted events (else the run exits 1).
 * Events go round-robin to the subjects, at a random time of the current month so far, with
 * unique idempotency keys. Per case the report gives events/s, the ratio to the first WORKERS
 * value's, latency p50/p99, the CPU the server's processes (primary and workers together) and
 * MariaDB used (in cores), and the load average at the end: on a machine with C cores, N workers
 * cannot go beyond what C cores give the workers and MariaDB together, and a busy machine (other
 * processes' load) lowers every figure.
 *
 * Run:   npx tsx bench/workers.ts             (needs MariaDB/MySQL at 127.0.0.1:3306, user root)
 * Env:   BENCH_WORKERS=1,2                    the WORKERS values, in order (1,2,1,2 interleaves runs)
 *        BENCH_SECONDS=10                     measured seconds per case (after BENCH_WARMUP_SECONDS=2)
 *        BENCH_SINGLE_CONCURRENCY=64          connections for single events
 *        BENCH_BATCH_SIZE=100                 events per batch request
 *        BENCH_BATCH_CONCURRENCY=8            connections for batches
 *        BENCH_SUBJECTS=100                   subjects the events are spread over
 *        BENCH_MYSQL_URL=mysql://root@127.0.0.1:3306
 * Output: progress on stderr; the report (Markdown) on stdout.
 */
import { readFile, readdir } from "node:fs/promises";
import os from "node:os";
import { randomBase62 } from "../src/billing/ids.js";
import {
  LeanHttpPool,
  type LoopResult,
  type Server,
  closedLoop,
  createThrowawayDatabase,
  envIntegers,
  envNumber,
  expectStatus200,
  fmt,
  fmtInt,
  freePort,
  machineLine,
  markdownTable,
  processCpuSeconds,
  progress,
  runBenchmark,
  serverEnvironment,
  serverReportLines,
  startChildServer,
} from "./lib.js";

const settings = {
  workers: envIntegers("BENCH_WORKERS", "1,2"),
  seconds: envNumber("BENCH_SECONDS", 10, 1),
  warmupSeconds: envNumber("BENCH_WARMUP_SECONDS", 2, 0),
  singleConcurrency: envNumber("BENCH_SINGLE_CONCURRENCY", 64, 1),
  batchSize: envNumber("BENCH_BATCH_SIZE", 100, 1),
  batchConcurrency: envNumber("BENCH_BATCH_CONCURRENCY", 8, 1),
  subjects: envNumber("BENCH_SUBJECTS", 100, 1),
  mysqlUrl: process.env.BENCH_MYSQL_URL ?? "mysql://root@127.0.0.1:3306",
};
const API_KEY = `sk_test_${randomBase62(24)}`;

/** The process `pid` and all its descendants (Linux /proc). */
async function processTree(pid: number): Promise<number[]> {
  const parentOf = new Map<number, number>();
  for (const d of (await readdir("/proc")).filter((x) => /^\d+$/.test(x))) {
    try {
      const stat = await readFile(`/proc/${d}/stat`, "utf8");
      parentOf.set(Number(d), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // gone
    }
  }
  const out = [pid];
  for (let i = 0; i < out.length; i++) for (const [child, parent] of parentOf) if (parent === out[i]) out.push(child);
  return out;
}

/** The server processes forked by the primary `pid` (its children running src/main.ts); 0 for a single process. */
async function workerCount(pid: number): Promise<number> {
  let n = 0;
  for (const p of (await processTree(pid)).slice(1)) {
    try {
      if ((await readFile(`/proc/${p}/cmdline`, "utf8")).includes("src/main.ts")) n++;
    } catch {
      // gone
    }
  }
  return n;
}

/** CPU seconds of the server's processes (primary, workers and their helpers) together. */
async function treeCpuSeconds(pid: number): Promise<number> {
  let s = 0;
  for (const p of await processTree(pid)) s += (await processCpuSeconds(p)) ?? 0;
  return s;
}

interface Row {
  workers: number;
  label: string;
  eventsPerSec: number;
  loop: LoopResult;
  serverCores: number;
  dbCores: number | undefined;
  load: string;
}

async function runOne(workers: number, rows: Row[], problems: string[], failures: string[]): Promise<void> {
  const db = await createThrowawayDatabase(settings.mysqlUrl, "bench_workers");
  let server: Server | undefined;
  const pools: LeanHttpPool[] = [];
  try {
    let dbPid: number | undefined;
    try {
      const [r] = await db.admin.query("SELECT @@pid_file AS f");
      dbPid = Number((await readFile(String((r as { f: string }[])[0]?.f), "utf8")).trim()) || undefined;
    } catch {
      dbPid = undefined;
    }
    const port = await freePort();
    server = await startChildServer(serverEnvironment(process.env, { PORT: String(port), DATABASE_URL: db.url, BILLING_BOOTSTRAP_API_KEY: API_KEY, LOG_LEVEL: "warn", WORKERS: String(workers) }));
    const running = server;
    const pid = running.pid as number;
    progress(`WORKERS=${workers}: server ready on port ${port} (primary pid ${pid})`);
    // /readyz was answered by one worker: wait for all of them to be forked, then for them to
    // listen (a worker starts in 1-3 s; the warm-up follows).
    for (let i = 0; i < 600 && (await workerCount(pid)) < workers; i++) await new Promise((r) => setTimeout(r, 100));
    await new Promise((r) => setTimeout(r, 5000));

    const setup = new LeanHttpPool(port, 1);
    pools.push(setup);
    const subjects: string[] = [];
    for (let i = 0; i < settings.subjects; i++) {
      const res = await setup.request("POST", "/subjects", JSON.stringify({ name: `S${i}`, external_id: `s${i}` }), API_KEY);
      expectStatus200(res);
      subjects.push(`s${i}`);
    }
    expectStatus200(
      await setup.request(
        "POST",
        "/pricing-metrics",
        JSON.stringify({ event_name: "api_call", name: "API calls", unit: "call", dimensions: [], aggregation: { aggregation_type: "sum", value_field: "n" } }),
        API_KEY,
      ),
    );

    const monthStart = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), 1);
    let seq = 0;
    let accepted = 0;
    const event = () => {
      const n = seq++;
      return {
        idempotency_key: `w${workers}-${n}`,
        subject_id: subjects[n % subjects.length],
        event_name: "api_call",
        timestamp: new Date(monthStart + Math.floor(Math.random() * (Date.now() - 60_000 - monthStart))).toISOString(),
        data: { n: "1" },
      };
    };

    const measure = async (label: string, concurrency: number, perRequest: number, call: (pool: LeanHttpPool) => Promise<void>) => {
      const pool = new LeanHttpPool(port, concurrency);
      pools.push(pool);
      const server0 = await treeCpuSeconds(pid);
      const db0 = await processCpuSeconds(dbPid);
      const t0 = performance.now();
      const loop = await closedLoop({
        concurrency,
        warmupSeconds: settings.warmupSeconds,
        seconds: settings.seconds,
        call: () => call(pool),
        gone: () => running.exited() !== undefined,
        window: "completed",
      });
      const wall = (performance.now() - t0) / 1000;
      const server1 = await treeCpuSeconds(pid);
      const db1 = await processCpuSeconds(dbPid);
      const row: Row = {
        workers,
        label,
        eventsPerSec: loop.rps * perRequest,
        loop,
        serverCores: (server1 - server0) / wall,
        dbCores: db0 !== undefined && db1 !== undefined ? (db1 - db0) / wall : undefined,
        load: os
          .loadavg()
          .map((l) => l.toFixed(2))
          .join(" "),
      };
      rows.push(row);
      progress(`WORKERS=${workers} ${label}: ${fmtInt(row.eventsPerSec)} events/s, p50 ${fmt(loop.p50, 1)} ms, ${loop.errors} errors; load ${row.load}`);
      if (loop.errors > 0) failures.push(`WORKERS=${workers} ${label}: ${loop.errors} failed requests: ${[...loop.errorReasons].map(([r, n]) => `${n}× ${r}`).join("; ")}`);
    };

    await measure("single", settings.singleConcurrency, 1, async (pool) => {
      const res = await pool.request("POST", "/usage-events", JSON.stringify(event()), API_KEY);
      expectStatus200(res);
      if (!res.body.includes('"accepted"')) throw new Error(`not accepted: ${res.body.slice(0, 200)}`);
      accepted++;
    });
    await measure(`batch ${settings.batchSize}`, settings.batchConcurrency, settings.batchSize, async (pool) => {
      const events = Array.from({ length: settings.batchSize }, event);
      const res = await pool.request("POST", "/usage-events/batch", JSON.stringify({ events }), API_KEY);
      expectStatus200(res);
      const got = (JSON.parse(res.body) as { accepted: number }).accepted;
      if (got !== events.length) throw new Error(`${got} of ${events.length} accepted`);
      accepted += got;
    });

    const [countRows] = await db.admin.query(`SELECT COUNT(*) AS n FROM \`${db.name}\`.usage_events`);
    const stored = Number((countRows as { n: number }[])[0]?.n);
    if (stored !== accepted) throw new Error(`WORKERS=${workers}: ${accepted} events acknowledged but ${stored} stored`);
    progress(`WORKERS=${workers}: ${fmtInt(stored)} events stored, exactly the acknowledged ones`);
    const stopNote = await running.stop();
    server = undefined;
    problems.push(...running.problems);
    if (!stopNote.includes("exit 0")) failures.push(`WORKERS=${workers}: server ${stopNote}`);
  } finally {
    for (const p of pools) p.close();
    await server?.stop();
    await db.drop();
  }
}

await runBenchmark(async () => {
  const rows: Row[] = [];
  const problems: string[] = [];
  const failures: string[] = [];
  let version = "";
  {
    const probe = await createThrowawayDatabase(settings.mysqlUrl, "bench_workers_probe");
    version = probe.version;
    await probe.drop();
  }
  const loadBefore = os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");
  for (const n of settings.workers) await runOne(n, rows, problems, failures);

  // The ratio is to the mean of the first WORKERS value's runs of the same case (a list such as
  // 1,2,1,2 interleaves runs, so that a machine whose speed drifts shows it).
  const firstRuns = (label: string) => rows.filter((r) => r.label === label && r.workers === settings.workers[0]);
  const base = new Map<string, number>();
  for (const r of rows) if (!base.has(r.label)) base.set(r.label, firstRuns(r.label).reduce((a, x) => a + x.eventsPerSec, 0) / firstRuns(r.label).length);
  const out: string[] = [
    "## Multi-process scaling (WORKERS)",
    "",
    machineLine(version),
    `Load average before: ${loadBefore}. ${settings.seconds} s measured per case after ${settings.warmupSeconds} s of warm-up.`,
    "",
    ...markdownTable(
      ["case", "WORKERS", "events/s", `× WORKERS=${settings.workers[0]} (mean)`, "p50 ms", "p99 ms", "server cores", "MariaDB cores", "load average after"],
      rows.map((r) => [
        r.label,
        String(r.workers),
        fmtInt(r.eventsPerSec),
        fmt(r.eventsPerSec / (base.get(r.label) ?? Number.NaN), 2),
        fmt(r.loop.p50, 1),
        fmt(r.loop.p99, 1),
        fmt(r.serverCores, 2),
        r.dbCores === undefined ? "–" : fmt(r.dbCores, 2),
        r.load,
      ]),
    ),
    "",
    ...(failures.length > 0 ? ["Failures:", ...failures.map((f) => `- ${f}`), ""] : []),
    ...serverReportLines(failures.length === 0 ? "every server stopped cleanly (exit 0)" : "see the failures above", problems),
  ];
  process.stdout.write(`${out.join("\n")}\n`);
  return failures.length > 0 ? 1 : 0;
});
