/** The token bucket on a clock the test moves (src/ratelimit.ts). */
import test from "ava";
import { RateLimiter, effectiveLimits } from "../src/ratelimit.js";

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
