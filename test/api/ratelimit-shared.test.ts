/**
 * Rate limits shared across servers (issue 37, src/ratelimit-redis.ts): two server processes
 * (`src/main.ts`, started as children) on one database and one Redis. With RATE_LIMIT_REDIS_URL a
 * key gets its limit across both together; without it each server gives the key its own limit.
 * A Redis that goes away mid-test (one this test starts on a port of its own; the machine's
 * shared Redis is never stopped) leaves the requests served, each server limiting keys alone,
 * the outage logged once; started again, the limits are shared again.
 *
 * Durations are never asserted: the time a run took only bounds how many tokens could have come
 * back meanwhile (RATE_LIMIT_API_RPS=1), so "about the burst, not twice it" is checked as at most
 * the burst plus one token a second of the run.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import test from "ava";
import { reasonOf, rest } from "../helpers/clients.js";
import { STORES, type TestDatabase, createTestDatabase } from "../helpers/db.js";
import { seedKeys, freePort } from "../helpers/server.js";

/** The machine's Redis (scripts/test-prerequisites.sh), shared with other runs: each test has its own key prefix. */
const REDIS_URL = process.env.TEST_REDIS_URL || "redis://127.0.0.1:6379";
const ONE_STORE = STORES.includes("sqlite") ? "sqlite" : (STORES[0] ?? "sqlite");
const OUTAGE = "rate limits: Redis does not answer; each server limits keys alone until it does";
const BACK = "rate limits: Redis answers again; limits are shared across servers";
const SHARED = "rate limits: shared through Redis";

const until = async (what: () => boolean | Promise<boolean>) => {
  while (!(await what())) await new Promise((r) => setTimeout(r, 100));
};

/** A server process (`npm start`'s entry) on `databaseUrl`, and its JSON log lines. */
class Server {
  readonly lines: { msg: string }[] = [];
  private readonly child: ChildProcess;
  constructor(
    readonly port: number,
    databaseUrl: string,
    env: Record<string, string>,
  ) {
    this.child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
      env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", DATABASE_URL: databaseUrl, LOG_LEVEL: "info", SCHEDULER_INTERVAL_MS: "0", WEBHOOK_DELIVERY_INTERVAL_MS: "0", ...env },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let partial = "";
    this.child.stderr?.on("data", (chunk: Buffer) => {
      const parts = (partial + chunk.toString()).split("\n");
      partial = parts.pop() ?? "";
      for (const text of parts) {
        try {
          this.lines.push(JSON.parse(text));
        } catch {
          this.lines.push({ msg: text });
        }
      }
    });
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  count(msg: string): number {
    return this.lines.filter((l) => l.msg === msg).length;
  }

  async started(): Promise<this> {
    await until(() => this.count("listening") > 0 || this.child.exitCode !== null);
    if (this.child.exitCode !== null) throw new Error(`server exited: ${this.lines.map((l) => l.msg).join("\n")}`);
    return this;
  }

  stop(): Promise<void> {
    if (this.child.exitCode !== null) return Promise.resolve();
    const exited = new Promise<void>((r) => this.child.once("exit", () => r()));
    this.child.kill("SIGTERM");
    return exited;
  }
}

/** A Redis of the test's own on a free port, without persistence; stopped by kill. */
class OwnRedis {
  private child: ChildProcess | undefined;
  private readonly dir = mkdtempSync(join(tmpdir(), "redis-"));
  constructor(readonly port: number) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    this.child = spawn("redis-server", ["--port", String(this.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", this.dir], { stdio: "ignore" });
    await until(() => answers(this.port));
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise<void>((r) => child.once("exit", () => r()));
    child.kill("SIGKILL");
    await exited;
  }

  async remove(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Whether a Redis answers PING on `port`. */
function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.once("data", (d) => done(d.toString().startsWith("+PONG")));
  });
}

interface Run {
  /** Each call's status, in order (calls go to the servers in turn). */
  statuses: number[];
  allowed: number;
  /** Calls refused, by server URL. */
  refusedBy: Map<string, number>;
  /** How long the run took (s): bounds the tokens that came back meanwhile. */
  seconds: number;
}

/** `calls` GET /subjects with `key`, to the servers in turn, one after another. */
async function hammer(servers: Server[], key: string, calls: number, t: { is: (a: unknown, b: unknown, m?: string) => void }): Promise<Run> {
  const started = performance.now();
  const run: Run = { statuses: [], allowed: 0, refusedBy: new Map(), seconds: 0 };
  for (let i = 0; i < calls; i++) {
    const server = servers[i % servers.length] as Server;
    const r = await rest(server.url, "GET", "/subjects", key);
    run.statuses.push(r.status);
    if (r.status === 200) run.allowed++;
    else {
      t.is(r.status, 429);
      t.is(reasonOf(r.body), "RATE_LIMITED");
      t.is(r.headers.get("retry-after"), "1");
      t.is(r.headers.get("ratelimit-remaining"), "0");
      run.refusedBy.set(server.url, (run.refusedBy.get(server.url) ?? 0) + 1);
    }
  }
  run.seconds = (performance.now() - started) / 1000;
  return run;
}

interface Fixture {
  db: TestDatabase;
  freshKey: () => Promise<string>;
  servers: Server[];
  close: () => Promise<void>;
}

/** A database with keys, and `n` servers on it with `env`. */
async function fixture(n: number, env: Record<string, string>, ready?: string): Promise<Fixture> {
  const db = await createTestDatabase(ONE_STORE);
  const seeded = await seedKeys(db.url);
  const servers: Server[] = [];
  try {
    for (let i = 0; i < n; i++) servers.push(new Server(await freePort(), db.url, { RUN_MIGRATIONS: "false", ...env }));
    await Promise.all(servers.map((s) => s.started()));
    // The connection to Redis is made after the start: until it is ready each server limits alone.
    if (ready) await until(() => servers.every((s) => s.count(ready) > 0));
  } catch (err) {
    await Promise.all(servers.map((s) => s.stop()));
    throw err;
  }
  return {
    db,
    freshKey: () => seeded.freshKey(),
    servers,
    async close() {
      await Promise.all(servers.map((s) => s.stop()));
      await seeded.close();
      await db.drop();
    },
  };
}

const BURST = 20;
const LIMITS = { RATE_LIMIT_API_RPS: "1", RATE_LIMIT_API_BURST: String(BURST) };
/** A loaded machine's Redis may take longer than the default 50 ms; these tests are about sharing, not the bound. */
const PATIENT = { RATE_LIMIT_REDIS_TIMEOUT_MS: "2000" };
const prefix = () => `test:rl:${process.pid}:${Math.random().toString(36).slice(2)}`;

test.serial(`${ONE_STORE}: two servers on one Redis: a key gets its burst across both together, not twice it; two servers without Redis give it twice`, async (t) => {
  const shared = await fixture(2, { ...LIMITS, ...PATIENT, RATE_LIMIT_REDIS_URL: REDIS_URL, RATE_LIMIT_REDIS_PREFIX: prefix() }, SHARED);
  try {
    const key = await shared.freshKey();
    const first = await rest(shared.servers[0]!.url, "GET", "/subjects", key);
    t.is(first.headers.get("ratelimit-limit"), String(BURST));
    t.is(first.headers.get("ratelimit-remaining"), String(BURST - 1));
    const run = await hammer(shared.servers, key, 2 * BURST - 1, t);
    const allowed = run.allowed + 1;
    t.true(
      run.statuses.slice(0, BURST - 1).every((s) => s === 200),
      "the burst passes",
    );
    t.true(allowed <= BURST + Math.ceil(run.seconds) + 1, `${allowed} served in ${run.seconds} s: the burst and what came back meanwhile`);
    t.true(allowed < 2 * BURST);
    for (const s of shared.servers) t.true((run.refusedBy.get(s.url) ?? 0) > 0, `${s.url} refuses the key too`);
    t.is(shared.servers[0]!.count(OUTAGE) + shared.servers[1]!.count(OUTAGE), 0);
  } finally {
    await shared.close();
  }

  const alone = await fixture(2, LIMITS);
  try {
    const run = await hammer(alone.servers, await alone.freshKey(), 2 * BURST, t);
    t.is(run.allowed, 2 * BURST, "each server its own burst");
  } finally {
    await alone.close();
  }
});

test.serial(`${ONE_STORE}: Redis gone mid-test: requests still served, each server limits alone, the outage logged once; Redis back: shared again`, async (t) => {
  const redis = new OwnRedis(await freePort());
  await redis.start();
  const { servers, freshKey, close } = await fixture(2, { ...LIMITS, ...PATIENT, RATE_LIMIT_REDIS_URL: redis.url, RATE_LIMIT_REDIS_PREFIX: prefix() }, SHARED);
  try {
    const before = await hammer(servers, await freshKey(), 2 * BURST, t);
    t.true(before.allowed <= BURST + Math.ceil(before.seconds) + 1, "shared");

    await redis.kill();
    await until(() => servers.every((s) => s.count(OUTAGE) > 0));
    const key = await freshKey();
    const during = await hammer(servers, key, 2 * BURST, t);
    t.is(during.allowed, 2 * BURST, "served: each server's own burst");
    for (const s of servers) {
      // The per-server limit still holds: calls until refused (a token a second comes back).
      let status = 200;
      for (let i = 0; i < 20 && status === 200; i++) status = (await rest(s.url, "GET", "/subjects", key)).status;
      t.is(status, 429, `${s.url} limits the key alone`);
      t.is(s.count(OUTAGE), 1, "logged once, not per request");
    }

    await redis.start();
    await until(() => servers.every((s) => s.count(BACK) > 0));
    const after = await hammer(servers, await freshKey(), 2 * BURST, t);
    t.true(after.allowed <= BURST + Math.ceil(after.seconds) + 1, "shared again");
    for (const s of servers) t.is(s.count(OUTAGE), 1);
  } finally {
    await close();
    await redis.remove();
  }
});

test(`a server pointed at a port where no Redis listens starts, serves and limits keys alone`, async (t) => {
  const { servers, freshKey, close } = await fixture(1, { ...LIMITS, RATE_LIMIT_REDIS_URL: `redis://127.0.0.1:${await freePort()}`, RATE_LIMIT_REDIS_PREFIX: prefix() });
  try {
    const server = servers[0] as Server;
    const run = await hammer(servers, await freshKey(), BURST + 5, t);
    t.true(run.statuses.slice(0, BURST).every((s) => s === 200));
    t.true(run.allowed <= BURST + Math.ceil(run.seconds) + 1, "limited past the burst");
    await until(() => server.count(OUTAGE) > 0);
    t.is(server.count(OUTAGE), 1);
    // /metrics counts the outage and the calls decided by the server's own bucket.
    const metrics = await (await fetch(`http://127.0.0.1:${server.port}/metrics`)).text();
    t.regex(metrics, /^billing_rate_limit_redis_outages_total 1$/m);
    const fallbacks = Number(/^billing_rate_limit_redis_fallbacks_total (\d+)$/m.exec(metrics)?.[1]);
    t.true(fallbacks >= BURST, `fallbacks ${fallbacks}`);
  } finally {
    await close();
  }
});
