/**
 * The webhook delivery worker (DESIGN §10): fans out new events into deliveries (one per endpoint,
 * claimed by the server that wrote them) and claims due deliveries (one server at a time per
 * delivery: a row lock to claim, then a lease), sends each signed, and records the attempt.
 * A failure is retried with exponential backoff and jitter until the retry window (3 days from
 * the event) ends; then the delivery is `failed` and its endpoint marked failing. At least once:
 * a server that dies mid-delivery leaves its claim to expire, and another server (or itself after
 * a restart) sends the event again, with the same `id`. Each attempt is signed twice: the
 * `Billing-Signature` header (Stripe's scheme) and the Standard Webhooks headers, whose
 * `webhook-id` is the delivery's id.
 */
import { createHmac } from "node:crypto";
import { newId } from "../ids.js";
import { formatInstant } from "../time.js";
import type { StoredEvent } from "./types.js";
import type { AttemptOutcome, ClaimedDelivery, WebhookStore } from "./webhooks.js";

/** The header carrying the signature: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`. */
export const SIGNATURE_HEADER = "Billing-Signature";

export interface WebhookRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
}

export interface WebhookResponse {
  /** null when no answer came (timeout, refused, blocked host). */
  statusCode: number | null;
  /** The start of the response body (at most 1,000 characters). */
  excerpt: string | null;
  error: string | null;
  latencyMs: number;
}

/** Outbound HTTP (src/webhooks/http-sender.ts): timeouts, no redirects, bounded bodies, the host guard. */
export interface WebhookSender {
  send(req: WebhookRequest): Promise<WebhookResponse>;
}

export interface DeliveryOptions {
  /** How long one attempt may take. */
  timeoutMs: number;
  /** The first retry's delay; each next one doubles (with jitter), up to maxDelayMs. */
  retryBaseMs: number;
  maxDelayMs: number;
  /** How long after its event (or its replay) a delivery is retried at most. */
  retryWindowMs: number;
  /** Deliveries claimed at once, and sent at once. */
  batch: number;
}

export const DEFAULT_DELIVERY_OPTIONS: DeliveryOptions = {
  timeoutMs: 10_000,
  retryBaseMs: 30_000,
  maxDelayMs: 6 * 3_600_000,
  retryWindowMs: 3 * 24 * 3_600_000,
  batch: 200,
};

/** HMAC-SHA256 over `<t>.<body>` with the endpoint's secret, hex. */
export function sign(secret: string, t: number, body: string): string {
  return createHmac("sha256", secret).update(`${t}.${body}`).digest("hex");
}

export function signatureHeader(secret: string, t: number, body: string): string {
  return `t=${t},v1=${sign(secret, t, body)}`;
}

/**
 * The Standard Webhooks key of an endpoint secret (https://www.standardwebhooks.com): the bytes
 * that the base64 after `whsec_` decodes to, as every `standardwebhooks` / svix library reads a
 * `whsec_` secret. A secret is `whsec_` and 32 base62 characters, all of them base64 digits, so
 * the key is 24 bytes and a receiver verifies with the secret exactly as the API gave it.
 */
export function standardWebhookKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith("whsec_") ? secret.slice(6) : secret, "base64");
}

/**
 * The Standard Webhooks headers of one attempt: `webhook-id` (the delivery's id: the same on every
 * retry of it, a new one for a replay), `webhook-timestamp` (the attempt's unix seconds) and
 * `webhook-signature: v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` with standardWebhookKey.
 */
export function standardWebhookHeaders(secret: string, id: string, t: number, body: string): Record<string, string> {
  const signature = createHmac("sha256", standardWebhookKey(secret)).update(`${id}.${t}.${body}`).digest("base64");
  return { "webhook-id": id, "webhook-timestamp": String(t), "webhook-signature": `v1,${signature}` };
}

/** The body of a delivery: the event with its resource as stored (its JSON text, verbatim), its time written as the API writes it. */
export function eventBody(e: StoredEvent, mode: string): string {
  return `{"id":${JSON.stringify(e.id)},"type":${JSON.stringify(e.type)},"created_at":${JSON.stringify(formatInstant(e.createdAt))},"environment_id":${JSON.stringify(e.environmentId)},"mode":${JSON.stringify(mode)},"data":${e.data}}`;
}

/**
 * The delay before retry number `attempts` (1: after the first failure): retryBaseMs doubling,
 * at most maxDelayMs, times a jitter of 0.5–1.5 so that an endpoint's failed deliveries spread out.
 */
export function retryDelayMs(attempts: number, o: Pick<DeliveryOptions, "retryBaseMs" | "maxDelayMs">, random = Math.random()): number {
  const base = Math.min(o.retryBaseMs * 2 ** Math.max(0, attempts - 1), o.maxDelayMs);
  return Math.round(base * (0.5 + random));
}

type FanOut = Awaited<ReturnType<WebhookStore["fanOut"]>>;
const NOTHING_FANNED_OUT: FanOut = { events: 0, claims: [] };

export class DeliveryWorker {
  constructor(
    private readonly store: WebhookStore,
    private readonly sender: WebhookSender,
    private readonly now: () => Date,
    private readonly options: DeliveryOptions = DEFAULT_DELIVERY_OPTIONS,
    private readonly onError?: (err: unknown) => void,
  ) {}

  /**
   * Fans out the events not yet fanned out and sends their deliveries, and (with `retries`) every
   * other delivery due now (retries, replays, an enabled endpoint's held ones), batch by batch;
   * returns how many attempts it made.
   */
  async runDue(options: { retries: boolean } = { retries: true }): Promise<number> {
    let n = 0;
    // Once a fan-out takes less than a batch, the events are done for this run (a commit meanwhile wakes another).
    let fanOut = true;
    for (;;) {
      const at = this.now();
      // The claim outlives the attempt by a margin; after it another server may take the delivery.
      const leaseUntil = new Date(at.getTime() + 2 * this.options.timeoutMs + 1_000);
      const taken: FanOut = fanOut ? await this.store.fanOut(this.options.batch, leaseUntil) : NOTHING_FANNED_OUT;
      const events = taken.events;
      const fresh = taken.claims;
      fanOut = events >= this.options.batch;
      const due = options.retries ? await this.store.claimDue(at, this.options.batch, leaseUntil) : [];
      const claims = fresh.length === 0 ? due : due.length === 0 ? fresh : [...fresh, ...due];
      if (claims.length > 0) {
        const results = await Promise.all(claims.map((c) => this.attempt(c)));
        try {
          await this.store.recordAttempts(results);
        } catch (err) {
          // Not recorded: the claims expire and the deliveries are attempted again (at least once).
          this.onError?.(err);
        }
        n += claims.length;
      }
      if (events < this.options.batch && due.length < this.options.batch) return n;
    }
  }

  private async attempt(c: ClaimedDelivery): Promise<{ claim: ClaimedDelivery; outcome: AttemptOutcome }> {
    const body = eventBody(c.event, c.mode);
    const startedAt = this.now();
    const t = Math.floor(startedAt.getTime() / 1000);
    const res = await this.sender.send({
      url: c.endpoint.url,
      body,
      timeoutMs: this.options.timeoutMs,
      headers: {
        "content-type": "application/json",
        "user-agent": "usage-billing-webhooks/1",
        [SIGNATURE_HEADER.toLowerCase()]: signatureHeader(c.endpoint.secret, t, body),
        "billing-event-id": c.event.id,
        "billing-event-type": c.event.type,
        "billing-delivery-id": c.id,
        ...standardWebhookHeaders(c.endpoint.secret, c.id, t, body),
      },
    });
    const ok = res.statusCode !== null && res.statusCode >= 200 && res.statusCode < 300;
    const attempts = c.attempts + 1;
    const error = ok ? null : (res.error ?? `HTTP ${res.statusCode}`);
    let outcome: AttemptOutcome["status"] = "succeeded";
    let nextAttemptAt: Date | null = null;
    if (!ok) {
      const next = startedAt.getTime() + retryDelayMs(attempts, this.options);
      if (next - c.eventCreatedAt.getTime() > this.options.retryWindowMs) outcome = "failed";
      else {
        outcome = "pending";
        nextAttemptAt = new Date(next);
      }
    }
    return {
      claim: c,
      outcome: {
        status: outcome,
        nextAttemptAt,
        attempt: {
          id: newId("wha"),
          deliveryId: c.id,
          endpointId: c.endpoint.id,
          eventId: c.event.id,
          attemptedAt: startedAt,
          succeeded: ok,
          statusCode: res.statusCode,
          latencyMs: Math.max(0, Math.round(res.latencyMs)),
          responseExcerpt: res.excerpt,
          error: error === null ? null : error.slice(0, 500),
        },
      },
    };
  }
}
