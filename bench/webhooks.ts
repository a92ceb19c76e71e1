/**
 * Webhook benchmark: how fast events reach a local receiver, and how long after their commit.
 *
 * Phase 1 (lag): an open loop of BENCH_RATE changes a second (POST /subjects, each one
 * `subject.created` event) for BENCH_SECONDS, with a webhook endpoint on a receiver in this
 * process; per event, the lag from its `created_at` (stamped inside the change's transaction,
 * just before the commit) to its arrival at the receiver: p50, p99, max. Also the changes and the
 * deliveries achieved per second.
 * Phase 2 (throughput): the endpoint disabled, BENCH_BACKLOG changes made; then enabled, and the
 * time until every held event arrived: events delivered per second to the receiver.
 *
 * The server runs in a child process against a throw-away MariaDB database; client, receiver,
 * server and MariaDB share the machine. Every event must arrive exactly once, with a valid
 * signature, else the run exits 1.
 *
 * Costs that hold on a loaded machine, per phase: the server's CPU (its process, /proc) per change
 * and per delivery, and MariaDB's statements and commits per change (USER_STATISTICS of a
 * MariaDB user made for the run, with `userstat` switched on for it and back off after), as well
 * as this process's own CPU (client and receiver). The client is lean (raw keep-alive sockets, up
 * to 64; a change due while all 64 are busy waits in the client, and is sent late).
 *
 * Run:   npm run bench:webhooks
 * Env:   BENCH_SECONDS=10  BENCH_RATE=1000  BENCH_BACKLOG=5000
 *        BENCH_DELIVERY_INTERVAL_MS=50      the server's WEBHOOK_DELIVERY_INTERVAL_MS
 *        BENCH_MYSQL_URL=mysql://root@127.0.0.1:3306
 *        BENCH_SERVER_NODE_ARGS=…            node options for the server child only, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"
 */
import { createHmac } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import {
  createThrowawayDatabase,
  envNumber,
  fmt,
  fmtInt,
  freePort,
  LeanHttpConnection,
  machineLine,
  markdownTable,
  percentile,
  processCpuSeconds,
  progress,
  runBenchmark,
  serverEnvironment,
  serverReportLines,
  startChildServer,
} from "./lib.js";

const API_KEY = "sk_test_benchwebhooks0000000000";

/**
 * Open-loop requests over lean keep-alive connections: a free one, else a new one up to `max`,
 * else the request waits in this process for the next free one (as node's http.Agent with
 * maxSockets would), so that the server's admission control does not refuse them.
 */
class OpenLoopClient {
  private readonly free: LeanHttpConnection[] = [];
  private readonly waiting: ((c: LeanHttpConnection) => void)[] = [];
  opened = 0;
  constructor(
    private readonly port: number,
    private readonly max: number,
  ) {}
  async request(method: string, path: string, body?: string, apiKey?: string) {
    let conn = this.free.pop();
    if (!conn && this.opened < this.max) {
      conn = new LeanHttpConnection(this.port);
      this.opened++;
    }
    if (!conn) conn = await new Promise<LeanHttpConnection>((r) => this.waiting.push(r));
    try {
      return await conn.request(method, path, body, apiKey);
    } finally {
      const next = this.waiting.shift();
      if (next) next(conn);
      else this.free.push(conn);
    }
  }
  close(): void {
    for (const c of this.free) c.close();
  }
}

interface Counters {
  serverCpu: number;
  clientCpu: number;
  statements: number;
  commits: number;
  dbCpu: number;
}

async function main(): Promise<number> {
  const seconds = envNumber("BENCH_SECONDS", 10, 1);
  const rate = envNumber("BENCH_RATE", 1000, 1);
  const backlog = envNumber("BENCH_BACKLOG", 5000, 1);
  const interval = envNumber("BENCH_DELIVERY_INTERVAL_MS", 50, 1);
  const db = await createThrowawayDatabase(process.env.BENCH_MYSQL_URL ?? "mysql://root@127.0.0.1:3306", "bench_hooks");
  const arrivals = new Map<string, { at: number; createdAt: number; count: number }>();
  let badSignatures = 0;
  let secret = "";
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const at = Date.now();
      const body = Buffer.concat(chunks).toString("utf8");
      const header = String(req.headers["billing-signature"] ?? "");
      const parts = Object.fromEntries(header.split(",").map((p) => p.split("=", 2) as [string, string]));
      if (createHmac("sha256", secret).update(`${parts.t}.${body}`).digest("hex") !== parts.v1) badSignatures++;
      const e = JSON.parse(body) as { id: string; created_at: string };
      const seen = arrivals.get(e.id);
      if (seen) seen.count++;
      else arrivals.set(e.id, { at, createdAt: Date.parse(e.created_at), count: 1 });
      res.writeHead(200).end("ok");
    });
  });
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
  const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  // A MariaDB user of this run's own, so that its statements can be counted (USER_STATISTICS).
  const user = `${db.name}`.slice(0, 32);
  await db.admin.query(`CREATE USER '${user}'@'%' IDENTIFIED BY ''`);
  await db.admin.query(`GRANT ALL ON \`${db.name}\`.* TO '${user}'@'%'`);
  const [[us]] = (await db.admin.query("SELECT @@GLOBAL.userstat AS v")) as unknown as [{ v: unknown }[]];
  const userstatWas = Number(us?.v) === 1;
  if (!userstatWas) await db.admin.query("SET GLOBAL userstat = 1");
  const dbUrl = new URL(db.url);
  dbUrl.username = user;
  dbUrl.password = "";
  const counters = async (): Promise<Counters> => {
    const [rows] = (await db.admin.query(
      "SELECT SELECT_COMMANDS + UPDATE_COMMANDS + OTHER_COMMANDS AS statements, COMMIT_TRANSACTIONS AS commits, CPU_TIME AS cpu FROM information_schema.USER_STATISTICS WHERE USER = ?",
      [user],
    )) as unknown as [{ statements: unknown; commits: unknown; cpu: unknown }[]];
    const cpu = process.cpuUsage();
    return {
      serverCpu: (await processCpuSeconds(server.pid)) ?? Number.NaN,
      clientCpu: (cpu.user + cpu.system) / 1e6,
      statements: Number(rows[0]?.statements ?? Number.NaN),
      commits: Number(rows[0]?.commits ?? Number.NaN),
      dbCpu: Number(rows[0]?.cpu ?? Number.NaN),
    };
  };
  const costs: string[][] = [];
  const cost = (label: string, a: Counters, b: Counters, n: number, seconds: number) =>
    costs.push([
      label,
      fmtInt(n),
      fmt(((b.serverCpu - a.serverCpu) * 1e6) / n, 0),
      fmt((100 * (b.serverCpu - a.serverCpu)) / seconds, 0),
      fmt(((b.clientCpu - a.clientCpu) * 1e6) / n, 0),
      fmt((b.statements - a.statements) / n, 2),
      fmt(((b.dbCpu - a.dbCpu) * 1e6) / n, 0),
    ]);
  const port = await freePort();
  const server = await startChildServer(
    serverEnvironment(process.env, {
      PORT: String(port),
      DATABASE_URL: dbUrl.toString(),
      BILLING_BOOTSTRAP_API_KEY: API_KEY,
      LOG_LEVEL: "warn",
      SCHEDULER_INTERVAL_MS: "0",
      WEBHOOK_ALLOW_PRIVATE_HOSTS: "true",
      WEBHOOK_DELIVERY_INTERVAL_MS: String(interval),
    }),
    (process.env.BENCH_SERVER_NODE_ARGS ?? "").split(" ").filter(Boolean),
  );
  const client = new OpenLoopClient(port, 64);
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await client.request(method, path, body === undefined ? undefined : JSON.stringify(body), API_KEY);
    if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${res.body}`);
    return JSON.parse(res.body);
  };
  let code = 0;
  const out: string[] = [];
  try {
    const ep = await call("POST", "/webhook-endpoints", { url: hookUrl, event_types: ["subject.created"] });
    secret = ep.secret;

    // Phase 1: BENCH_RATE changes a second, open loop (a request every 1/rate s, whatever the answers).
    progress(`phase 1: ${rate} changes/s for ${seconds} s`);
    const c0 = await counters();
    const started = Date.now();
    const sent: Promise<unknown>[] = [];
    let failedChanges = 0;
    for (let i = 0; i < rate * seconds; i++) {
      const due = started + (i * 1000) / rate;
      const wait = due - Date.now();
      if (wait > 1) await new Promise((r) => setTimeout(r, wait));
      sent.push(call("POST", "/subjects", { name: `s${i}` }).catch(() => failedChanges++));
    }
    await Promise.all(sent);
    const changesDone = Date.now();
    const made = rate * seconds - failedChanges;
    while (arrivals.size < made && Date.now() - changesDone < 120_000) await new Promise((r) => setTimeout(r, 50));
    const c1 = await counters();
    const lastArrival = Math.max(...[...arrivals.values()].map((a) => a.at));
    cost(`open loop: ${rate} changes/s asked, each change and its delivery`, c0, c1, made, (Date.now() - started) / 1000);
    const lags = Float64Array.from([...arrivals.values()].map((a) => a.at - a.createdAt)).sort();
    const dupes1 = [...arrivals.values()].filter((a) => a.count > 1).length;
    const phase1 = {
      changesPerSecond: made / ((changesDone - started) / 1000),
      deliveredPerSecond: arrivals.size / ((lastArrival - started) / 1000),
      p50: percentile(lags, 0.5),
      p99: percentile(lags, 0.99),
      max: lags[lags.length - 1] ?? Number.NaN,
      missing: made - arrivals.size,
    };

    // Phase 2: a backlog held while the endpoint is disabled, then released.
    progress(`phase 2: a backlog of ${backlog} events`);
    await call("PUT", `/webhook-endpoints/${ep.id}`, { status: "disabled" });
    const before = arrivals.size;
    const c2 = await counters();
    const held0 = Date.now();
    const pending: Promise<unknown>[] = [];
    for (let i = 0; i < backlog; i++) {
      pending.push(call("POST", "/subjects", { name: `b${i}` }));
      if (pending.length >= 32) await Promise.all(pending.splice(0));
    }
    await Promise.all(pending);
    const c3 = await counters();
    cost("backlog made (32 at a time), endpoint disabled: each change", c2, c3, backlog, (Date.now() - held0) / 1000);
    const released = Date.now();
    await call("PUT", `/webhook-endpoints/${ep.id}`, { status: "enabled" });
    while (arrivals.size < before + backlog && Date.now() - released < 300_000) await new Promise((r) => setTimeout(r, 20));
    const c4 = await counters();
    const drained = Math.max(...[...arrivals.values()].map((a) => a.at));
    cost("backlog released: each delivery", c3, c4, backlog, (Date.now() - released) / 1000);
    const phase2 = { perSecond: (arrivals.size - before) / ((drained - released) / 1000), missing: before + backlog - arrivals.size };
    const dupes = [...arrivals.values()].filter((a) => a.count > 1).length;

    out.push("## Webhooks: delivery lag and throughput to a local receiver", "");
    out.push(machineLine(db.version));
    out.push("Load generator, receiver (this process), server (a child process) and MariaDB share these CPUs.");
    out.push(`Server: WEBHOOK_DELIVERY_INTERVAL_MS=${interval}, otherwise defaults (up to 200 deliveries claimed at once, sent in parallel, recorded in one transaction).`, "");
    out.push(
      ...markdownTable(
        ["Phase", "Changes/s", "Delivered/s", "Lag p50 ms", "Lag p99 ms", "Lag max ms", "Missing", "Failed changes"],
        [
          [
            `open loop, ${rate} changes/s for ${seconds} s`,
            fmtInt(phase1.changesPerSecond),
            fmtInt(phase1.deliveredPerSecond),
            fmt(phase1.p50, 0),
            fmt(phase1.p99, 0),
            fmt(phase1.max, 0),
            String(phase1.missing),
            String(failedChanges),
          ],
          [`backlog of ${backlog} released at once`, "–", fmtInt(phase2.perSecond), "–", "–", "–", String(phase2.missing), "0"],
        ],
      ),
      "",
    );
    out.push(`Duplicates: ${dupes1} in phase 1, ${dupes} in all; bad signatures: ${badSignatures}. Client connections opened: ${client.opened}.`, "");
    out.push(...markdownTable(["Costs", "Count", "Server CPU µs each", "Server CPU %", "Client+receiver CPU µs each", "SQL statements each", "MariaDB CPU µs each"], costs), "");
    if (phase1.missing > 0 || phase2.missing > 0 || badSignatures > 0 || dupes > 0) code = 1;
  } finally {
    client.close();
    const note = await server.stop();
    receiver.closeAllConnections();
    await new Promise((r) => receiver.close(r));
    if (!userstatWas) await db.admin.query("SET GLOBAL userstat = 0").catch(() => {});
    await db.admin.query(`DROP USER IF EXISTS '${user}'@'%'`).catch(() => {});
    await db.drop();
    out.push(...serverReportLines(note, server.problems));
  }
  process.stdout.write(`${out.join("\n")}\n`);
  return code;
}

await runBenchmark(main);
