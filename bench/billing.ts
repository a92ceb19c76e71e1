/**
 * Billing benchmark (not a test), on MariaDB:
 *  A. Closing 10,000 subscriptions that fall due at once: the scheduler's own code path
 *     (BillingEngine.closeDue, as every server runs it), in this process against a fresh
 *     database; each subscription has a fixed and a usage-based rate, a card on file, and usage
 *     events. Reported: subscriptions invoiced per second, and a check of the invoices written.
 *  B. Billing state while ingestion runs: the real server in a child process; one client reads
 *     GET /customer-access/{subject}/billing-state in a loop (p50/p99) while others send REST
 *     batches of 500 usage events; the same reads without ingestion for comparison.
 *
 * Run:  npm run bench:billing   (BENCH_SUBSCRIPTIONS=10000, BENCH_SECONDS=10)
 */
import { type ChildProcess, spawn } from "node:child_process";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import mysql from "mysql2/promise";
import { buildServices } from "../src/app.js";
import { newId, randomBase62 } from "../src/billing/ids.js";
import { createDatabase } from "../src/db/datasource.js";

const MYSQL = (process.env.BENCH_MYSQL_URL || "mysql://root@127.0.0.1:3306").replace(/\/+$/, "");
const SUBSCRIPTIONS = Number(process.env.BENCH_SUBSCRIPTIONS || 10_000);
const SECONDS = Number(process.env.BENCH_SECONDS || 10);
const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

async function withDatabase<T>(fn: (url: string) => Promise<T>): Promise<T> {
  const name = `bench_${randomBase62(8).toLowerCase()}`;
  const c = await mysql.createConnection(`${MYSQL}/`);
  await c.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
  try {
    return await fn(`${MYSQL}/${name}`);
  } finally {
    await c.query(`DROP DATABASE IF EXISTS \`${name}\``);
    await c.end();
  }
}

async function parallel(n: number, total: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < total) await fn(next++);
    }),
  );
}

/** A. The cycle close of many subscriptions at once. */
async function closeBench(url: string) {
  const db = await createDatabase(url, { poolSize: 16 });
  await db.dataSource.initialize();
  await db.dataSource.runMigrations();
  let now = new Date("2026-01-15T00:00:00Z");
  const svc = buildServices(db, () => "http://localhost", () => now);
  const env = newId("env");
  await db.dataSource.query("INSERT INTO environments (id, name, mode, created_at) VALUES (?, ?, 'test', ?)", [env, env, "2026-01-01 00:00:00.000"]);
  const caller = { environmentId: env, mode: "test" as const, keyKind: "secret" as const };
  const clock = await svc.subscriptions.createClock(caller, { name: "bench", frozenTime: now });
  const metric = await svc.metrics.create(caller, { eventName: "api", name: "API", unit: "call", dimensions: [], aggregation: { aggregationType: "sum", valueField: "n" } });
  const card = await svc.cards.create(caller, {
    billingInterval: "monthly",
    name: "Team",
    metadata: {},
    fixedRates: [{ code: "seats", name: "Seats", description: "", price: { priceType: "", amount: { currencyCode: "USD", value: "1000" } } }],
    usageBasedRates: [
      { code: "api", name: "API calls", description: "", pricingMetricId: metric.id, includedUnits: 10, usageBasedRateType: "simple", price: { priceType: "", amount: { currencyCode: "USD", value: "0.5" } }, dimensions: [] },
    ],
  });
  log(`A: creating ${SUBSCRIPTIONS} subjects with a card on file and a subscription each`);
  const t0 = Date.now();
  const subjects: string[] = new Array(SUBSCRIPTIONS);
  await parallel(8, SUBSCRIPTIONS, async (i) => {
    const subject = await svc.subjects.create(caller, { metadata: {}, testClockId: clock.id });
    subjects[i] = subject.id;
    const pm = `pm_card_${randomBase62(22)}`;
    // Setup shortcut: the card a hosted checkout would have saved.
    await svc.engine.store.transaction(async (tx) => {
      await tx.insertPaymentMethod({ id: pm, environmentId: env, subjectId: subject.id, brand: "visa", last4: "4242", behavior: "succeeds", createdAt: now });
      await tx.setSubjectPaymentMethod(subject.id, pm);
    });
    const r = await svc.subscriptions.create(caller, { rateCardId: card.id, subjectId: subject.id, createCheckoutSession: "", fixedRateQuantities: { seats: "2" }, rateMultipliers: {}, metadata: {}, timelineId: "" });
    if (r.kind !== "success") throw new Error("subscription did not start");
  });
  log(`A: setup took ${((Date.now() - t0) / 1000).toFixed(1)} s; sending 5 usage events per subject`);
  for (let i = 0; i < SUBSCRIPTIONS; i += 200) {
    const inputs = subjects.slice(i, i + 200).flatMap((s) =>
      Array.from({ length: 5 }, (_, j) => ({ idempotencyKey: `${s}-${j}`, subjectId: s, eventName: "api", data: { n: "4.5" }, timestamp: `2026-01-2${j}T12:00:00Z` })),
    );
    const out = await svc.ingest.ingest(caller, inputs, () => "");
    if (out.some((o) => o.status !== "accepted")) throw new Error("an event was not accepted");
  }
  const to = new Date("2026-02-15T00:00:00Z");
  await db.dataSource.query("UPDATE test_clocks SET frozen_time = ? WHERE id = ?", ["2026-02-15 00:00:00.000", clock.id]);
  now = to;
  log(`A: closing ${SUBSCRIPTIONS} due cycles`);
  const start = process.hrtime.bigint();
  const closed = await svc.engine.closeDue(to, clock.id, 16);
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const [check] = await db.dataSource.query("SELECT COUNT(*) AS n, SUM(total) AS total, SUM(status = 'paid') AS paid FROM invoices WHERE period_key = 'cycle:1'");
  // Each: seats 2 × 1000 + (22.5 − 10) × 0.5 = 6.25 → 6; 2006 per invoice.
  const expected = 2006 * SUBSCRIPTIONS;
  const ok = Number(check.n) === SUBSCRIPTIONS && Number(check.total) === expected && Number(check.paid) === SUBSCRIPTIONS && closed === SUBSCRIPTIONS;
  await db.dataSource.destroy();
  return { closed, seconds, perSecond: closed / seconds, invoices: Number(check.n), total: String(check.total), paid: Number(check.paid), expected, ok };
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

function request(agent: http.Agent, port: number, key: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request({ host: "127.0.0.1", port, method, path, agent, headers: { "x-api-key": key, "content-type": "application/json" } }, (res) => {
      let data = "";
      res.on("data", (c) => (data += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: data }));
    });
    req.on("error", reject);
    if (payload) req.write(payload);
    req.end();
  });
}

/** B. Billing-state latency with and without ingestion running. */
async function stateBench(url: string) {
  const port = await freePort();
  const key = `sk_test_${randomBase62(24)}`;
  const child: ChildProcess = spawn(process.execPath, ["--max-old-space-size=192", "--import", "tsx", "src/main.ts"], {
    env: { PATH: process.env.PATH, DATABASE_URL: url, PORT: String(port), BILLING_BOOTSTRAP_API_KEY: key, LOG_LEVEL: "warn" },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  try {
    for (let i = 0; ; i++) {
      try {
        if ((await request(agent, port, key, "GET", "/healthz")).status === 200) break;
      } catch {
        // not up yet
      }
      if (i > 200) throw new Error("server did not start");
      await new Promise((r) => setTimeout(r, 100));
    }
    const call = async (method: string, path: string, body?: unknown) => {
      const r = await request(agent, port, key, method, path, body);
      if (r.status !== 200) throw new Error(`${method} ${path}: ${r.status} ${r.body}`);
      return JSON.parse(r.body);
    };
    const metric = await call("POST", "/pricing-metrics", { event_name: "api", name: "API", unit: "call", aggregation: { aggregation_type: "sum", value_field: "n" } });
    const card = await call("POST", "/rate-cards", {
      billing_interval: "monthly",
      name: "Free tier",
      usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: metric.id, included_units: 1000000, price: { amount: { currency_code: "USD", value: "0.01" } } }],
    });
    const subject = await call("POST", "/subjects", { external_id: "reader" });
    await call("POST", "/subscriptions", { subject_id: subject.id, rate_card_id: card.id });
    const writers = await Promise.all(Array.from({ length: 50 }, (_, i) => call("POST", "/subjects", { external_id: `w${i}` })));

    const read = async (seconds: number) => {
      const lat: number[] = [];
      const end = Date.now() + seconds * 1000;
      while (Date.now() < end) {
        const t = process.hrtime.bigint();
        const r = await call("GET", `/customer-access/reader/billing-state`);
        lat.push(Number(process.hrtime.bigint() - t) / 1e6);
        if (!r.has_active_subscription) throw new Error("no active subscription in billing state");
      }
      return lat.sort((a, b) => a - b);
    };
    log("B: billing state without ingestion");
    const idle = await read(Math.max(3, SECONDS / 2));
    log("B: billing state while 2 clients send batches of 500 events");
    let sent = 0;
    let running = true;
    let seq = 0;
    const ingest = Promise.all(
      [0, 1].map(async () => {
        while (running) {
          const events = Array.from({ length: 500 }, (_, i) => ({
            idempotency_key: `k${seq++}`,
            subject_id: i % 10 === 0 ? "reader" : `w${i % 50}`,
            event_name: "api",
            data: { n: "1" },
          }));
          const r = await call("POST", "/usage-events/batch", { events });
          if (r.accepted !== 500) throw new Error(`batch: ${r.accepted} accepted`);
          sent += 500;
        }
      }),
    );
    const t0 = Date.now();
    const busy = await read(SECONDS);
    running = false;
    await ingest;
    const rate = sent / ((Date.now() - t0) / 1000);
    const final = await call("GET", `/customer-access/reader/billing-state`);
    return { idle, busy, rate, used: final.usage_data[0].used_units, writers: writers.length };
  } finally {
    agent.destroy();
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
  }
}

const cpus = os.cpus();
const [{ v: version }] = (await (await mysql.createConnection(`${MYSQL}/`)).query("SELECT VERSION() AS v"))[0] as { v: string }[];
const a = await withDatabase(closeBench);
const b = await withDatabase(stateBench);
const f = (n: number) => n.toFixed(2);
process.stdout.write(`### Billing: closing due cycles, and billing state under ingestion

Machine: ${cpus.length} CPUs (${cpus[0]?.model.trim()}), Node ${process.version}; MariaDB ${version} on the same machine.

| Case | Result |
|---|--:|
| Subscriptions falling due at once | ${a.closed.toLocaleString("en")} |
| Time to invoice them all (scheduler path, 16 in flight, batches of 100) | ${a.seconds.toFixed(2)} s |
| **Subscriptions invoiced per second** | **${Math.round(a.perSecond).toLocaleString("en")}** (goal ≥ 1,000) |
| Invoices written / paid / total checked | ${a.invoices.toLocaleString("en")} / ${a.paid.toLocaleString("en")} / ${a.ok ? "exact" : `MISMATCH (got ${a.total}, expected ${a.expected})`} |

| Billing state (\`GET /customer-access/{id}/billing-state\`) | p50 ms | p99 ms | reads |
|---|--:|--:|--:|
| no ingestion | ${f(pct(b.idle, 50))} | ${f(pct(b.idle, 99))} | ${b.idle.length} |
| while ingesting ${Math.round(b.rate).toLocaleString("en")} events/s (REST batches of 500, 2 clients) | ${f(pct(b.busy, 50))} | ${f(pct(b.busy, 99))} | ${b.busy.length} |
`);
if (!a.ok) process.exit(1);
process.exit(0);
