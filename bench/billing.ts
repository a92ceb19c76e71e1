/**
 * Billing benchmark (not a test), on MariaDB:
 *  A. Closing 10,000 subscriptions that fall due at once: the scheduler's own code path
 *     (BillingEngine.closeDue, as every server runs it), in this process against a fresh
 *     database; each subscription has a fixed and a usage-based rate, a card on file, and usage
 *     events. Reported: subscriptions invoiced per second, and a check of the invoices written.
 *  B. Billing state while ingestion runs: the real server in a child process; one client reads
 *     GET /customer-access/{subject}/billing-state in a loop (p50/p99) while others send REST
 *     batches of 500 usage events; the same reads without ingestion for comparison. Two readers
 *     on the same plan, read in turn: one without credit, one with a credit grant and a
 *     low-balance threshold (its usage is evaluated for credit alerts as it comes), so the cost of
 *     the credit fields (DESIGN §14) is the ratio of their p99s (goal ≤ 1.5×).
 *
 * Run:  npm run bench:billing   (BENCH_SUBSCRIPTIONS=10000, BENCH_SECONDS=10)
 *       BENCH_PARTS=A      only the cycle close (A); BENCH_PARTS=B only billing state (B)
 *       BENCH_CPU_PROF=1   a CPU profile of the close (this process) written to the repo root
 *       BENCH_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof"   node options for B's server child
 * The close also reports its cost per closed subscription (bench/probe.ts): this process's CPU,
 * the SQL round trips and statements it sends, MariaDB's CPU (every client's).
 */
import http from "node:http";
import { buildServices } from "../src/wiring/services.js";
import { newId, randomBase62 } from "../src/billing/ids.js";
import { createDatabase } from "../src/db/datasource.js";
import { costLine, probe } from "./probe.js";
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
const SUBSCRIPTIONS = Math.floor(envNumber("BENCH_SUBSCRIPTIONS", 10_000, 1));
const SECONDS = envNumber("BENCH_SECONDS", 10, 0.1);

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
  const svc = buildServices(
    db,
    () => "http://localhost",
    () => now,
  );
  const env = newId("env");
  // Grace 0: the closes finalize and charge at once, the path this benchmark has always measured
  // (with the default hour, the invoices would wait as drafts and nothing would be charged here).
  await db.dataSource.query("INSERT INTO environments (id, name, mode, created_at, invoice_grace_seconds) VALUES (?, ?, 'test', ?, 0)", [env, env, "2026-01-01 00:00:00.000"]);
  // Its number sequences, as an environment made through the service has them (auth-store.ts).
  await db.dataSource.query("INSERT INTO invoice_sequences (environment_id, kind, last_number) VALUES (?, 'invoice', 0), (?, 'credit_note', 0)", [env, env]);
  const caller = { environmentId: env, mode: "test" as const, keyKind: "secret" as const };
  const clock = await svc.clocks.createClock(caller, { name: "bench", frozenTime: now });
  const metric = await svc.metrics.create(caller, { eventName: "api", name: "API", unit: "call", dimensions: [], aggregation: { aggregationType: "sum", valueField: "n" } });
  const card = await svc.cards.create(caller, {
    billingInterval: "monthly",
    name: "Team",
    metadata: {},
    fixedRates: [{ code: "seats", name: "Seats", description: "", price: { priceType: "", amount: { currencyCode: "USD", value: "1000" } } }],
    usageBasedRates: [
      {
        code: "api",
        name: "API calls",
        description: "",
        pricingMetricId: metric.id,
        includedUnits: 10,
        usageBasedRateType: "simple",
        price: { priceType: "", amount: { currencyCode: "USD", value: "0.5" } },
        dimensions: [],
      },
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
    await svc.engine.stores.transaction(async (tx) => {
      await tx.insertPaymentMethod({ id: pm, environmentId: env, subjectId: subject.id, brand: "visa", last4: "4242", behavior: "succeeds", createdAt: now });
      await tx.setSubjectPaymentMethod(subject.id, pm, env);
    });
    const r = await svc.subscriptions.create(caller, {
      rateCardId: card.id,
      subjectId: subject.id,
      createCheckoutSession: "",
      fixedRateQuantities: { seats: "2" },
      rateMultipliers: {},
      metadata: {},
      timelineId: "",
    });
    if (r.kind !== "success") throw new Error("subscription did not start");
  });
  log(`A: setup took ${((Date.now() - t0) / 1000).toFixed(1)} s; sending 5 usage events per subject`);
  for (let i = 0; i < SUBSCRIPTIONS; i += 200) {
    const inputs = subjects
      .slice(i, i + 200)
      .flatMap((s) => Array.from({ length: 5 }, (_, j) => ({ idempotencyKey: `${s}-${j}`, subjectId: s, eventName: "api", data: { n: "4.5" }, timestamp: new Date(`2026-01-2${j}T12:00:00Z`) })));
    const out = await svc.ingest.ingest(caller, inputs, () => "");
    if (out.some((o) => o.status !== "accepted")) throw new Error("an event was not accepted");
  }
  const to = new Date("2026-02-15T00:00:00Z");
  await db.dataSource.query("UPDATE test_clocks SET frozen_time = ? WHERE id = ?", ["2026-02-15 00:00:00.000", clock.id]);
  now = to;
  log(`A: closing ${SUBSCRIPTIONS} due cycles`);
  const { result: closed, cost } = await probe("billing-close", () => svc.engine.closeDue(to, clock.id, 16));
  const seconds = cost.seconds;
  log(`A: ${costLine(cost, closed, "closed subscription").replaceAll("\n", "\n[bench] A: ")}`);
  const [check] = await db.dataSource.query("SELECT COUNT(*) AS n, SUM(total) AS total, SUM(status = 'paid') AS paid FROM invoices WHERE period_key = 'cycle:1'");
  // Each: seats 2 × 1000 + (22.5 − 10) × 0.5 = 6.25 → 6; 2006 per invoice.
  const expected = 2006 * SUBSCRIPTIONS;
  const ok = Number(check.n) === SUBSCRIPTIONS && Number(check.total) === expected && Number(check.paid) === SUBSCRIPTIONS && closed === SUBSCRIPTIONS;
  await db.dataSource.destroy();
  return { closed, seconds, perSecond: closed / seconds, invoices: Number(check.n), total: String(check.total), paid: Number(check.paid), expected, ok, cost };
}

/** B. Billing-state latency with and without ingestion running. */
async function stateBench(url: string) {
  const port = await freePort();
  const key = `sk_test_${randomBase62(24)}`;
  const nodeArgs = (process.env.BENCH_SERVER_NODE_ARGS || "").split(" ").filter(Boolean);
  const server = await startChildServer(serverEnvironment(process.env, { DATABASE_URL: url, PORT: String(port), BILLING_BOOTSTRAP_API_KEY: key, LOG_LEVEL: "warn" }), nodeArgs);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  try {
    const call = async (method: string, path: string, body?: unknown) => {
      const r = await restRequest(agent, port, method, path, body === undefined ? undefined : JSON.stringify(body), key);
      expectStatus200(r);
      return JSON.parse(r.body);
    };
    const metric = await call("POST", "/pricing-metrics", { event_name: "api", name: "API", unit: "call", aggregation: { aggregation_type: "sum", value_field: "n" } });
    const card = await call("POST", "/rate-cards", {
      billing_interval: "monthly",
      name: "Free tier",
      usage_based_rates: [
        { usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: metric.id, included_units: 1000000, price: { amount: { currency_code: "USD", value: "0.01" } } },
      ],
    });
    const subject = await call("POST", "/subjects", { external_id: "reader" });
    await call("POST", "/subscriptions", { subject_id: subject.id, rate_card_id: card.id });
    // The reader with credit: a grant, and a threshold its usage is checked against as it comes.
    const creditor = await call("POST", "/subjects", { external_id: "creditor" });
    await call("POST", "/subscriptions", { subject_id: creditor.id, rate_card_id: card.id });
    await call("POST", "/credit-grants", { subject_id: creditor.id, amount: { currency_code: "USD", value: "100000000" }, category: "promotional" });
    await call("PUT", `/subjects/${creditor.id}/credit-settings`, { currency_code: "USD", low_balance_threshold: { currency_code: "USD", value: "1000" } });
    const writers = await Promise.all(Array.from({ length: 50 }, (_, i) => call("POST", "/subjects", { external_id: `w${i}` })));

    /** Reads both readers' billing state in turn for `seconds`: [without credit, with credit] latencies, sorted. */
    const read = async (seconds: number) => {
      const lat: [number[], number[]] = [[], []];
      const end = Date.now() + seconds * 1000;
      for (let i = 0; Date.now() < end; i++) {
        const t = process.hrtime.bigint();
        const r = await call("GET", `/customer-access/${i % 2 === 0 ? "reader" : "creditor"}/billing-state`);
        lat[i % 2]?.push(Number(process.hrtime.bigint() - t) / 1e6);
        if (!r.has_active_subscription) throw new Error("no active subscription in billing state");
        if (i % 2 === 1 && r.credit_balance[0]?.value !== "100000000") throw new Error("the creditor's balance is not in billing state");
      }
      return lat.map((l) => Float64Array.from(l).sort()) as [Float64Array, Float64Array];
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
            subject_id: i % 10 === 0 ? "reader" : i % 10 === 1 ? "creditor" : `w${i % 50}`,
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
    const final = await call("GET", `/customer-access/creditor/billing-state`);
    return { idle, busy, rate, used: final.usage_data[0].used_units, available: final.available_credit[0]?.value, writers: writers.length, server };
  } finally {
    agent.destroy();
    await server.stop();
  }
}

/** A fresh database for `fn`, dropped afterwards. */
async function withDatabase<T>(fn: (url: string) => Promise<T>): Promise<{ result: T; version: string }> {
  const db = await createThrowawayDatabase(MYSQL);
  try {
    return { result: await fn(db.url), version: db.version };
  } finally {
    await db.drop();
  }
}

await runBenchmark(async () => {
  const parts = process.env.BENCH_PARTS ?? "AB";
  const closed = parts.includes("A") ? await withDatabase(closeBench) : undefined;
  const state = parts.includes("B") ? await withDatabase(stateBench) : undefined;
  const a = closed?.result;
  const b = state?.result;
  const ms = (sorted: Float64Array, p: number) => fmt(percentile(sorted, p), 2);
  const cost = (n: number) => fmt(n / (a?.closed ?? 1), 2);
  const lines = [
    "### Billing: closing due cycles, and billing state under ingestion",
    "",
    machineLine((closed ?? state)?.version ?? ""),
    "",
    ...(a === undefined
      ? []
      : markdownTable(
          ["Case", "Result"],
          [
            ["Subscriptions falling due at once", fmtInt(a.closed)],
            ["Time to invoice them all (scheduler path, 16 in flight, batches of 100)", `${fmt(a.seconds, 2)} s`],
            ["**Subscriptions invoiced per second**", `**${fmtInt(a.perSecond)}** (goal ≥ 1,000)`],
            ["Invoices written / paid / total checked", `${fmtInt(a.invoices)} / ${fmtInt(a.paid)} / ${a.ok ? "exact" : `MISMATCH (got ${a.total}, expected ${a.expected})`}`],
            ["Per closed subscription: CPU of the closing process", `${fmtInt((a.cost.cpuSeconds * 1e6) / a.closed)} µs`],
            ["Per closed subscription: SQL round trips / statements", `${cost(a.cost.sql.roundTrips)} / ${cost(a.cost.sql.statements)}`],
          ],
        )),
    "",
    ...(b === undefined
      ? []
      : [
          ...markdownTable(
            ["Billing state (`GET /customer-access/{id}/billing-state`)", "p50 ms", "p99 ms", "reads"],
            [
              ["no ingestion, subject without credit", ms(b.idle[0], 0.5), ms(b.idle[0], 0.99), fmtInt(b.idle[0].length)],
              ["no ingestion, subject with credit", ms(b.idle[1], 0.5), ms(b.idle[1], 0.99), fmtInt(b.idle[1].length)],
              [`while ingesting ${fmtInt(b.rate)} events/s (REST batches of 500, 2 clients), without credit`, ms(b.busy[0], 0.5), ms(b.busy[0], 0.99), fmtInt(b.busy[0].length)],
              ["the same, subject with credit", ms(b.busy[1], 0.5), ms(b.busy[1], 0.99), fmtInt(b.busy[1].length)],
            ],
          ),
          "",
          `Credit fields' cost (p99 with credit ÷ p99 without, goal ≤ 1.5×): ${fmt(percentile(b.idle[1], 0.99) / percentile(b.idle[0], 0.99), 2)}× at rest, ${fmt(percentile(b.busy[1], 0.99) / percentile(b.busy[0], 0.99), 2)}× while ingesting; the creditor's available credit at the end: ${b.available}.`,
          "",
          ...serverReportLines(await b.server.stop(), b.server.problems),
        ]),
    "",
  ];
  process.stdout.write(lines.join("\n"));
  return a === undefined || a.ok ? 0 : 1;
});
