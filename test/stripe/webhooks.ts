/**
 * The fake Stripe's webhook sender: Stripe `event` objects POSTed as JSON to the configured URL,
 * signed in `Stripe-Signature` with the official library's `webhooks.generateTestHeaderString`,
 * so `stripe.webhooks.constructEvent(body, header, secret)` verifies them. Test switches: deliver
 * each event twice, hold events and deliver them in reverse order, sign with a wrong secret.
 */
import Stripe from "stripe";
import { newId, now, type Obj } from "./objects.js";

export interface Delivery {
  eventId: string;
  type: string;
  status: number | "error";
  badSignature: boolean;
  body: string;
}

export interface DeliveryOptions {
  /** Each event is sent twice (same id, same body). */
  twice?: boolean;
  /** Events are held until `release()`, which sends them newest first. */
  outOfOrder?: boolean;
  /** Events are signed with a secret other than the configured one. */
  badSignature?: boolean;
  /** Events are recorded, never sent (Stripe gave up on the endpoint). */
  dropped?: boolean;
}

const signer = new Stripe("sk_test_signer");

export class WebhookSender {
  url?: string;
  secret?: string;
  options: DeliveryOptions = {};
  readonly events: Obj[] = [];
  readonly deliveries: Delivery[] = [];
  /** What Stripe's schema refuses in an event (a drifted one is recorded, not sent). */
  check?: (event: Obj) => string[];
  private held: Obj[] = [];
  private inflight = new Set<Promise<void>>();

  /** A new event of `type` about `object` (recorded; sent if a URL is configured). */
  emit(type: string, object: Obj, idempotencyKey: string | null): Promise<void> {
    const event: Obj = {
      id: newId("evt"),
      object: "event",
      api_version: "2023-08-16",
      created: now(),
      data: { object },
      livemode: false,
      pending_webhooks: this.url ? 1 : 0,
      request: { id: newId("req"), idempotency_key: idempotencyKey },
      type,
    };
    this.events.push(event);
    const problems = this.check?.(event) ?? [];
    if (problems.length > 0) return Promise.resolve(); // recorded as drift by `check`; never sent
    if (!this.url || this.options.dropped) return Promise.resolve();
    if (this.options.outOfOrder) {
      this.held.push(event);
      return Promise.resolve();
    }
    return this.track(this.deliver(event));
  }

  /** Sends the held events, newest first. */
  release(): Promise<void> {
    const held = this.held.reverse();
    this.held = [];
    return this.track(
      (async () => {
        for (const e of held) await this.deliver(e);
      })(),
    );
  }

  /** Sends event `id` again (as Stripe's retries do), with these options. */
  redeliver(id: string, opts: DeliveryOptions = {}): Promise<void> {
    const e = this.events.find((x) => x.id === id);
    if (!e) throw new Error(`fake stripe: no event ${id}`);
    return this.track(this.deliver(e, opts));
  }

  /** Resolves once every delivery under way has answered. */
  async settle(): Promise<void> {
    while (this.inflight.size > 0) await Promise.all([...this.inflight]);
  }

  private track(p: Promise<void>): Promise<void> {
    this.inflight.add(p);
    return p.finally(() => this.inflight.delete(p));
  }

  private async deliver(event: Obj, opts: DeliveryOptions = this.options): Promise<void> {
    const times = opts.twice ? 2 : 1;
    for (let i = 0; i < times; i++) await this.post(event, opts.badSignature === true);
  }

  private async post(event: Obj, badSignature: boolean): Promise<void> {
    const url = this.url as string;
    const body = JSON.stringify(event, null, 2);
    const secret = badSignature ? "whsec_not_the_configured_secret" : (this.secret ?? "");
    const header = signer.webhooks.generateTestHeaderString({ payload: body, secret });
    let status: number | "error";
    try {
      const res = await fetch(url, {
        method: "POST",
        body,
        headers: { "content-type": "application/json; charset=utf-8", "stripe-signature": header, "user-agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)" },
        // Stripe gives up on an endpoint that does not answer; so does the fake (settle() and stop() never hang on one).
        signal: AbortSignal.timeout(10_000),
      });
      await res.arrayBuffer();
      status = res.status;
    } catch {
      status = "error";
    }
    this.deliveries.push({ eventId: event.id, type: event.type, status, badSignature, body });
  }
}
