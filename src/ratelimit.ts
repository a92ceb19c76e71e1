/**
 * Per-key rate limits (DESIGN §10, issue 12): a token bucket per API key and class of call, in
 * this server's memory (with N servers behind a balancer a key gets up to N times its limit),
 * or with RATE_LIMIT_REDIS_URL the same buckets in Redis, shared by every server
 * (src/ratelimit-redis.ts; this server's own buckets while Redis does not answer).
 * Usage ingest (one event, a batch, a stream: each one request) has its own bucket, apart from
 * every other call, so that a client's ingestion never starves its reads and the other way round.
 * Checked right after the key, before the body is read. Over the limit: `resource_exhausted`
 * (REST 429), reason RATE_LIMITED, with Retry-After.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import { Code, type ConnectError } from "@connectrpc/connect";
import type { Rate, RateLimits } from "./config.js";
import { retryLater } from "./limits.js";

export type RateClass = "ingest" | "api";

/** An environment's overrides (null: the server's default); an override's burst is twice its rate. */
export interface RateOverrides {
  ingestRps: number | null;
  apiRps: number | null;
}

/** The limits of an environment: the server's defaults with the environment's overrides. */
export function effectiveLimits(defaults: RateLimits, o: RateOverrides | undefined): RateLimits {
  return { ingest: pick(defaults.ingest, o?.ingestRps), api: pick(defaults.api, o?.apiRps) };
}

/** The default rate `d`, or the override `rps` (burst twice that). At module level: not a closure per call. */
function pick(d: Rate, rps: number | null | undefined): Rate {
  return rps === null || rps === undefined ? d : { rps, burst: 2 * rps };
}

const INGEST = new Set(["billing.v1.UsageEventService/CreateUsageEvent", "billing.v1.UsageEventService/CreateUsageEventBatch", "billing.v1.UsageEventService/StreamUsageEvents"]);

const classes = new WeakMap<DescMethod, RateClass>();

export function rateClass(method: DescMethod): RateClass {
  let cls = classes.get(method);
  if (cls === undefined) {
    cls = INGEST.has(`${method.parent.typeName}/${method.name}`) ? "ingest" : "api";
    classes.set(method, cls);
  }
  return cls;
}

/** What a bucket said about one request: the RateLimit-* values and, when refused, Retry-After. */
export interface Verdict {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the bucket is full again (ceil). */
  reset: number;
  /** Seconds until a request would be allowed (ceil, at least 1); only when refused. */
  retryAfter?: number;
}

/** The per-key limits a server checks: its own buckets (RateLimiter) or buckets shared through Redis (SharedRateLimiter). */
export interface KeyLimiter {
  /** Takes one token from the `cls` bucket of key `keyId` shaped `rate`; undefined when the rate is unlimited. */
  take(keyId: string, cls: RateClass, rate: Rate): Verdict | undefined | Promise<Verdict | undefined>;
}

interface Bucket {
  tokens: number;
  at: number;
  rps: number;
  burst: number;
}

/** Buckets kept at most; past it, full buckets (which mean nothing) are dropped. */
const MAX_BUCKETS = 100_000;

export class RateLimiter implements KeyLimiter {
  private readonly buckets = new Map<string, Bucket>();
  constructor(private readonly now: () => number = () => performance.now()) {}

  /**
   * Takes one token from the `cls` bucket of key `keyId` shaped `rate`; undefined when the rate is
   * unlimited. A bucket whose shape changed (an environment's override) keeps its tokens, up to the new burst.
   */
  take(keyId: string, cls: RateClass, rate: Rate): Verdict | undefined {
    if (rate.rps <= 0) return undefined;
    const id = `${cls}:${keyId}`;
    const now = this.now();
    let b = this.buckets.get(id);
    if (!b) {
      if (this.buckets.size >= MAX_BUCKETS) this.sweep(now);
      b = { tokens: rate.burst, at: now, rps: rate.rps, burst: rate.burst };
      this.buckets.set(id, b);
    } else {
      b.tokens = Math.min(b.burst, b.tokens + ((now - b.at) / 1000) * b.rps);
      b.at = now;
      if (b.rps !== rate.rps || b.burst !== rate.burst) {
        b.rps = rate.rps;
        b.burst = rate.burst;
        b.tokens = Math.min(b.tokens, b.burst);
      }
    }
    const allowed = b.tokens >= 1;
    if (allowed) b.tokens -= 1;
    const verdict: Verdict = {
      allowed,
      limit: b.burst,
      remaining: Math.floor(b.tokens),
      reset: Math.ceil((b.burst - b.tokens) / b.rps),
    };
    if (!allowed) verdict.retryAfter = Math.max(1, Math.ceil((1 - b.tokens) / b.rps));
    return verdict;
  }

  /** What `take` would say now, without taking a token: whether one is there (undefined: unlimited). */
  peek(keyId: string, cls: RateClass, rate: Rate): Verdict | undefined {
    if (rate.rps <= 0) return undefined;
    const b = this.buckets.get(`${cls}:${keyId}`);
    const tokens = b ? Math.min(b.burst, b.tokens + ((this.now() - b.at) / 1000) * b.rps) : rate.burst;
    const verdict: Verdict = { allowed: tokens >= 1, limit: rate.burst, remaining: Math.floor(tokens), reset: Math.ceil((rate.burst - tokens) / rate.rps) };
    if (!verdict.allowed) verdict.retryAfter = Math.max(1, Math.ceil((1 - tokens) / rate.rps));
    return verdict;
  }

  private sweep(now: number): void {
    for (const [id, b] of this.buckets) {
      if (b.tokens + ((now - b.at) / 1000) * b.rps >= b.burst) this.buckets.delete(id);
    }
    // Every bucket in use: start over rather than grow without bound (keys get a fresh burst).
    if (this.buckets.size >= MAX_BUCKETS) this.buckets.clear();
  }
}

/** The RateLimit-* headers (IETF httpapi draft) of a verdict. */
export function rateLimitHeaders(v: Verdict): Record<string, string> {
  return { "ratelimit-limit": String(v.limit), "ratelimit-remaining": String(v.remaining), "ratelimit-reset": String(v.reset) };
}

/** The answer over a key's limit: `resource_exhausted` (REST 429), Retry-After in the metadata and a RetryInfo. */
export function rateLimited(cls: RateClass, v: Verdict): ConnectError {
  const after = v.retryAfter ?? 1;
  const what = cls === "ingest" ? "usage-ingest requests" : "API requests";
  return retryLater(
    `this API key is over its rate limit for ${what}; retry after ${after} s`,
    Code.ResourceExhausted,
    after,
    "RATE_LIMITED",
    { limit: String(v.limit), class: cls },
    rateLimitHeaders(v),
  );
}

export const isRateLimited = (err: ConnectError): boolean => err.code === Code.ResourceExhausted && err.metadata.has("retry-after");
