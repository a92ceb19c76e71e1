/**
 * Failed dashboard sign-ins, throttled (DESIGN §10): a token bucket per client address and one for
 * the whole server (ratelimit.ts's buckets, in this server's memory). Each wrong key takes a token
 * from both; while either is empty, a sign-in is answered 429 with Retry-After before its key is
 * looked at, so a guesser learns nothing (not even whether a key is right) until the bucket
 * refills. A correct key takes nothing. The address is the connection's peer (IPv6: its /64, which
 * one client usually holds whole); behind a proxy every client shares the proxy's bucket.
 */
import { isIPv6 } from "node:net";
import type { Rate } from "../../config.js";
import { RateLimiter } from "../../ratelimit.js";

/** Per address: 10 wrong keys at once, then one every 6 seconds (10 a minute). */
export const SIGN_IN_PER_ADDRESS: Rate = Object.freeze({ rps: 1 / 6, burst: 10 });
/** The whole server: 100 wrong keys at once, then 5 a second. */
export const SIGN_IN_GLOBAL: Rate = Object.freeze({ rps: 5, burst: 100 });

const GLOBAL = "*";

export class SignInThrottle {
  private readonly buckets: RateLimiter;
  constructor(
    now?: () => number,
    private readonly perAddress: Rate = SIGN_IN_PER_ADDRESS,
    private readonly global: Rate = SIGN_IN_GLOBAL,
  ) {
    this.buckets = new RateLimiter(now);
  }

  /** Seconds to wait before a sign-in from `address` is tried (whole, at least 1); undefined: it may be tried now. */
  refusal(address: string | undefined): number | undefined {
    const verdicts = [this.buckets.peek(clientOf(address), "api", this.perAddress), this.buckets.peek(GLOBAL, "api", this.global)];
    const waits = verdicts.filter((v) => v && !v.allowed).map((v) => v?.retryAfter ?? 1);
    return waits.length > 0 ? Math.max(...waits) : undefined;
  }

  /** A wrong key from `address`: one token from its bucket and the server's. */
  failed(address: string | undefined): void {
    this.buckets.take(clientOf(address), "api", this.perAddress);
    this.buckets.take(GLOBAL, "api", this.global);
  }
}

/** The bucket of a peer address: an IPv4 address (also IPv4-mapped IPv6) as is, an IPv6 address's /64. */
export function clientOf(address: string | undefined): string {
  if (address === undefined) return "unknown";
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1] as string;
  if (!isIPv6(address)) return address;
  const [head = "", tail = ""] = address.split("::");
  const left = head === "" ? [] : head.split(":");
  const right = tail === "" ? [] : tail.split(":");
  const groups = address.includes("::") ? [...left, ...Array(8 - left.length - right.length).fill("0"), ...right] : left;
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(":")}::/64`;
}
