/**
 * A rate below one a second (an environment's override of 0.5/s, say) is shared through Redis like
 * any other (src/ratelimit-redis.ts sends it in thousandths of a token a second): two limiters on
 * one Redis, as two servers, give a key its burst together, not each, and neither falls back to
 * its own bucket. Against the machine's Redis (scripts/test-prerequisites.sh), a key prefix per run.
 */
import { performance } from "node:perf_hooks";
import test from "ava";
import { createLogger } from "../../src/log.js";
import { SharedRateLimiter } from "../../src/ratelimit-redis.js";

const REDIS_URL = process.env.TEST_REDIS_URL || "redis://127.0.0.1:6379";

test("two servers on one Redis share a 0.5/s bucket: the burst of 4 across both, no fallback", async (t) => {
  const prefix = `test:rlf:${process.pid}:${Math.random().toString(36).slice(2)}`;
  const options = { url: REDIS_URL, prefix, timeoutMs: 2_000, log: createLogger("error") };
  const servers = [new SharedRateLimiter(options), new SharedRateLimiter(options)];
  try {
    // Until each is connected: a call made before that is limited by the server alone (a fallback).
    for (const s of servers) {
      for (;;) {
        const before = s.fallbacks;
        await s.take("warm-up", "api", { rps: 1000, burst: 1000 });
        if (s.fallbacks === before) break;
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    const fellBack = servers.map((s) => s.fallbacks);
    const rate = { rps: 0.5, burst: 4 };
    const started = performance.now();
    const allowed: boolean[] = [];
    for (let i = 0; i < 10; i++) allowed.push((await (servers[i % 2] as SharedRateLimiter).take("key_1", "api", rate))?.allowed === true);
    const seconds = (performance.now() - started) / 1000;
    const served = allowed.filter(Boolean).length;
    // The first 4 pass; at 0.5/s at most one more token could have come back per 2 s of the run.
    t.deepEqual(allowed.slice(0, 4), [true, true, true, true]);
    t.true(served <= 4 + Math.floor(seconds * 0.5), `${served} served in ${seconds.toFixed(2)} s`);
    t.true(served < 8, "not each server's burst");
    t.deepEqual(
      servers.map((s) => s.fallbacks),
      fellBack,
      "no call fell back",
    );
    // A refusal says when the next token comes: 2 s at 0.5/s.
    const refused = await (servers[0] as SharedRateLimiter).take("key_1", "api", rate);
    t.like(refused, { allowed: false, retryAfter: 2 });
  } finally {
    for (const s of servers) s.close();
  }
});
