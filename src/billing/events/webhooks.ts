/**
 * Webhook endpoints and their deliveries: the domain types and the storage port. An endpoint
 * receives the events of its environment whose type it lists (all when it lists none); each
 * (endpoint, event) is one delivery, attempted until it succeeds or its retry window ends.
 */
import type { Page, PageResult } from "../pagination.js";
import type { EventType, NewEvent, StoredEvent } from "./types.js";

export type EndpointStatus = "enabled" | "disabled";
export type DeliveryStatus = "pending" | "succeeded" | "failed";

export interface WebhookEndpoint {
  id: string;
  environmentId: string;
  url: string;
  description: string | null;
  /** The event types sent to it; empty: every type. */
  eventTypes: EventType[];
  secret: string;
  status: EndpointStatus;
  /** When a delivery to it last ran out of retries (null: it is healthy); cleared by a success. */
  failingSince: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface Delivery {
  id: string;
  environmentId: string;
  endpointId: string;
  eventId: string;
  eventType: EventType;
  eventCreatedAt: Date;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: Date | null;
  lastAttemptAt: Date | null;
  lastStatusCode: number | null;
  lastError: string | null;
  createdAt: Date;
}

export interface DeliveryAttempt {
  id: string;
  deliveryId: string;
  endpointId: string;
  eventId: string;
  attemptedAt: Date;
  succeeded: boolean;
  statusCode: number | null;
  latencyMs: number;
  responseExcerpt: string | null;
  error: string | null;
}

/** A delivery claimed by one server until `leaseUntil`: what it needs to send it. */
export interface ClaimedDelivery {
  /** The store's row key. */
  seq: number;
  id: string;
  leaseToken: string;
  attempts: number;
  eventCreatedAt: Date;
  endpoint: Pick<WebhookEndpoint, "id" | "url" | "secret" | "environmentId">;
  event: StoredEvent;
  /** The environment's mode (carried in the payload). */
  mode: string;
}

/** What became of an attempt, and what to do next. */
export interface AttemptOutcome {
  attempt: DeliveryAttempt;
  /** succeeded; pending (retry at nextAttemptAt); failed (retries exhausted: the endpoint is marked failing). */
  status: DeliveryStatus;
  nextAttemptAt: Date | null;
}

/** An endpoint needing the operator's attention (the dashboard's overview), and why. */
export interface EndpointAttention {
  endpoint: WebhookEndpoint;
  /** Deliveries attempted and failed that will be tried again (at most 1,000 counted). */
  retrying: number;
  /** Deliveries that ran out of retries since the time asked about (at most 1,000 counted). */
  failedRecently: number;
  /** The endpoint's latest failed attempt. */
  lastError: { at: Date; statusCode: number | null; error: string | null } | null;
}

/** The fields of an endpoint an update writes (absent: left as they are). */
export type EndpointChanges = Partial<Pick<WebhookEndpoint, "url" | "description" | "eventTypes" | "secret" | "status">>;

/** How far the feed can be read (WebhookStore.horizon). */
export interface Horizon {
  /** The last seq that can be read without missing one. */
  upto: number;
  /**
   * True when the window ended at its row limit (more events follow, read on from `upto`);
   * false when it ended at a gap not yet settled or at the last event.
   */
  limited: boolean;
}

export type ReplayTarget = { eventId: string } | { failedSince: Date };

export interface WebhookStore {
  insertEndpoint(e: WebhookEndpoint): Promise<void>;
  getEndpoint(environmentId: string, id: string): Promise<WebhookEndpoint | undefined>;
  listEndpoints(environmentId: string, page: Page): Promise<PageResult<WebhookEndpoint>>;
  /**
   * The environment's endpoints that are failing (a delivery ran out of retries and none has
   * succeeded since), have deliveries being retried, or had a delivery fail since `since`.
   */
  endpointsNeedingAttention(environmentId: string, since: Date): Promise<EndpointAttention[]>;
  /**
   * Writes only the fields `changes` names (and updated_at) to the endpoint, under a row lock on
   * it; when its status really changes, its deliveries flip in the same transaction (disabled:
   * pending ones are held; enabled: held ones are due at `at`). failing_since is the delivery
   * worker's and is never written here. Returns the endpoint as it is now (undefined: none).
   */
  updateEndpoint(environmentId: string, id: string, changes: EndpointChanges, at: Date): Promise<WebhookEndpoint | undefined>;
  /** Soft-deletes it; its pending deliveries are dropped. False when there is none. */
  deleteEndpoint(environmentId: string, id: string, at: Date): Promise<boolean>;
  /** An endpoint's deliveries, newest first, optionally of one status or one event. */
  /** An endpoint's deliveries; `environmentId` is the endpoint's. */
  listDeliveries(endpointId: string, filter: { status?: DeliveryStatus; eventId?: string }, page: Page, environmentId: string): Promise<PageResult<Delivery>>;
  /** An endpoint's attempts, newest first (optionally of one delivery). */
  listAttempts(endpointId: string, deliveryId: string | undefined, page: Page): Promise<PageResult<DeliveryAttempt>>;
  /**
   * Sends again now: one event (a first delivery when the endpoint never had it, e.g. it was
   * created later or filtered the type out), or every delivery that failed since `failedSince`.
   * A delivery that succeeded or failed is replayed as a new delivery with its own id (a receiver
   * deduplicating by `webhook-id` processes it again); one still pending is made due now, keeping
   * its id. Returns how many.
   */
  replay(endpoint: WebhookEndpoint, target: ReplayTarget, at: Date): Promise<number>;
  /**
   * Claims up to `limit` due deliveries of enabled endpoints for this server: each row is
   * locked while it is claimed (rows another server holds are skipped), and the claim lasts
   * until `leaseUntil`; a server that dies holding one leaves it due again then.
   */
  claimDue(now: Date, limit: number, leaseUntil: Date): Promise<ClaimedDelivery[]>;
  /**
   * Fans out up to `limit` events not yet fanned out (oldest first), in one transaction: each
   * event is locked (events another server is fanning out are skipped), one delivery is written
   * per endpoint of its environment that takes its type and existed when it was made (held when the
   * endpoint is disabled), and the event is marked done. The deliveries to enabled endpoints come
   * back claimed by this server until `leaseUntil` (as from claimDue), with how many events it took. A server that dies before
   * the commit leaves the events to be fanned out again; one that dies after it, its claims to expire.
   */
  fanOut(limit: number, leaseUntil: Date): Promise<{ events: number; claims: ClaimedDelivery[] }>;
  /**
   * Records the attempts of claimed deliveries in one transaction, each only if its claim is still
   * this server's (a claim that expired meanwhile belongs to whoever took the delivery over).
   */
  recordAttempts(results: { claim: ClaimedDelivery; outcome: AttemptOutcome }[]): Promise<void>;
  /** One event of an environment, by id. */
  event(environmentId: string, id: string): Promise<StoredEvent | undefined>;
  /** An environment's events with afterSeq < seq <= uptoSeq in order, of these types (all when empty), up to `limit`. */
  eventsBetween(environmentId: string, afterSeq: number, uptoSeq: number, types: readonly EventType[], limit: number): Promise<StoredEvent[]>;
  /**
   * How far events after `afterSeq` (of every environment) can be read without missing one: the
   * end of the run of consecutive seqs, where a missing seq is skipped once an event after it
   * is older than `gapWaitMs` (its transaction rolled back; one still open would be older than
   * any transaction the service runs). One window of a bounded number of events: `limited` says
   * it ended at that bound rather than at a gap or the end.
   */
  horizon(afterSeq: number, gapWaitMs: number, now: Date): Promise<Horizon>;
  /**
   * How far events in (afterSeq, lastSeq] can be read without missing one, by the same rule as
   * horizon, read from lastSeq down through the events younger than `gapWaitMs` only (a gap below
   * an older event is settled), so that a reader far behind does not read every event since its
   * cursor. `limited`: more young events than it reads (nothing above afterSeq vouched for).
   */
  readableUpTo(afterSeq: number, lastSeq: number, gapWaitMs: number, now: Date): Promise<Horizon>;
  /** The newest seq of all events (0 when none). */
  lastSeq(): Promise<number>;
  /** Writes events outside any other change (a transaction of their own). */
  emit(events: NewEvent[]): Promise<void>;
}
