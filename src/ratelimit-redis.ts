/**
 * Rate limits shared by every server (DESIGN §10, issue 37): with RATE_LIMIT_REDIS_URL set, a
 * key's buckets live in Redis, so a key gets its limit across N servers, not N times it.
 *
 * The buckets are the per-server buckets' (src/ratelimit.ts): a token bucket of `burst` tokens
 * refilled at `rps` a second, one per API key and class of call. rate-limiter-flexible's own
 * limiters count fixed windows (BurstyRateLimiter adds a second, slower window for bursts), which
 * would let a key through at up to twice its rate across a window's edge, and could not say
 * "remaining" as the bucket does. So its RateLimiterRedis runs a token bucket of its own script
 * (the `customIncrTtlLuaScript` option): the script is handed the points to take (ARGV[1]), the
 * call's duration (ARGV[2], given as the bucket's rate in thousandths of a token a second:
 * `customDuration: rps × 1000`, a whole number as the limiter needs, so 0.5/s is shared too) and
 * the limiter's points (ARGV[3], the burst). It reads Redis's clock (one clock for every server), refills,
 * takes a token when there is one, and answers in the limiter's terms: {consumed, ms}, where
 * consumed = burst − the whole tokens left (burst + 1 when refused, so the limiter rejects) and
 * ms = until the bucket is full (served) or until the next token (refused). The key expires
 * once the bucket would be full again (a full bucket means nothing).
 *
 * Redis unreachable or slow (each call bounded by RATE_LIMIT_REDIS_TIMEOUT_MS): the call is
 * limited by this server's own bucket instead, never failed, never held longer than the bound.
 * An outage is logged once when it starts and once when Redis answers again.
 */
import { performance } from "node:perf_hooks";
import { Redis } from "ioredis";
import { RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible";
import type { Rate } from "./config.js";
import type { Logger } from "./log.js";
import { type RateClass, RateLimiter, type Verdict } from "./ratelimit.js";

/** The token bucket (see above). Redis's TIME: seconds and microseconds. */
export const TOKEN_BUCKET_LUA = `
local take = tonumber(ARGV[1])
local rate = tonumber(ARGV[2]) / 1000
local burst = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local b = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(b[1])
local at = tonumber(b[2])
if tokens == nil or at == nil then
  tokens = burst
else
  tokens = math.min(burst, tokens + math.max(0, now - at) * rate / 1000)
end
local consumed
local ms
if tokens >= take then
  tokens = tokens - take
  consumed = burst - math.floor(tokens)
  ms = math.ceil((burst - tokens) * 1000 / rate)
else
  consumed = burst + take
  ms = math.ceil((take - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'at', string.format('%.17g', now))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) * 1000 / rate) + 1000)
return {consumed, ms}
`;

/** While Redis is down, how often a call asks it again (ms). */
const PROBE_MS = 1_000;
/** How long a connection may take to be ready (ms), and the longest between two attempts. */
const CONNECT_MS = 2_000;

/** What the limiter answered, as the bucket's verdict (the RateLimit-* values and Retry-After). */
export function verdictOf(res: { remainingPoints: number; msBeforeNext: number }, rate: Rate, allowed: boolean): Verdict {
  if (allowed) return { allowed, limit: rate.burst, remaining: res.remainingPoints, reset: Math.ceil(res.msBeforeNext / 1000) };
  // Refused: ms until the next token; the bucket is full (burst − 1) / rps seconds after that.
  const reset = Math.ceil(((rate.burst - 1) * 1000) / rate.rps / 1000 + res.msBeforeNext / 1000);
  return { allowed, limit: rate.burst, remaining: 0, reset, retryAfter: Math.max(1, Math.ceil(res.msBeforeNext / 1000)) };
}

export interface SharedLimitsOptions {
  /** RATE_LIMIT_REDIS_URL. */
  url: string;
  /** RATE_LIMIT_REDIS_PREFIX: the deployment's namespace; keys are `<prefix>:<class>:<API key id>`. */
  prefix: string;
  /** RATE_LIMIT_REDIS_TIMEOUT_MS: the longest a call waits for Redis before this server's bucket decides. */
  timeoutMs: number;
  log: Logger;
  /** The per-server buckets, for an outage (a clock the tests move). */
  local?: RateLimiter;
}

/** The per-key limits of every server on one Redis, with this server's own buckets while Redis is away. */
export class SharedRateLimiter {
  /** Outages seen (each logged once), and calls limited by this server alone during them. */
  outages = 0;
  fallbacks = 0;
  private readonly redis: Redis;
  private readonly local: RateLimiter;
  private readonly shapes = new Map<string, RateLimiterRedis>();
  private readonly prefix: string;
  private readonly timeoutMs: number;
  private readonly log: Logger;
  private down = false;
  /** While Redis is down, the next call that asks it again (one a second): the others are not held up. */
  private probeAt = 0;
  /** When a call first found the connection not ready (undefined: ready). */
  private notReadySince: number | undefined;
  private closed = false;

  constructor(opts: SharedLimitsOptions) {
    this.prefix = opts.prefix;
    this.timeoutMs = opts.timeoutMs;
    this.log = opts.log;
    this.local = opts.local ?? new RateLimiter();
    // No offline queue and no retries of a command: a call while Redis is away fails at once (and
    // this server's bucket decides); the client reconnects on its own, at most every 2 s.
    this.redis = new Redis(opts.url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: opts.timeoutMs,
      connectTimeout: CONNECT_MS,
      retryStrategy: (times) => Math.min(times * 100, CONNECT_MS),
    });
    this.redis.on("error", (err: Error) => this.failed(err));
    this.redis.on("ready", () => {
      if (!this.down) this.log.info("rate limits: shared through Redis", { prefix: this.prefix });
      this.answered();
    });
  }

  /** Takes one token from the `cls` bucket of key `keyId` shaped `rate`; undefined when the rate is unlimited. */
  async take(keyId: string, cls: RateClass, rate: Rate): Promise<Verdict | undefined> {
    if (rate.rps <= 0) return undefined;
    // The rate travels in thousandths a second (see above); a finer one is this server's alone.
    const milli = Math.round(rate.rps * 1000);
    if (milli < 1 || Math.abs(milli - rate.rps * 1000) > 1e-6) return this.alone(keyId, cls, rate);
    // A connection not (yet) ready: this server decides. An outage is the client's error event, or
    // a connection still not ready CONNECT_MS after a call first found it so (a peer that never answers).
    if (this.redis.status !== "ready") {
      const now = performance.now();
      this.notReadySince ??= now;
      if (now - this.notReadySince > CONNECT_MS) this.failed(new Error(`connection to Redis not ready (${this.redis.status})`));
      return this.alone(keyId, cls, rate);
    }
    this.notReadySince = undefined;
    if (this.down && performance.now() < this.probeAt) return this.alone(keyId, cls, rate);
    let timer: NodeJS.Timeout | undefined;
    try {
      const consumed = this.limiterOf(rate).consume(`${cls}:${keyId}`, 1, { customDuration: milli });
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer from Redis within ${this.timeoutMs} ms`)), this.timeoutMs);
      });
      const res = await Promise.race([consumed, late]);
      this.answered();
      return verdictOf(res, rate, true);
    } catch (err) {
      if (err instanceof RateLimiterRes) {
        this.answered();
        return verdictOf(err, rate, false);
      }
      this.failed(err);
      return this.alone(keyId, cls, rate);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Closes the connection (the server stops); calls still coming are limited by this server alone. */
  close(): void {
    this.closed = true;
    this.redis.disconnect();
  }

  private alone(keyId: string, cls: RateClass, rate: Rate): Verdict | undefined {
    this.fallbacks++;
    return this.local.take(keyId, cls, rate);
  }

  /** The limiter of one bucket shape (a limiter's points are fixed); every shape shares the prefix, so an override keeps the key's bucket. */
  private limiterOf(rate: Rate): RateLimiterRedis {
    const shape = `${rate.rps}/${rate.burst}`;
    let limiter = this.shapes.get(shape);
    if (!limiter) {
      limiter = new RateLimiterRedis({
        storeClient: this.redis,
        keyPrefix: this.prefix,
        points: rate.burst,
        duration: Math.max(1, Math.ceil(rate.burst / rate.rps)),
        customIncrTtlLuaScript: TOKEN_BUCKET_LUA,
        rejectIfRedisNotReady: true,
      });
      this.shapes.set(shape, limiter);
    }
    return limiter;
  }

  private failed(err: unknown): void {
    this.probeAt = performance.now() + PROBE_MS;
    if (this.closed || this.down) return;
    this.down = true;
    this.outages++;
    this.log.warn("rate limits: Redis does not answer; each server limits keys alone until it does", { err: err instanceof Error ? err.message : String(err) });
  }

  private answered(): void {
    if (!this.down) return;
    this.down = false;
    this.log.info("rate limits: Redis answers again; limits are shared across servers", {});
  }
}
