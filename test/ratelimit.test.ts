/**
 * The token bucket on a clock the test moves (src/ratelimit.ts), and the same bucket shared in
 * Redis (src/ratelimit-redis.ts): the limiter's answers mapped to the bucket's, the script on the
 * machine's Redis, and this server's own bucket when Redis does not answer.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { Redis } from "ioredis";
import type { Logger } from "../src/log.js";
import { RateLimiter, effectiveLimits } from "../src/ratelimit.js";
import { SharedRateLimiter, verdictOf } from "../src/ratelimit-redis.js";
import { freePort } from "./helpers/server.js";

test("a bucket: the burst at once, then the rate; Retry-After and Reset are whole seconds up", (t) => {
  let now = 0;
  const rl = new RateLimiter(() => now);
  const rate = { rps: 2, burst: 4 };
  for (let i = 3; i >= 0; i--) t.like(rl.take("k", "api", rate), { allowed: true, limit: 4, remaining: i });
  const refused = rl.take("k", "api", rate);
  t.like(refused, { allowed: false, remaining: 0, retryAfter: 1, reset: 2 });
  now += 500; // one token back
  t.like(rl.take("k", "api", rate), { allowed: true, remaining: 0 });
  t.like(rl.take("other", "api", rate), { allowed: true, remaining: 3 }, "another key, another bucket");
  t.like(rl.take("k", "ingest", rate), { allowed: true, remaining: 3 }, "another class, another bucket");
  now += 10_000;
  t.like(rl.take("k", "api", rate), { allowed: true, remaining: 3 }, "never more than the burst");
  t.is(rl.take("k", "api", { rps: 0, burst: 0 }), undefined, "0: unlimited");
  t.like(rl.take("k", "api", { rps: 1, burst: 2 }), { allowed: true, limit: 2, remaining: 1 }, "a new shape keeps the tokens, up to its burst");
});

test("an environment's override: its rate, twice that as burst; null keeps the default", (t) => {
  const d = { ingest: { rps: 100, burst: 150 }, api: { rps: 10, burst: 20 } };
  t.deepEqual(effectiveLimits(d, { ingestRps: null, apiRps: 3 }), { ingest: { rps: 100, burst: 150 }, api: { rps: 3, burst: 6 } });
  t.deepEqual(effectiveLimits(d, { ingestRps: 0, apiRps: null }), { ingest: { rps: 0, burst: 0 }, api: { rps: 10, burst: 20 } });
});

/** Shared buckets (src/ratelimit-redis.ts) on the machine's Redis, each test under a key prefix of its own. */
const REDIS_URL = process.env.TEST_REDIS_URL || "redis://127.0.0.1:6379";
const prefix = () => `test:rl:${process.pid}:${Math.random().toString(36).slice(2)}`;

/** A logger that keeps what it is told. */
function keptLog() {
  const lines: { level: string; msg: string }[] = [];
  const at = (level: string) => (msg: string) => void lines.push({ level, msg });
  return { lines, log: { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") } as unknown as Logger };
}

/** Resolves once the limiter's connection is ready (it says so in its log). */
async function ready(log: { lines: { msg: string }[] }): Promise<void> {
  while (!log.lines.some((l) => l.msg === "rate limits: shared through Redis")) await new Promise((r) => setTimeout(r, 20));
}

test("the limiter's answer as the bucket's verdict: RateLimit-* and Retry-After as the per-server bucket says them", (t) => {
  const rate = { rps: 2, burst: 4 };
  t.deepEqual(verdictOf({ remainingPoints: 3, msBeforeNext: 500 }, rate, true), { allowed: true, limit: 4, remaining: 3, reset: 1 });
  t.deepEqual(verdictOf({ remainingPoints: 0, msBeforeNext: 2000 }, rate, true), { allowed: true, limit: 4, remaining: 0, reset: 2 });
  // Refused: 300 ms until the next token, then (4 − 1) / 2 = 1.5 s until full.
  t.deepEqual(verdictOf({ remainingPoints: 0, msBeforeNext: 300 }, rate, false), { allowed: false, limit: 4, remaining: 0, reset: 2, retryAfter: 1 });
  t.deepEqual(verdictOf({ remainingPoints: 0, msBeforeNext: 2500 }, { rps: 1, burst: 2 }, false), { allowed: false, limit: 2, remaining: 0, reset: 4, retryAfter: 3 });
  t.is(verdictOf({ remainingPoints: 0, msBeforeNext: 0 }, rate, false).retryAfter, 1, "at least 1 s");
});

test("shared buckets in Redis: the burst, then refused with the per-server bucket's headers; keys and classes apart; namespaced keys that expire", async (t) => {
  const kept = keptLog();
  const p = prefix();
  const rl = new SharedRateLimiter({ url: REDIS_URL, prefix: p, timeoutMs: 2000, log: kept.log });
  const redis = new Redis(REDIS_URL);
  try {
    await ready(kept);
    // A rate of 1 a second with a burst of 4: a refill between two calls is unlikely, not impossible.
    const rate = { rps: 1, burst: 4 };
    const served = [];
    for (let i = 0; i < 4; i++) served.push(await rl.take("key_1", "api", rate));
    t.true(served.every((v) => v?.allowed && v.limit === 4));
    t.like(served[0], { remaining: 3, reset: 1 });
    t.true((served[3]?.remaining ?? 9) <= 1);
    const refused = await rl.take("key_1", "api", rate);
    if (refused?.allowed) t.log("a refill between two calls (slow machine)");
    else t.like(refused, { allowed: false, limit: 4, remaining: 0, retryAfter: 1 });
    t.like(await rl.take("key_2", "api", rate), { allowed: true, remaining: 3 }, "another key, another bucket");
    t.like(await rl.take("key_1", "ingest", rate), { allowed: true, remaining: 3 }, "another class, another bucket");
    t.like(await rl.take("key_1", "api", { rps: 1, burst: 2 }), { limit: 2 }, "a new shape keeps the key's bucket, up to its burst");
    t.is(await rl.take("key_1", "api", { rps: 0, burst: 0 }), undefined, "0: unlimited");
    t.deepEqual((await redis.keys(`${p}:*`)).sort(), [`${p}:api:key_1`, `${p}:api:key_2`, `${p}:ingest:key_1`]);
    const ttl = await redis.pttl(`${p}:api:key_2`);
    t.true(ttl > 0 && ttl <= 2000, "gone once the bucket would be full");
    t.is(rl.fallbacks, 0);
    t.false(kept.lines.some((l) => l.level === "warn"));
  } finally {
    rl.close();
    redis.disconnect();
  }
});

test("no Redis: each call limited by the server's own bucket, never failed; the outage logged once", async (t) => {
  const kept = keptLog();
  let now = 0;
  const rl = new SharedRateLimiter({ url: "redis://127.0.0.1:1", prefix: prefix(), timeoutMs: 50, log: kept.log, local: new RateLimiter(() => now) });
  try {
    while (!kept.lines.some((l) => l.level === "warn")) await new Promise((r) => setTimeout(r, 20));
    const rate = { rps: 2, burst: 4 };
    for (let i = 3; i >= 0; i--) t.like(await rl.take("k", "api", rate), { allowed: true, limit: 4, remaining: i });
    t.like(await rl.take("k", "api", rate), { allowed: false, retryAfter: 1, reset: 2 });
    now += 500;
    t.like(await rl.take("k", "api", rate), { allowed: true, remaining: 0 });
    t.is(rl.fallbacks, 6);
    await new Promise((r) => setTimeout(r, 300)); // the client tries to connect again meanwhile
    t.is(kept.lines.filter((l) => l.level === "warn").length, 1);
    t.is(rl.outages, 1);
  } finally {
    rl.close();
  }
});

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

test("a Redis that stops answering (SIGSTOP, its own): calls bounded by the timeout and limited by the server's bucket, logged once; answering again: shared again", async (t) => {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "redis-"));
  const server = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir], { stdio: "ignore" });
  while (!(await answers(port))) await new Promise((r) => setTimeout(r, 50));
  const kept = keptLog();
  const rl = new SharedRateLimiter({ url: `redis://127.0.0.1:${port}`, prefix: prefix(), timeoutMs: 50, log: kept.log });
  try {
    await ready(kept);
    const rate = { rps: 1, burst: 10 };
    t.like(await rl.take("k", "api", rate), { allowed: true, remaining: 9 });
    t.is(rl.fallbacks, 0);
    server.kill("SIGSTOP");
    // Frozen: the first call waits out the bound; the next ones, within a second, do not ask Redis.
    for (let i = 0; i < 5; i++) t.like(await rl.take("k", "api", rate), { allowed: true, limit: 10 });
    t.is(rl.fallbacks, 5);
    t.is(kept.lines.filter((l) => l.level === "warn").length, 1);
    server.kill("SIGCONT");
    // Asked again at most a second later: shared again, said once.
    while (!kept.lines.some((l) => l.msg === "rate limits: Redis answers again; limits are shared across servers")) {
      await rl.take("k", "api", rate);
      await new Promise((r) => setTimeout(r, 100));
    }
    t.is(rl.outages, 1);
  } finally {
    rl.close();
    server.kill("SIGCONT");
    server.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  }
});
