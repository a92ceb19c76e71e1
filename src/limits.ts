/**
 * What one request may cost before it is served (DESIGN §10): a body bound per method, checked
 * before a byte more than the bound is buffered, and a bound per server on API requests, on bulk
 * requests (batches, rate cards, catalogs: the ones whose cost is CPU) and on request-body bytes
 * in flight. Over a bound the answer is immediate: `resource_exhausted`
 * (REST 413) for a body too large, `unavailable` (503) with Retry-After for a server that is
 * full. Nothing is ever queued.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { LARGEST_BODY_BYTES } from "./config.js";
import { ErrorInfoSchema, RetryInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { ERROR_DOMAIN } from "./rpc/errors.js";

const KiB = 1024;
const MiB = 1024 * KiB;

/**
 * A request body that holds many records: a usage-event batch (1,000 events) and the rate card
 * and catalog calls (up to 500 rates with 2,000-character descriptions and 2,000 dimensional
 * cells: about 3.5 MB in three-byte UTF-8).
 */
export const BULK_BODY_BYTES = LARGEST_BODY_BYTES;
/**
 * One usage event, also each message of a usage stream: the largest the rules allow (100 data
 * keys of 255 characters with values of 1,000) is about 380 KB of UTF-8 JSON and about 760 KB
 * with every character escaped as \uXXXX.
 */
export const EVENT_BODY_BYTES = 1 * MiB;
/**
 * Every other request: a subject with the most metadata (50 keys of 40 characters, values of
 * 500) is at most about 165 KB even fully escaped; requests holding a Timestamp (test clocks,
 * timelines and their items, summaries) were already read only up to this (rpc/instants.ts).
 */
export const DEFAULT_BODY_BYTES = 256 * KiB;

const BULK = new Set([
  "billing.v1.UsageEventService/CreateUsageEventBatch",
  "billing.v1.RateCardService/CreateRateCard",
  "billing.v1.RateCatalogService/CreateRateCatalog",
  "billing.v1.RateCatalogService/AddRates",
]);
const EVENT = new Set(["billing.v1.UsageEventService/CreateUsageEvent", "billing.v1.UsageEventService/StreamUsageEvents"]);

/** Whether `method` carries many records (a usage-event batch, a rate card or catalog): a bulk request. */
export function isBulk(method: DescMethod): boolean {
  return BULK.has(`${method.parent.typeName}/${method.name}`);
}

/** The most bytes a request body to `method` may have (for a client stream: each message). */
export function bodyLimit(method: DescMethod): number {
  const name = `${method.parent.typeName}/${method.name}`;
  if (BULK.has(name)) return BULK_BODY_BYTES;
  if (EVENT.has(name)) return EVENT_BODY_BYTES;
  return DEFAULT_BODY_BYTES;
}

export function bodyTooLarge(limit: number): ConnectError {
  return new ConnectError(`the request body is larger than ${limit} bytes, the most this method accepts`, Code.ResourceExhausted, undefined, [
    { desc: ErrorInfoSchema, value: { reason: "PAYLOAD_TOO_LARGE", domain: ERROR_DOMAIN, metadata: { limit: String(limit) } } },
  ]);
}

/** Seconds a client is told to wait after a 503 for a full server. */
export const RETRY_AFTER_SECONDS = 1;

/**
 * A refusal the client should retry after `seconds`: Retry-After in the metadata (an HTTP header,
 * or a gRPC trailer) and a RetryInfo beside the ErrorInfo of `reason`.
 */
export function retryLater(message: string, code: Code, seconds: number, reason: string, info: Record<string, string> = {}, headers: Record<string, string> = {}): ConnectError {
  return new ConnectError(message, code, { "retry-after": String(seconds), ...headers }, [
    { desc: ErrorInfoSchema, value: { reason, domain: ERROR_DOMAIN, metadata: info } },
    { desc: RetryInfoSchema, value: { retryDelay: { seconds: BigInt(seconds) } } },
  ]);
}

/** The answer of a full server: 503 / `unavailable`, retry after RETRY_AFTER_SECONDS. */
export function overloaded(what: string): ConnectError {
  return retryLater(`the server has too many ${what} in flight; retry after ${RETRY_AFTER_SECONDS} s`, Code.Unavailable, RETRY_AFTER_SECONDS, "OVERLOADED");
}

/** One admitted request's share of the server's bounds, given back when its response closes. */
export class Ticket {
  private bytes = 0;
  private bulk = false;
  private left = false;
  constructor(private readonly admission: Admission) {}

  /**
   * One of the server's bulk slots for this request: at once when one is free, else after the
   * requests waiting before it (first come, first served), or false when none frees within the
   * server's bulk wait or this request leaves meanwhile. A bulk request costs the server's one
   * thread tens of milliseconds (parsing, checking and writing a thousand events), so only a few
   * run at once: more would only queue on the CPU in front of every cheap request, and hold
   * their bodies in memory meanwhile. A waiting request has not been read: its body stays with
   * the client (TCP and HTTP/2 flow control), and the number waiting is bounded by the bound on
   * requests in flight. A request that declares a body smaller than the server's
   * `bulkLaneMinBytes` (a rate card, a batch of a few events: a few milliseconds of the thread)
   * needs no slot: it is not held behind large ones (`declared`: its Content-Length, if it sent one).
   */
  async enterBulk(declared?: number): Promise<boolean> {
    if (this.bulk || this.left) return true;
    if (declared !== undefined && declared < this.admission.bulkLaneMinBytes) return true;
    this.bulk = await this.admission.takeBulk(this);
    return this.bulk;
  }

  /** Counts `n` more body bytes in flight; false (nothing counted) when the server has no room. */
  charge(n: number): boolean {
    if (this.left) return true;
    if (!this.admission.takeBytes(n)) return false;
    this.bytes += n;
    return true;
  }

  /** Gives back `n` bytes counted earlier (a stream's message once read on). */
  release(n: number): void {
    const m = Math.min(n, this.bytes);
    this.bytes -= m;
    this.admission.giveBytes(m);
  }

  leave(): void {
    if (this.left) return;
    this.left = true;
    this.admission.giveBytes(this.bytes);
    this.bytes = 0;
    if (this.bulk) this.admission.giveBulk();
    else this.admission.stopWaiting(this);
    this.bulk = false;
    this.admission.leave();
  }
}

/** The per-server bounds on requests, bulk requests and request-body bytes in flight. */
export class Admission {
  private requests = 0;
  private bulk = 0;
  private readonly waiting = new Map<Ticket, (slot: boolean) => void>();
  private bytes = 0;
  constructor(
    readonly maxRequests: number,
    readonly maxBytes: number,
    readonly maxBulk: number = Number.POSITIVE_INFINITY,
    /** How long a bulk request waits for a slot before it is refused (0: refused at once). */
    readonly bulkWaitMs = 0,
    /** A bulk request declaring a smaller body takes no slot (0: every bulk request takes one). */
    readonly bulkLaneMinBytes = 0,
  ) {}

  /** A ticket for one more request, or undefined when `maxRequests` are in flight. */
  enter(): Ticket | undefined {
    if (this.requests >= this.maxRequests) return undefined;
    this.requests++;
    return new Ticket(this);
  }

  /** Requests and body bytes in flight now. */
  get inFlight(): { requests: number; bulk: number; waitingForBulk: number; bytes: number } {
    return { requests: this.requests, bulk: this.bulk, waitingForBulk: this.waiting.size, bytes: this.bytes };
  }

  /** @internal */
  takeBulk(ticket: Ticket): Promise<boolean> {
    if (this.bulk < this.maxBulk && this.waiting.size === 0) {
      this.bulk++;
      return Promise.resolve(true);
    }
    if (this.bulkWaitMs <= 0) return Promise.resolve(false);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiting.delete(ticket);
        resolve(false);
      }, this.bulkWaitMs);
      this.waiting.set(ticket, (slot) => {
        clearTimeout(timer);
        resolve(slot);
      });
    });
  }
  /** @internal A slot given back goes to the longest-waiting request, if any. */
  giveBulk(): void {
    const next = this.waiting.entries().next();
    if (next.done) {
      this.bulk--;
      return;
    }
    const [ticket, give] = next.value;
    this.waiting.delete(ticket);
    give(true);
  }
  /** @internal */
  stopWaiting(ticket: Ticket): void {
    const give = this.waiting.get(ticket);
    if (!give) return;
    this.waiting.delete(ticket);
    give(false);
  }

  /** @internal */
  takeBytes(n: number): boolean {
    if (n > 0 && this.bytes + n > this.maxBytes) return false;
    this.bytes += n;
    return true;
  }
  /** @internal */
  giveBytes(n: number): void {
    this.bytes -= n;
  }
  /** @internal */
  leave(): void {
    this.requests--;
  }
}

/**
 * Streams a caller without a key may open (gRPC server reflection, which `buf curl` and grpcurl
 * use): counted apart from the API's admission slots, at most `max` at once, each cut after
 * `timeoutMs` (a reflection conversation takes milliseconds), so that no key-less caller can hold
 * one of the API's slots, or many of these, for long (DESIGN §10).
 */
export class KeylessStreams {
  private open = 0;
  constructor(
    readonly max: number,
    readonly timeoutMs: number,
  ) {}

  /** Streams open now. */
  get inFlight(): number {
    return this.open;
  }

  /** Room for one more, with `cut` called when its time is up: what to call when it ends (undefined: full). */
  enter(cut: () => void): (() => void) | undefined {
    if (this.open >= this.max) return undefined;
    this.open++;
    const timer = setTimeout(cut, this.timeoutMs);
    timer.unref?.();
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.open--;
      clearTimeout(timer);
    };
  }
}
