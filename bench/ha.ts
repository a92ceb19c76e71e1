/**
 * Servers on one MariaDB and on a three-node Galera cluster (behind HAProxy, one writer: the
 * harness of npm run test:ha, scripts/ha), in one run: with 1, 2 and 3 server processes (each
 * WORKERS=1, requests spread over them in turn), usage ingest (REST batches of BENCH_BATCH_SIZE
 * events, closed loop at BENCH_BATCH_CONCURRENCY) and, at the same time, billing-state reads
 * (one client, back to back) of a subscribed subject. Each case on a fresh database.
 *
 * Run:   npx tsx bench/ha.ts     (needs MariaDB at 127.0.0.1:3306, user root; starts the cluster itself)
 * Env:   BENCH_SERVERS=1,2,3  BENCH_SECONDS=10  BENCH_WARMUP_SECONDS=2  BENCH_BATCH_SIZE=100
 *        BENCH_BATCH_CONCURRENCY=4  BENCH_MYSQL_URL=mysql://root@127.0.0.1:3306
 * Output: progress on stderr; the report (Markdown) on stdout.
 */
import http from "node:http";
import { startCluster } from "../scripts/ha/cluster.js";
import { cleanup } from "../scripts/ha/processes.js";
import { ServiceProcess } from "../scripts/ha/servers.js";
import { randomBase62 } from "../src/billing/ids.js";
import { closedLoop, createThrowawayDatabase, envIntegers, envNumber, fmt, fmtInt, machineLine, markdownTable, progress, restRequest, runBenchmark } from "./lib.js";

const settings = {
  servers: envIntegers("BENCH_SERVERS", "1,2,3"),
  seconds: envNumber("BENCH_SECONDS", 10, 1),
  warmup: envNumber("BENCH_WARMUP_SECONDS", 2, 0),
  batchSize: envNumber("BENCH_BATCH_SIZE", 100, 1),
  batchConcurrency: envNumber("BENCH_BATCH_CONCURRENCY", 4, 1),
  mysqlUrl: process.env.BENCH_MYSQL_URL ?? "mysql://root@127.0.0.1:3306",
};
const KEY = `sk_test_${randomBase62(24)}`;

/** One case: `n` servers on a fresh database of the server at `serverUrl`; its table row. */
async function runCase(label: string, serverUrl: string, n: number, dir: string): Promise<{ row: string[]; version: string }> {
  const db = await createThrowawayDatabase(serverUrl, "bench_ha");
  const servers: ServiceProcess[] = [];
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  try {
    for (let i = 0; i < n; i++) {
      const s = await ServiceProcess.create(`bench-${label.replace(/\W+/g, "-")}-${n}-${i}`, dir, {
        DATABASE_URL: db.url,
        BILLING_BOOTSTRAP_API_KEY: KEY,
        LOG_LEVEL: "warn",
        SCHEDULER_INTERVAL_MS: "0",
      });
      await s.start();
      servers.push(s);
    }
    let next = 0;
    const call = async (method: string, path: string, body?: unknown) => {
      const port = (servers[next++ % servers.length] as ServiceProcess).port;
      const r = await restRequest(agent, port, method, path, body === undefined ? undefined : JSON.stringify(body), KEY);
      if (r.status !== 200) throw new Error(`${method} ${path}: ${r.status}`);
      return JSON.parse(r.body);
    };
    const metric = await call("POST", "/pricing-metrics", { event_name: "api", name: "API", unit: "call", aggregation: { aggregation_type: "sum", value_field: "n" } });
    const card = await call("POST", "/rate-cards", {
      billing_interval: "monthly",
      name: "Usage",
      usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API", pricing_metric_id: metric.id, included_units: 0, price: { amount: { currency_code: "USD", value: "1" } } }],
    });
    const reader = await call("POST", "/subjects", { external_id: "reader" });
    await call("POST", "/subscriptions", { subject_id: reader.id, rate_card_id: card.id });
    for (let w = 0; w < 50; w++) await call("POST", "/subjects", { external_id: `w${w}` });
    let seq = 0;
    const ingest = closedLoop({
      concurrency: settings.batchConcurrency,
      warmupSeconds: settings.warmup,
      seconds: settings.seconds,
      gone: () => false,
      call: async () => {
        const events = Array.from({ length: settings.batchSize }, (_, i) => ({
          idempotency_key: `k${seq++}`,
          subject_id: i % 10 === 0 ? "reader" : `w${i % 50}`,
          event_name: "api",
          data: { n: "1" },
        }));
        await call("POST", "/usage-events/batch", { events });
      },
    });
    const state = closedLoop({
      concurrency: 1,
      warmupSeconds: settings.warmup,
      seconds: settings.seconds,
      gone: () => false,
      call: async () => {
        await call("GET", "/customer-access/reader/billing-state");
      },
    });
    const [i, s] = await Promise.all([ingest, state]);
    return { row: [label, String(n), fmtInt(i.rps * settings.batchSize), fmt(i.p50, 1), fmt(i.p99, 1), fmt(s.p50, 1), fmt(s.p99, 1), String(i.errors + s.errors)], version: db.version };
  } finally {
    agent.destroy();
    for (const s of servers) await s.stop();
    await db.drop();
  }
}

async function main(): Promise<number> {
  const cluster = await startCluster();
  const rows: string[][] = [];
  let version = "";
  for (const [label, url] of [
    ["one MariaDB", settings.mysqlUrl],
    ["Galera, 3 nodes via HAProxy", cluster.url],
  ] as const) {
    for (const n of settings.servers) {
      progress(`${label}: ${n} server(s)`);
      const c = await runCase(label, url, n, cluster.dir);
      rows.push(c.row);
      version ||= c.version;
    }
  }
  await cluster.stop();
  const out = [
    `Servers on one database and on a Galera cluster: ingest in batches of ${settings.batchSize} (${settings.batchConcurrency} clients), billing-state reads (1 client) at the same time; ${settings.seconds} s per case.`,
    "",
    ...markdownTable(["database", "servers", "events/s", "batch p50 ms", "batch p99 ms", "billing-state p50 ms", "billing-state p99 ms", "errors"], rows),
    "",
    machineLine(version),
  ];
  process.stdout.write(`${out.join("\n")}\n`);
  return 0;
}

void runBenchmark(async () => {
  try {
    return await main();
  } finally {
    cleanup();
  }
});
