/**
 * unique_count benchmark (not a test), on MariaDB: `GET /customer-access/{id}/billing-state` for
 * a subject with 1,000,000 events in its current period on a unique_count rate, beside a subject
 * with as many on a sum rate, in the same run against the same server and database.
 *
 * Setup through the API (the real server in a child process): a test clock at the period's start,
 * two metrics (unique_count of `user` over "visit", sum of `n` over "call"), a card with one rate
 * each, a subject on each. Then the events are written straight into the tables, as ingest
 * writes them (usage_events, the hourly and minute totals, the distinct values: the service's own
 * functions make the rows), spread evenly over the period: "visit" events name one of
 * BENCH_UNIQUE_USERS users at random (seeded). The clock moves to the period's last hour. Reads:
 * sequential, one client, the two subjects in turn (A B A B phases), each answer checked against
 * the exact distinct count and sum; the unique_count subject both as billing state reads it again
 * with no new event (its kept value, checked against the period's event count) and with an event
 * landing in its period before each read (the kept values brought up to date with it). The report gives the load average: the
 * machine is shared.
 *
 * Run:  npx tsx bench/unique-count.ts   (BENCH_UNIQUE_EVENTS=1000000, BENCH_UNIQUE_USERS=20000,
 *       BENCH_SECONDS=5 per phase, 4 phases)
 */
import http from "node:http";
import os from "node:os";
import mysql from "mysql2/promise";
import { type Contribution, contributionsOf, mergeContributions } from "../src/billing/metering/events.js";
import { type ValueMark, mergeMarks, valueMarksOf } from "../src/billing/metering/unique.js";
import type { PricingMetric } from "../src/billing/catalog/types.js";
import { newId, randomBase62 } from "../src/billing/ids.js";
import { dbTimeOfMs } from "../src/db/raw.js";
import { markStatements } from "../src/db/stores/unique-sql.js";
import { rollupStatements } from "../src/db/stores/usage-sql.js";
import {
  createThrowawayDatabase,
  envNumber,
  expectStatus200,
  fmt,
  fmtInt,
  freePort,
  machineLine,
  markdownTable,
  percentile,
  progress as log,
  restRequest,
  runBenchmark,
  serverEnvironment,
  serverReportLines,
  startChildServer,
} from "./lib.js";

const MYSQL = process.env.BENCH_MYSQL_URL || "mysql://root@127.0.0.1:3306";
const EVENTS = Math.floor(envNumber("BENCH_UNIQUE_EVENTS", 1_000_000, 1));
const USERS = Math.floor(envNumber("BENCH_UNIQUE_USERS", 20_000, 1));
const SECONDS = envNumber("BENCH_SECONDS", 5, 0.1);
const GOAL_P99_MS = 50;
const PERIOD_START = Date.parse("2026-01-03T10:00:00Z");
const PERIOD_END = Date.parse("2026-02-03T10:00:00Z");

/** A seeded generator (mulberry32: the same users every run), uniform in [0, 1). */
function mulberry32(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Writes `count` events of one subject straight into the tables, as ingest would: returns the exact distinct count and sum. */
async function seed(conn: mysql.Connection, environmentId: string, metric: PricingMetric, subjectId: string, count: number, dataOf: (i: number) => Record<string, string>) {
  const step = (PERIOD_END - PERIOD_START) / count;
  const created = dbTimeOfMs(Date.now());
  const users = new Set<string>();
  let sum = 0;
  const CHUNK = 20_000;
  for (let from = 0; from < count; from += CHUNK) {
    const rows: unknown[][] = [];
    const contributions: Contribution[] = [];
    const marks: ValueMark[] = [];
    for (let i = from; i < Math.min(count, from + CHUNK); i++) {
      const at = PERIOD_START + Math.floor(i * step);
      const data = dataOf(i);
      if (data.user !== undefined) users.add(data.user);
      if (data.n !== undefined) sum += Number(data.n);
      const e = { eventName: metric.eventName, data, occurredAt: at, idempotencyKey: `${subjectId}-${i}` };
      rows.push([newId("ue"), environmentId, e.idempotencyKey, "f".repeat(64), subjectId, metric.eventName, dbTimeOfMs(at), JSON.stringify(data), created]);
      contributions.push(...contributionsOf([metric], subjectId, e));
      marks.push(...valueMarksOf([metric], subjectId, e));
    }
    for (let k = 0; k < rows.length; k += 1000) {
      const part = rows.slice(k, k + 1000);
      await conn.query(
        `INSERT INTO usage_events (id, environment_id, idempotency_key, fingerprint, subject_id, event_name, occurred_at, data, created_at) VALUES ${part.map(() => "(?, ?, ?, ?, ?, ?, ?, ?, ?)").join(", ")}`,
        part.flat(),
      );
    }
    for (const [sql, params] of rollupStatements("mysql", mergeContributions(contributions))) await conn.query(sql, [...params]);
    for (const [sql, params] of markStatements("mysql", mergeMarks(marks))) await conn.query(sql, [...params]);
    if ((from / CHUNK) % 10 === 0) log(`seeded ${fmtInt(from + rows.length)} of ${fmtInt(count)} events of ${metric.eventName}`);
  }
  return { distinct: users.size, sum };
}

async function main(): Promise<number> {
  const db = await createThrowawayDatabase(MYSQL);
  const port = await freePort();
  const key = `sk_test_${randomBase62(24)}`;
  const server = await startChildServer(serverEnvironment(process.env, { DATABASE_URL: db.url, PORT: String(port), BILLING_BOOTSTRAP_API_KEY: key, LOG_LEVEL: "warn" }));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 2 });
  const conn = await mysql.createConnection({ ...db.connection, database: db.name });
  const conn2 = await mysql.createConnection({ ...db.connection, database: db.name });
  try {
    const call = async (method: string, path: string, body?: unknown) => {
      const r = await restRequest(agent, port, method, path, body === undefined ? undefined : JSON.stringify(body), key);
      expectStatus200(r);
      return JSON.parse(r.body);
    };
    const clock = await call("POST", "/test-clocks", { name: "bench", frozen_time: new Date(PERIOD_START).toISOString() });
    const unique = await call("POST", "/pricing-metrics", { event_name: "visit", name: "Visitors", unit: "user", aggregation: { aggregation_type: "unique_count", value_field: "user" } });
    const summed = await call("POST", "/pricing-metrics", { event_name: "call", name: "Calls", unit: "call", aggregation: { aggregation_type: "sum", value_field: "n" } });
    const rate = (code: string, metric: string) => ({
      usage_based_rate_type: "simple",
      code,
      name: code,
      pricing_metric_id: metric,
      included_units: 0,
      price: { amount: { currency_code: "USD", value: "1" } },
    });
    const subjects: Record<string, string> = {};
    for (const [name, metric] of [
      ["unique", unique.id],
      ["sum", summed.id],
    ] as const) {
      const card = await call("POST", "/rate-cards", { billing_interval: "monthly", name, usage_based_rates: [rate(name, metric)] });
      const subject = await call("POST", "/subjects", { external_id: name, test_clock_id: clock.id });
      await call("POST", "/subscriptions", { subject_id: subject.id, rate_card_id: card.id });
      subjects[name] = subject.id;
    }
    const [[env]] = (await conn.query("SELECT environment_id AS e FROM subjects WHERE id = ?", [subjects.unique])) as unknown as [{ e: string }[]];
    const environmentId = (env as { e: string }).e;
    const asMetric = (m: { id: string; event_name: string }, type: "unique_count" | "sum", field: string): PricingMetric => ({
      id: m.id,
      environmentId,
      eventName: m.event_name,
      name: "",
      unit: "",
      dimensions: [],
      aggregation: { type, valueField: field },
      createdAt: new Date(0),
      archivedAt: null,
    });
    const t0 = Date.now();
    const rand = mulberry32(42);
    // The two subjects at once, on two connections.
    const [u, s] = await Promise.all([
      seed(conn, environmentId, asMetric(unique, "unique_count", "user"), subjects.unique as string, EVENTS, () => ({ user: `user-${Math.floor(rand() * USERS)}` })),
      seed(conn2, environmentId, asMetric(summed, "sum", "n"), subjects.sum as string, EVENTS, (i) => ({ n: String(1 + (i % 3)) })),
    ]);
    const seedSeconds = (Date.now() - t0) / 1000;
    const [[rows]] = (await conn.query("SELECT COUNT(*) AS n FROM usage_unique_values")) as unknown as [{ n: number }[]];
    log(`seeded in ${fmt(seedSeconds, 1)} s; ${fmtInt(Number((rows as { n: number }).n))} distinct-value rows`);
    await call("POST", `/test-clocks/${clock.id}/advance`, { frozen_time: new Date(PERIOD_END - 3_600_000).toISOString() });

    const expected: Record<string, string> = { unique: String(u.distinct), sum: String(s.sum) };
    const latencies: Record<string, number[]> = { unique: [], cold: [], sum: [] };
    let sent = 0;
    /**
     * Reads `name`'s billing state for `seconds`. `cold`: before each read (untimed), one more
     * event of a user already counted lands in the period, so the kept count alone cannot answer
     * and the kept values are brought up to date with it (the value stays the same).
     */
    const read = async (name: "unique" | "sum", seconds: number, keep: boolean, cold = false) => {
      const end = Date.now() + seconds * 1000;
      while (Date.now() < end) {
        if (cold) {
          const event = { idempotency_key: `cold-${sent++}`, subject_id: name, event_name: "visit", timestamp: new Date(PERIOD_END - 7_200_000).toISOString(), data: { user: "user-0" } };
          if ((await call("POST", "/usage-events", event)).status !== "accepted") throw new Error("the cold read's event was not accepted");
        }
        const t = process.hrtime.bigint();
        const r = await call("GET", `/customer-access/${name}/billing-state`);
        const ms = Number(process.hrtime.bigint() - t) / 1e6;
        const used = r.usage_data[0]?.used_units;
        if (used !== expected[name]) throw new Error(`${name}: used_units ${used}, expected ${expected[name]}`);
        if (keep) latencies[cold ? "cold" : name]?.push(ms);
      }
    };
    const loadBefore = os.loadavg()[0] as number;
    log("warm-up");
    await read("unique", 1, false);
    await read("sum", 1, false);
    for (let round = 0; round < 2; round++) {
      for (const [name, cold] of [
        ["unique", false],
        ["sum", false],
        ["unique", true],
      ] as const) {
        log(`billing state of the ${name} subject${cold ? " (an event before each read)" : ""}, ${SECONDS} s`);
        await read(name, SECONDS, true, cold);
      }
    }
    const stats = (name: string) => {
      const sorted = Float64Array.from(latencies[name] ?? []).sort();
      return { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), n: sorted.length };
    };
    const loadAfter = os.loadavg()[0] as number;
    const su = stats("unique");
    const sc = stats("cold");
    const ss = stats("sum");
    const lines = [
      "### unique_count: billing state over 1,000,000 events in the current period",
      "",
      machineLine(db.version),
      `Load average (1 min) when the reads began / ended: ${fmt(loadBefore, 2)} / ${fmt(loadAfter, 2)} (2 CPUs).`,
      "",
      `Events per subject: ${fmtInt(EVENTS)}, evenly over the period ${new Date(PERIOD_START).toISOString()} → ${new Date(PERIOD_END).toISOString()}; the unique subject's from ${fmtInt(USERS)} users at random (${fmtInt(u.distinct)} distinct); ${fmtInt(Number((rows as { n: number }).n))} distinct-value rows; seeded in ${fmt(seedSeconds, 1)} s.`,
      "",
      ...markdownTable(
        ["Billing state (`GET /customer-access/{id}/billing-state`)", "used_units", "p50 ms", "p99 ms", "reads"],
        [
          ["unique_count rate, no new event between reads (the kept value, checked)", expected.unique as string, fmt(su.p50, 2), `**${fmt(su.p99, 2)}** (goal < ${GOAL_P99_MS})`, fmtInt(su.n)],
          ["unique_count rate, an event before each read (brought up to date)", expected.unique as string, fmt(sc.p50, 2), `**${fmt(sc.p99, 2)}** (goal < ${GOAL_P99_MS})`, fmtInt(sc.n)],
          ["sum rate", expected.sum as string, fmt(ss.p50, 2), fmt(ss.p99, 2), fmtInt(ss.n)],
        ],
      ),
      "",
      ...serverReportLines(await server.stop(), server.problems),
      "",
    ];
    process.stdout.write(lines.join("\n"));
    return su.p99 < GOAL_P99_MS && sc.p99 < GOAL_P99_MS ? 0 : 1;
  } finally {
    agent.destroy();
    await server.stop();
    await conn.end();
    await conn2.end();
    await db.drop();
  }
}

await runBenchmark(main);
