/**
 * WORKERS=3 (src/cluster.ts): the real server, started as `npm start` does, with three server
 * processes on one port and one MariaDB database. Several clients at once ingest the same
 * idempotency keys (REST batches, REST single events, gRPC single events through @grpc/grpc-js),
 * and one worker is killed mid-run: every acknowledged event is stored exactly once, a key
 * acknowledged again is a duplicate, the summary is the exact sum, the killed worker is started
 * again and the service answers throughout; SIGTERM stops all of it cleanly.
 */
import { type ChildProcess, spawn } from "node:child_process";
import http from "node:http";
import * as grpc from "@grpc/grpc-js";
import { grpcPackage } from "../helpers/grpc-package.js";
import { createTestDatabase, withDatabase } from "../helpers/db.js";
import { mysqlOnly } from "../helpers/mysql-only.js";
import { freePort } from "../helpers/server.js";

const WORKERS = 3;
const KEY = "sk_test_workersWORKERSworkers01";
/** Distinct idempotency keys; each client sends (some of) them, in its own order. */
const KEYS = 1200;

const pkg = grpcPackage(["billing/v1/usage_event_service.proto", "grpc/health/v1/health.proto"], { enums: String, defaults: true, oneofs: true });
// biome-ignore lint: generated client methods are untyped
type Untyped = grpc.Client & Record<string, any>;

interface LogLine {
  msg: string;
  level: string;
  worker?: number;
  pid?: number;
  [k: string]: unknown;
}

/** The primary's and workers' JSON log lines as they arrive; `until` waits for one that matches. */
class Logs {
  readonly lines: LogLine[] = [];
  private waiters: { match: (l: LogLine) => boolean; resolve: (l: LogLine) => void }[] = [];
  constructor(child: ChildProcess) {
    let rest = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      const parts = (rest + chunk.toString()).split("\n");
      rest = parts.pop() ?? "";
      for (const text of parts) {
        let line: LogLine;
        try {
          line = JSON.parse(text);
        } catch {
          line = { msg: text, level: "raw" };
        }
        this.lines.push(line);
        const [met, waiting] = [this.waiters.filter((w) => w.match(line)), this.waiters.filter((w) => !w.match(line))];
        this.waiters = waiting;
        for (const w of met) w.resolve(line);
      }
    });
  }
  until(match: (l: LogLine) => boolean, timeoutMs: number, what: string): Promise<LogLine> {
    const seen = this.lines.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(
              `no log line "${what}" within ${timeoutMs} ms; last lines:\n${this.lines
                .slice(-10)
                .map((l) => JSON.stringify(l))
                .join("\n")}`,
            ),
          ),
        timeoutMs,
      );
      this.waiters.push({
        match,
        resolve: (l) => {
          clearTimeout(timer);
          resolve(l);
        },
      });
    });
  }
}

/** The event of key i: the same payload whichever client sends it. */
function event(i: number, start: number) {
  return {
    idempotency_key: `k${i}`,
    subject_id: "heavy",
    event_name: "usage",
    timestamp: new Date(start + i * 1000).toISOString(),
    data: { n: `${(i % 97) + 1}.${String(i % 100).padStart(2, "0")}` },
  };
}
/** The value of key i in hundredths (exact). */
const cents = (i: number) => BigInt(((i % 97) + 1) * 100 + (i % 100));

function shuffled(n: number): number[] {
  const a = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j] as number, a[i] as number];
  }
  return a;
}

mysqlOnly(`mysql: WORKERS=${WORKERS} on one port and one database: concurrent overlapping ingest stored exactly once, a killed worker started again, SIGTERM stops all`, async (t) => {
  t.timeout(600_000);
  const db = await createTestDatabase("mysql");
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  // LOG_LEVEL=info: the primary's lines (workers listening, a worker started again) are info and error.
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    env: { ...process.env, WORKERS: String(WORKERS), PORT: String(port), DATABASE_URL: db.url, BILLING_BOOTSTRAP_API_KEY: KEY, LOG_LEVEL: "info" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  const logs = new Logs(child);
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  const grpcClients: grpc.Client[] = [];
  try {
    await logs.until((l) => l.msg === "listening" && l.workers === WORKERS, 300_000, "listening");
    const workerPids = new Map(logs.lines.filter((l) => l.msg === "worker listening").map((l) => [l.worker, l.pid]));
    t.is(workerPids.size, WORKERS);
    t.is(logs.lines.filter((l) => l.msg === "migrations applied").length, 1, "the migrations ran once, in the primary");

    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${url}${path}`, { method, headers: { "content-type": "application/json", "x-api-key": KEY }, body: body === undefined ? undefined : JSON.stringify(body) });
      // biome-ignore lint: loosely typed JSON answers
      return { status: res.status, body: (await res.json()) as any };
    };
    const subject = await call("POST", "/subjects", { name: "Heavy user", external_id: "heavy" });
    t.is(subject.status, 200);
    const metric = await call("POST", "/pricing-metrics", { event_name: "usage", name: "usage", unit: "unit", dimensions: [], aggregation: { aggregation_type: "sum", value_field: "n" } });
    t.is(metric.status, 200);
    const start = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 3_600_000;

    // Per key: acknowledged outcomes; requests whose answer never came (the killed worker's).
    const accepted = new Array<number>(KEYS).fill(0);
    const duplicate = new Array<number>(KEYS).fill(0);
    const other: string[] = [];
    let unanswered = 0;
    /** The keys of the requests whose answer never came: a worker killed after their commit leaves them stored, unacknowledged. */
    const lostKeys = new Set<number>();
    /** Retries `attempt` until it is answered (a request the killed worker held gets no answer). */
    const acknowledged = async <T>(keys: number[], attempt: () => Promise<T | undefined>): Promise<T> => {
      for (let i = 0; ; i++) {
        try {
          const r = await attempt();
          if (r !== undefined) return r;
        } catch (err) {
          // A refusal is the test's failure; a lost connection (the killed worker's) is retried.
          if ((err as { fatal?: boolean }).fatal) throw err;
          unanswered++;
          for (const k of keys) lostKeys.add(k);
        }
        if (i > 200) throw new Error("never acknowledged");
        await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
      }
    };
    const count = (i: number, status: string) => {
      if (status === "accepted") accepted[i] = (accepted[i] ?? 0) + 1;
      else if (status === "duplicate") duplicate[i] = (duplicate[i] ?? 0) + 1;
      else other.push(`k${i}: ${status}`);
    };
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${url}${path}`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": KEY }, body: JSON.stringify(body) });
      // biome-ignore lint: loosely typed JSON answers
      const json = (await res.json()) as any;
      if (res.status === 503) return undefined; // admission: try again
      if (res.status !== 200) throw Object.assign(new Error(`${path} answered ${res.status}: ${JSON.stringify(json)}`), { fatal: true });
      return json;
    };
    const fatal: unknown[] = [];
    const guard = (p: Promise<void>) => p.catch((e) => void fatal.push(e));

    let batchesSent = 0;
    const batchClient = async () => {
      const order = shuffled(KEYS);
      for (let at = 0; at < order.length; at += 40) {
        const part = order.slice(at, at + 40);
        const r = await acknowledged(part, () => post("/usage-events/batch", { events: part.map((i) => event(i, start)) }));
        for (const [n, i] of part.entries()) count(i, r.results[n].status);
        batchesSent++;
      }
    };
    const singleClient = async () => {
      for (const i of shuffled(KEYS).slice(0, 250)) {
        const r = await acknowledged([i], () => post("/usage-events", event(i, start)));
        count(i, r.status);
      }
    };
    const grpcClient = async () => {
      const c = new pkg.billing.v1.UsageEventService(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as Untyped;
      grpcClients.push(c);
      const md = new grpc.Metadata();
      md.set("x-api-key", KEY);
      for (const i of shuffled(KEYS).slice(0, 150)) {
        const e = event(i, start);
        const req = { ...e, timestamp: { seconds: String(Math.floor(Date.parse(e.timestamp) / 1000)), nanos: 0 } };
        const r = await acknowledged([i], () =>
          new Promise<{ status: string } | undefined>((resolve, reject) =>
            c.CreateUsageEvent(req, md, { deadline: Date.now() + 30_000 }, (err: grpc.ServiceError | null, res: { status: string }) => {
              if (!err) resolve(res);
              else if (err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.DEADLINE_EXCEEDED || err.code === grpc.status.INTERNAL) reject(err);
              else reject(Object.assign(err, { fatal: true }));
            }),
          ).catch((err) => {
            if ((err as { fatal?: boolean }).fatal) throw Object.assign(new Error(`gRPC: ${err.message}`), { fatal: true });
            throw err;
          }),
        );
        count(i, r.status);
      }
    };
    // One worker killed once a third of the batches are in.
    const victim = 1;
    const killed = (async () => {
      while (batchesSent < (4 * KEYS) / 40 / 3) await new Promise((r) => setTimeout(r, 20));
      process.kill(workerPids.get(victim) as number, "SIGKILL");
      const restarted = await logs.until((l) => l.msg === "worker exited; starting it again" && l.worker === victim, 30_000, "worker exited");
      t.is(restarted.signal, "SIGKILL");
      // The others answer meanwhile (on a new connection: fetch's pool may still hold an idle
      // keep-alive socket to the killed worker, which fails as "other side closed"); then the
      // new one listens.
      const health = await new Promise<number>((resolve, reject) => http.get(`${url}/healthz`, { agent: false }, (res) => resolve(res.resume().statusCode ?? 0)).on("error", reject));
      t.is(health, 200);
      const again = await logs.until((l) => l.msg === "worker listening" && l.worker === victim && l.pid !== workerPids.get(victim), 300_000, "worker listening again");
      t.not(again.pid, workerPids.get(victim));
    })();
    await Promise.all([...[0, 1, 2, 3].map(() => guard(batchClient())), ...[0, 1].map(() => guard(singleClient())), guard(grpcClient()), killed]);
    t.deepEqual(fatal, []);
    t.deepEqual(other, [], "every answer is accepted or duplicate");

    // Exactly once: no key acknowledged as accepted twice; every key stored once.
    t.deepEqual(
      accepted.flatMap((n, i) => (n > 1 ? [`k${i}: ${n}`] : [])),
      [],
      "no key accepted twice",
    );
    const stored = await withDatabase(db.url, async (d) => (await d.dataSource.query("SELECT COUNT(*) AS n, COUNT(DISTINCT idempotency_key) AS k FROM usage_events"))[0]);
    t.deepEqual([Number(stored.n), Number(stored.k)], [KEYS, KEYS]);
    // A key never answered "accepted" was committed by a request whose answer was lost with its worker.
    // (A lost batch carries 40 keys: the keys are what is checked, not a count of requests.)
    const neverAccepted = accepted.flatMap((n, i) => (n === 0 ? [i] : []));
    t.deepEqual(
      neverAccepted.filter((i) => !lostKeys.has(i)).map((i) => `k${i}`),
      [],
      `${neverAccepted.length} keys never acknowledged as accepted, ${unanswered} requests unanswered (${lostKeys.size} keys in them)`,
    );
    const sent = 4 * KEYS + 2 * 250 + 150;
    t.is(accepted.reduce((a, b) => a + b, 0) + duplicate.reduce((a, b) => a + b, 0), sent, "one acknowledged outcome per event sent");
    t.log(`${KEYS} keys, ${sent} events sent; ${unanswered} requests unanswered (the killed worker's), retried`);

    // The summary is the exact sum of the keys' values, whichever worker answers.
    const total = Array.from({ length: KEYS }, (_, i) => cents(i)).reduce((a, b) => a + b, 0n);
    const expected = `${total / 100n}${
      total % 100n === 0n
        ? ""
        : `.${String(total % 100n)
            .padStart(2, "0")
            .replace(/0$/, "")}`
    }`;
    for (let i = 0; i < WORKERS * 2; i++) {
      const summary = await call("POST", `/pricing-metrics/${metric.body.id}/summary`, { subject_id: "heavy", period: { start: new Date(start).toISOString(), end: new Date().toISOString() } });
      t.is(summary.status, 200);
      t.is(summary.body[0]?.value, expected);
    }

    // gRPC health through the shared port.
    const health = new pkg.grpc.health.v1.Health(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as Untyped;
    grpcClients.push(health);
    const status = await new Promise<string>((resolve, reject) => health.Check({ service: "" }, (err: Error | null, res: { status: string }) => (err ? reject(err) : resolve(res.status))));
    t.is(status, "SERVING");

    child.kill("SIGTERM");
    t.is(await exited, 0, "the primary exits 0 once every worker has stopped");
    t.is(logs.lines.filter((l) => l.msg === "worker stopped").length, WORKERS);
  } finally {
    for (const c of grpcClients) c.close();
    if (child.exitCode === null) child.kill("SIGKILL");
    await exited;
    await db.drop();
  }
});
