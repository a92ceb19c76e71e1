/**
 * Webhook endpoints of an environment (DESIGN §10): create, read, update, delete, rotate the
 * signing secret, the delivery log, and replay. Which URLs are allowed is the injected guard's
 * call (src/webhooks/guard.ts: not this service's own or a private host unless configured).
 */
import { NotFoundError, Violations } from "../errors.js";
import { newId, randomBase62 } from "../ids.js";
import { type PageResult, checkPage } from "../pagination.js";
import type { Caller } from "../tenancy.js";
import { EVENT_TYPES, type EventType, isEventType } from "./types.js";
import type { Delivery, DeliveryAttempt, DeliveryStatus, EndpointAttention, EndpointChanges, EndpointStatus, WebhookEndpoint, WebhookStore } from "./webhooks.js";

export const MAX_URL = 2000;
export const MAX_ENDPOINTS_PER_ENVIRONMENT = 100;

/** Why a URL may not receive webhooks (its scheme, its host), or undefined when it may. */
export type UrlGuard = (url: URL) => string | undefined;

export interface EndpointInput {
  url?: string;
  description?: string | null;
  eventTypes?: string[];
  status?: string;
}

/** A new signing secret: `whsec_` and 32 base62 characters (about 190 random bits). */
export function newSecret(): string {
  return `whsec_${randomBase62(32)}`;
}

export class WebhookEndpoints {
  constructor(
    private readonly store: WebhookStore,
    private readonly guard: UrlGuard,
    private readonly now: () => Date,
  ) {}

  private check(input: EndpointInput, v: Violations, creating: boolean): void {
    if (input.url !== undefined || creating) {
      const raw = input.url ?? "";
      if (raw === "") v.add("url", "is required");
      else if (raw.length > MAX_URL) v.add("url", `must have at most ${MAX_URL} characters`);
      else {
        let u: URL | undefined;
        try {
          u = new URL(raw);
        } catch {
          v.add("url", "must be an absolute http or https URL");
        }
        if (u) {
          if (u.protocol !== "http:" && u.protocol !== "https:") v.add("url", "must be an http or https URL");
          else {
            const problem = this.guard(u);
            if (problem) v.add("url", problem);
          }
        }
      }
    }
    if (input.description !== undefined && input.description !== null && input.description.length > 255) v.add("description", "must have at most 255 characters");
    (input.eventTypes ?? []).forEach((t, i) => {
      if (!isEventType(t)) v.add(`event_types[${i}]`, `unknown event type ${JSON.stringify(t)}; one of ${EVENT_TYPES.join(", ")}`);
    });
    if (input.status !== undefined && input.status !== "enabled" && input.status !== "disabled") v.add("status", "must be enabled or disabled");
  }

  async create(caller: Caller, input: EndpointInput): Promise<WebhookEndpoint> {
    const v = new Violations();
    this.check(input, v, true);
    v.throwIfAny();
    const existing = await this.store.listEndpoints(caller.environmentId, { limit: MAX_ENDPOINTS_PER_ENVIRONMENT, offset: 0 });
    if (existing.items.length >= MAX_ENDPOINTS_PER_ENVIRONMENT) v.add("url", `an environment has at most ${MAX_ENDPOINTS_PER_ENVIRONMENT} webhook endpoints`);
    v.throwIfAny();
    const at = this.now();
    const e: WebhookEndpoint = {
      id: newId("we"),
      environmentId: caller.environmentId,
      url: input.url as string,
      description: input.description || null,
      eventTypes: [...new Set(input.eventTypes ?? [])] as EventType[],
      secret: newSecret(),
      status: (input.status as EndpointStatus | undefined) ?? "enabled",
      failingSince: null,
      createdAt: at,
      updatedAt: at,
    };
    await this.store.insertEndpoint(e);
    return e;
  }

  async get(caller: Caller, id: string): Promise<WebhookEndpoint> {
    const e = id === "" ? undefined : await this.store.getEndpoint(caller.environmentId, id);
    if (!e) throw new NotFoundError("WEBHOOK_ENDPOINT_NOT_FOUND", `webhook endpoint ${JSON.stringify(id)} not found`, { endpoint_id: id });
    return e;
  }

  async list(caller: Caller, limit?: number, offset?: number): Promise<PageResult<WebhookEndpoint>> {
    const v = new Violations();
    const page = checkPage(limit, offset, v);
    v.throwIfAny();
    return this.store.listEndpoints(caller.environmentId, page);
  }

  /** Endpoints failing, retrying deliveries, or with a delivery failed in the last `hours` hours (the dashboard's overview). */
  async needingAttention(caller: Caller, hours = 24): Promise<EndpointAttention[]> {
    return this.store.endpointsNeedingAttention(caller.environmentId, new Date(this.now().getTime() - hours * 3_600_000));
  }

  async update(caller: Caller, id: string, input: EndpointInput): Promise<WebhookEndpoint> {
    const v = new Violations();
    this.check(input, v, false);
    v.throwIfAny();
    const e = await this.get(caller, id);
    // Only the fields the input names: the status and failing mark are as the store has them when
    // it writes (a disable or a worker's mark made since this read is kept).
    const changes: EndpointChanges = {};
    if (input.url !== undefined) changes.url = input.url;
    if (input.description !== undefined) changes.description = input.description || null;
    if (input.eventTypes !== undefined) changes.eventTypes = [...new Set(input.eventTypes)] as EventType[];
    if (input.status !== undefined) changes.status = input.status as EndpointStatus;
    return this.write(caller, e.id, changes);
  }

  private async write(caller: Caller, id: string, changes: EndpointChanges): Promise<WebhookEndpoint> {
    const next = await this.store.updateEndpoint(caller.environmentId, id, changes, this.now());
    if (!next) throw new NotFoundError("WEBHOOK_ENDPOINT_NOT_FOUND", `webhook endpoint ${JSON.stringify(id)} not found`, { endpoint_id: id });
    return next;
  }

  async delete(caller: Caller, id: string): Promise<WebhookEndpoint> {
    const e = await this.get(caller, id);
    if (!(await this.store.deleteEndpoint(caller.environmentId, e.id, this.now()))) {
      throw new NotFoundError("WEBHOOK_ENDPOINT_NOT_FOUND", `webhook endpoint ${JSON.stringify(id)} not found`, { endpoint_id: id });
    }
    return e;
  }

  /** A new secret at once: deliveries from now on are signed with it only. */
  async rotateSecret(caller: Caller, id: string): Promise<WebhookEndpoint> {
    const e = await this.get(caller, id);
    return this.write(caller, e.id, { secret: newSecret() });
  }

  async deliveries(caller: Caller, id: string, filter: { status: string; eventId: string }, limit?: number, offset?: number): Promise<PageResult<Delivery>> {
    const v = new Violations();
    const page = checkPage(limit, offset, v);
    if (filter.status !== "" && !["pending", "succeeded", "failed"].includes(filter.status)) v.add("status", "must be pending, succeeded or failed");
    v.throwIfAny();
    const e = await this.get(caller, id);
    return this.store.listDeliveries(e.id, { status: (filter.status || undefined) as DeliveryStatus | undefined, eventId: filter.eventId || undefined }, page, caller.environmentId);
  }

  async attempts(caller: Caller, id: string, deliveryId: string, limit?: number, offset?: number): Promise<PageResult<DeliveryAttempt>> {
    const v = new Violations();
    const page = checkPage(limit, offset, v);
    v.throwIfAny();
    const e = await this.get(caller, id);
    return this.store.listAttempts(e.id, deliveryId || undefined, page);
  }

  /** Sends one event again, or every failed delivery since a time; returns how many were made due. */
  async replay(caller: Caller, id: string, target: { eventId: string; failedSince: Date | undefined }): Promise<number> {
    const v = new Violations();
    if ((target.eventId === "") === (target.failedSince === undefined)) v.add("event_id", "give exactly one of event_id and failed_since");
    v.throwIfAny();
    const e = await this.get(caller, id);
    if (target.failedSince) return this.store.replay(e, { failedSince: target.failedSince }, this.now());
    const n = await this.store.replay(e, { eventId: target.eventId }, this.now());
    if (n === 0) throw new NotFoundError("EVENT_NOT_FOUND", `event ${JSON.stringify(target.eventId)} not found`, { event_id: target.eventId });
    return n;
  }
}
