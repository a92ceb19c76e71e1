/**
 * Outgoing events on SQL: the outbox writer (events and their deliveries, inside the caller's
 * transaction), webhook endpoints, the delivery queue the workers claim, and the delivery log.
 */
import type { EntityManager } from "typeorm";
import type { ThresholdStore, ThresholdWrites } from "../../billing/events/thresholds.js";
import type { EventEncoder, EventResource, EventType, EventWrites, NewEvent, StoredEvent } from "../../billing/events/types.js";
import type { Subscription } from "../../billing/subscriptions/types.js";
import type {
  AttemptOutcome,
  ClaimedDelivery,
  Delivery,
  DeliveryAttempt,
  DeliveryStatus,
  EndpointAttention,
  EndpointStatus,
  ReplayTarget,
  WebhookEndpoint,
  WebhookStore,
} from "../../billing/events/webhooks.js";
import { newId, randomBase62 } from "../../billing/ids.js";
import { type Page, type PageResult, toPageResult } from "../../billing/pagination.js";
import type { Entities } from "../entities/index.js";
import { isTransient } from "../errors.js";
import { dbTime, fromDbTime, fromDbTimeOrNull, fromJsonText } from "../raw.js";
import { type Pipeline, type Sql, afterCommit, chunks, placeholders } from "../sql.js";
import { subscriptionFromRow } from "./subscription-store.js";

/** How writeEvents reaches the transaction: statements whose results it does not need, and its commit. */
export interface OutboxTx {
  write: (sql: string, params: unknown[]) => unknown;
  afterCommit: (fn: () => void) => void;
  /** The database (its DataSource): whose delivery workers hear of the commit (watchOutbox). */
  source: object;
}

/** A transaction's entity manager (of Sql.transaction) as an OutboxTx (one round trip per statement). */
export const emOutbox = (em: EntityManager): OutboxTx => ({ write: (q, p) => em.query(q, p), afterCommit: (fn) => afterCommit(em, fn), source: em.connection });

/** A Sql.pipelined transaction as an OutboxTx: writes go with the next read or the COMMIT. */
export const pipelineOutbox = (p: Pipeline, source: object): OutboxTx => ({
  write: (q, params) => {
    p.defer([q, params]);
  },
  afterCommit: (fn) => p.afterCommit(fn),
  source,
});

const outboxWatchers = new WeakMap<object, Set<() => void>>();

/**
 * Calls `fn` whenever a transaction of this process that wrote events to `source` (a DataSource)
 * has committed: the delivery worker fans them out at once rather than at its next poll (which
 * remains, for events other servers write). Returns the unsubscribe.
 */
export function watchOutbox(source: object, fn: () => void): () => void {
  let set = outboxWatchers.get(source);
  if (!set) outboxWatchers.set(source, (set = new Set()));
  set.add(fn);
  return () => set.delete(fn);
}

function outboxCommitted(source: object): void {
  for (const fn of outboxWatchers.get(source) ?? []) fn();
}

interface EndpointRaw {
  id: string;
  environment_id: string;
  url: string;
  description: string | null;
  event_types: unknown;
  secret: string;
  status: string;
  failing_since: unknown;
  created_at: unknown;
  updated_at: unknown;
}

function endpointFromRow(r: EndpointRaw): WebhookEndpoint {
  return {
    id: r.id,
    environmentId: r.environment_id,
    url: r.url,
    description: r.description,
    eventTypes: fromJsonText<EventType[]>(r.event_types) ?? [],
    secret: r.secret,
    status: r.status as EndpointStatus,
    failingSince: fromDbTimeOrNull(r.failing_since),
    createdAt: fromDbTime(r.created_at),
    updatedAt: fromDbTime(r.updated_at),
  };
}

interface EventRaw {
  seq: unknown;
  id: string;
  environment_id: string;
  type: string;
  data: string;
  created_at: unknown;
}

function eventFromRow(r: EventRaw): StoredEvent {
  return { seq: Number(r.seq), id: r.id, environmentId: r.environment_id, type: r.type as EventType, createdAt: fromDbTime(r.created_at), data: r.data };
}

const ENDPOINT_COLUMNS = "id, environment_id, url, description, event_types, secret, status, failing_since, created_at, updated_at";
const EVENT_COLUMNS = "seq, id, environment_id, type, data, created_at";

/** The one object a resource is (its JSON depends on nothing else), or undefined for resources that carry more. */
function resourceObject(r: EventResource): object | undefined {
  switch (r.kind) {
    case "invoice":
      return r.invoice;
    case "subscription":
      return r.subscription;
    case "subject":
      return r.subject;
    default:
      return undefined;
  }
}

/**
 * Writes events through `tx` (the caller's transaction): the outbox write of a change. Each is
 * marked for fan-out (`fanout = 1`); the delivery worker writes its deliveries, one per endpoint
 * that takes it (SqlWebhookStore.fanOut), so the change's transaction reads nothing and costs one
 * statement per 200 events.
 */
export async function writeEvents(tx: OutboxTx, encode: EventEncoder, now: () => Date, events: NewEvent[]): Promise<StoredEvent[]> {
  if (events.length === 0) return [];
  const at = now();
  // Events of one resource object carry the same JSON (a new invoice's created and finalized): encoded once.
  const encoded = new Map<object, string>();
  const data = (r: EventResource): string => {
    const key = resourceObject(r);
    if (key === undefined) return encode(r);
    let text = encoded.get(key);
    if (text === undefined) {
      text = encode(r);
      encoded.set(key, text);
    }
    return text;
  };
  const stored: StoredEvent[] = events.map((e) => ({ seq: 0, id: e.id ?? newId("evt"), environmentId: e.environmentId, type: e.type, createdAt: at, data: data(e.resource) }));
  for (const part of chunks(stored, 200)) {
    await tx.write(
      `INSERT INTO events (id, environment_id, type, data, created_at, fanout) VALUES ${placeholders(part.length, 6)}`,
      part.flatMap((e) => [e.id, e.environmentId, e.type, e.data, dbTime(e.createdAt), 1]),
    );
  }
  const source = tx.source;
  tx.afterCommit(() => outboxCommitted(source));
  return stored;
}

/** The outbox write of one transaction (BillingTx.emit), and usage-threshold marks. */
export function eventWrites(em: EntityManager, encode: EventEncoder, now: () => Date, dialect: "mysql" | "sqlite"): EventWrites & ThresholdWrites {
  return {
    emit: async (events) => {
      await writeEvents(emOutbox(em), encode, now, events);
    },
    markThreshold: async (m, at) => {
      const ignore = dialect === "mysql" ? "INSERT IGNORE" : "INSERT OR IGNORE";
      const n = await changed(em, `${ignore} INTO usage_threshold_marks (subscription_id, period_key, rate_code, percent, event_id, created_at) VALUES (?, ?, ?, ?, ?, ?)`, [
        m.subscriptionId,
        m.periodKey,
        m.rateCode,
        m.percent,
        m.eventId,
        dbTime(at),
      ]);
      return n > 0;
    },
  };
}

/** What a usage-threshold check reads. */
export class SqlThresholdStore implements ThresholdStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
  ) {}

  async fired(subscriptionId: string, periodKey: string): Promise<Set<string>> {
    const rows = await this.sql.query<{ rate_code: string; percent: unknown }[]>("SELECT rate_code, percent FROM usage_threshold_marks WHERE subscription_id = ? AND period_key = ?", [
      subscriptionId,
      periodKey,
    ]);
    return new Set(rows.map((r) => `${r.rate_code}@${Number(r.percent)}`));
  }

  async activeAfter(clockId: string | null, afterId: string, limit: number): Promise<Subscription[]> {
    const rows = await this.sql.run((em) =>
      em
        .createQueryBuilder(this.entities.Subscription, "s")
        .where("s.status = 'active' AND s.id > :after", { after: afterId })
        .andWhere(clockId === null ? "s.test_clock_id IS NULL" : "s.test_clock_id = :clock", { clock: clockId })
        .orderBy("s.id", "ASC")
        .limit(limit)
        .getMany(),
    );
    return rows.map(subscriptionFromRow);
  }
}

interface DeliveryRaw {
  id: string;
  environment_id: string;
  endpoint_id: string;
  event_id: string;
  type: string;
  event_created_at: unknown;
  status: string;
  attempts: unknown;
  next_attempt_at: unknown;
  last_attempt_at: unknown;
  last_status_code: unknown;
  last_error: string | null;
  created_at: unknown;
}

function deliveryFromRow(r: DeliveryRaw): Delivery {
  const status = r.status === "held" ? "pending" : (r.status as DeliveryStatus);
  return {
    id: r.id,
    environmentId: r.environment_id,
    endpointId: r.endpoint_id,
    eventId: r.event_id,
    eventType: r.type as EventType,
    eventCreatedAt: fromDbTime(r.event_created_at),
    status,
    attempts: Number(r.attempts),
    nextAttemptAt: status === "pending" ? fromDbTime(r.next_attempt_at) : null,
    lastAttemptAt: fromDbTimeOrNull(r.last_attempt_at),
    lastStatusCode: r.last_status_code === null ? null : Number(r.last_status_code),
    lastError: r.last_error,
    createdAt: fromDbTime(r.created_at),
  };
}

interface AttemptRaw {
  id: string;
  delivery_id: string;
  endpoint_id: string;
  event_id: string;
  attempted_at: unknown;
  succeeded: unknown;
  status_code: unknown;
  latency_ms: unknown;
  response_excerpt: string | null;
  error: string | null;
}

function attemptFromRow(r: AttemptRaw): DeliveryAttempt {
  return {
    id: r.id,
    deliveryId: r.delivery_id,
    endpointId: r.endpoint_id,
    eventId: r.event_id,
    attemptedAt: fromDbTime(r.attempted_at),
    succeeded: Boolean(Number(r.succeeded)),
    statusCode: r.status_code === null ? null : Number(r.status_code),
    latencyMs: Number(r.latency_ms),
    responseExcerpt: r.response_excerpt,
    error: r.error,
  };
}

export class SqlWebhookStore implements WebhookStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
    private readonly encode: EventEncoder,
    private readonly now: () => Date,
  ) {}

  /**
   * An operator's write over an endpoint's deliveries, in READ COMMITTED (no gap locks against the
   * worker and the outbox), retried when it still loses a deadlock to them.
   */
  private async retried<T>(fn: (em: EntityManager) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.sql.transactionReadCommitted(fn);
      } catch (err) {
        if (attempt >= 5 || !isTransient(err)) throw err;
        await new Promise((r) => setTimeout(r, 10 * attempt * Math.random()));
      }
    }
  }

  async insertEndpoint(e: WebhookEndpoint): Promise<void> {
    await this.sql.query(
      "INSERT INTO webhook_endpoints (id, environment_id, url, description, event_types, secret, status, failing_since, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      [e.id, e.environmentId, e.url, e.description, JSON.stringify(e.eventTypes), e.secret, e.status, null, dbTime(e.createdAt), dbTime(e.updatedAt)],
    );
  }

  async getEndpoint(environmentId: string, id: string): Promise<WebhookEndpoint | undefined> {
    const [r] = await this.sql.query<EndpointRaw[]>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE environment_id = ? AND id = ? AND deleted_at IS NULL`, [environmentId, id]);
    return r ? endpointFromRow(r) : undefined;
  }

  async listEndpoints(environmentId: string, page: Page): Promise<PageResult<WebhookEndpoint>> {
    const rows = await this.sql.query<EndpointRaw[]>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE environment_id = ? AND deleted_at IS NULL ORDER BY seq LIMIT ? OFFSET ?`, [
      environmentId,
      page.limit + 1,
      page.offset,
    ]);
    return toPageResult(rows.map(endpointFromRow), page);
  }

  /**
   * The environment's endpoints (at most 100), then two grouped counts over
   * ix_webhook_deliveries_endpoint_status (endpoint, status, updated_at): deliveries pending after
   * a failed attempt, and deliveries failed since `since`, each bounded by a LIMIT; then, for the
   * endpoints needing attention only, their latest failed attempt (ix_webhook_attempts_endpoint_seq).
   */
  async endpointsNeedingAttention(environmentId: string, since: Date): Promise<EndpointAttention[]> {
    const endpoints = (
      await this.sql.query<EndpointRaw[]>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE environment_id = ? AND deleted_at IS NULL ORDER BY seq LIMIT 100`, [environmentId])
    ).map(endpointFromRow);
    if (endpoints.length === 0) return [];
    const ids = endpoints.map((e) => e.id);
    const inList = ids.map(() => "?").join(", ");
    const counted = async (where: string, params: unknown[]) => {
      const rows = await this.sql.query<{ endpoint_id: string; n: unknown }[]>(
        `SELECT endpoint_id, COUNT(*) AS n FROM (SELECT endpoint_id FROM webhook_deliveries WHERE endpoint_id IN (${inList}) AND ${where} LIMIT 1000) d GROUP BY endpoint_id`,
        [...ids, ...params],
      );
      return new Map(rows.map((r) => [r.endpoint_id, Number(r.n)]));
    };
    const retrying = await counted("status = 'pending' AND attempts > 0", []);
    const failed = await counted("status = 'failed' AND updated_at >= ?", [dbTime(since)]);
    const out: EndpointAttention[] = [];
    for (const e of endpoints) {
      const r = retrying.get(e.id) ?? 0;
      const f = failed.get(e.id) ?? 0;
      if (e.failingSince === null && r === 0 && f === 0) continue;
      const [last] = await this.sql.query<{ attempted_at: unknown; status_code: unknown; error: string | null }[]>(
        "SELECT attempted_at, status_code, error FROM webhook_attempts WHERE endpoint_id = ? AND succeeded = 0 ORDER BY seq DESC LIMIT 1",
        [e.id],
      );
      out.push({
        endpoint: e,
        retrying: r,
        failedRecently: f,
        lastError: last ? { at: fromDbTime(last.attempted_at), statusCode: last.status_code === null ? null : Number(last.status_code), error: last.error } : null,
      });
    }
    return out;
  }

  async updateEndpoint(e: WebhookEndpoint): Promise<void> {
    await this.retried(async (em) => {
      await em.query("UPDATE webhook_endpoints SET url = ?, description = ?, event_types = ?, secret = ?, status = ?, failing_since = ?, updated_at = ? WHERE id = ? AND deleted_at IS NULL", [
        e.url,
        e.description,
        JSON.stringify(e.eventTypes),
        e.secret,
        e.status,
        e.failingSince ? dbTime(e.failingSince) : null,
        dbTime(e.updatedAt),
        e.id,
      ]);
      // A disabled endpoint's pending deliveries are held (not attempted) until it is enabled again.
      if (e.status === "disabled") await em.query("UPDATE webhook_deliveries SET status = 'held' WHERE endpoint_id = ? AND status = 'pending'", [e.id]);
      else await em.query("UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = ? WHERE endpoint_id = ? AND status = 'held'", [dbTime(e.updatedAt), e.id]);
    });
  }

  async deleteEndpoint(environmentId: string, id: string, at: Date): Promise<boolean> {
    return this.retried(async (em) => {
      const res = await em
        .createQueryBuilder()
        .update(this.entities.WebhookEndpoint)
        .set({ deleted_at: at, updated_at: at })
        .where("environment_id = :env AND id = :id AND deleted_at IS NULL", { env: environmentId, id })
        .execute();
      if ((res.affected ?? 0) === 0) return false;
      await em.query("DELETE FROM webhook_deliveries WHERE endpoint_id = ? AND status IN ('pending', 'held')", [id]);
      return true;
    });
  }

  async listDeliveries(endpointId: string, filter: { status?: DeliveryStatus; eventId?: string }, page: Page): Promise<PageResult<Delivery>> {
    const where = ["d.endpoint_id = ?"];
    const params: unknown[] = [endpointId];
    if (filter.status === "pending") where.push("d.status IN ('pending', 'held')");
    else if (filter.status) {
      where.push("d.status = ?");
      params.push(filter.status);
    }
    if (filter.eventId) {
      where.push("d.event_id = ?");
      params.push(filter.eventId);
    }
    const rows = await this.sql.query<DeliveryRaw[]>(
      `SELECT d.id, d.environment_id, d.endpoint_id, d.event_id, e.type, d.event_created_at, d.status, d.attempts, d.next_attempt_at, d.last_attempt_at, d.last_status_code, d.last_error, d.created_at FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE ${where.join(" AND ")} ORDER BY d.seq DESC LIMIT ? OFFSET ?`,
      [...params, page.limit + 1, page.offset],
    );
    return toPageResult(rows.map(deliveryFromRow), page);
  }

  async listAttempts(endpointId: string, deliveryId: string | undefined, page: Page): Promise<PageResult<DeliveryAttempt>> {
    const rows = await this.sql.query<AttemptRaw[]>(
      `SELECT id, delivery_id, endpoint_id, event_id, attempted_at, succeeded, status_code, latency_ms, response_excerpt, error FROM webhook_attempts WHERE endpoint_id = ?${deliveryId ? " AND delivery_id = ?" : ""} ORDER BY seq DESC LIMIT ? OFFSET ?`,
      [endpointId, ...(deliveryId ? [deliveryId] : []), page.limit + 1, page.offset],
    );
    return toPageResult(rows.map(attemptFromRow), page);
  }

  /**
   * A replay of a delivery that was delivered or ran out of retries is a new delivery (its own id,
   * the `webhook-id` receivers dedupe by; `replay_of` names the one it replays), due now with a
   * fresh retry window; the replayed one keeps its status and log. A delivery still pending (or
   * held) has not been delivered yet: it is made due now instead, keeping its id. Only the latest
   * delivery of an (endpoint, event) is replayed (the one no other replays), and each one at most
   * once (the unique key, with INSERT IGNORE: two replays at once make one).
   */
  async replay(endpoint: WebhookEndpoint, target: ReplayTarget, at: Date): Promise<number> {
    const t = dbTime(at);
    const status = endpoint.status === "enabled" ? "pending" : "held";
    const ignore = this.sql.dialect === "mysql" ? "INSERT IGNORE" : "INSERT OR IGNORE";
    const insert = async (em: EntityManager, rows: { eventId: string; replayOf: string }[]) => {
      let n = 0;
      for (const part of chunks(rows, 200)) {
        n += await changed(
          em,
          `${ignore} INTO webhook_deliveries (id, environment_id, endpoint_id, event_id, event_created_at, status, attempts, next_attempt_at, created_at, updated_at, replay_of) VALUES ${placeholders(part.length, 11)}`,
          part.flatMap((r) => [newId("whd"), endpoint.environmentId, endpoint.id, r.eventId, t, status, 0, t, t, t, r.replayOf]),
        );
      }
      return n;
    };
    // The latest deliveries: those no other delivery replays.
    const latest = "NOT EXISTS (SELECT 1 FROM webhook_deliveries r WHERE r.endpoint_id = d.endpoint_id AND r.event_id = d.event_id AND r.replay_of = d.id)";
    return this.retried(async (em) => {
      if ("eventId" in target) {
        const [ev] = (await em.query("SELECT id FROM events WHERE environment_id = ? AND id = ?", [endpoint.environmentId, target.eventId])) as { id: string }[];
        if (!ev) return 0;
        const [d] = (await em.query(`SELECT d.id, d.status FROM webhook_deliveries d WHERE d.endpoint_id = ? AND d.event_id = ? AND ${latest}`, [endpoint.id, ev.id])) as {
          id: string;
          status: string;
        }[];
        if (d && (d.status === "pending" || d.status === "held")) {
          // Not delivered yet: sent now, with a fresh retry window from now (event_created_at is its start).
          await em.query("UPDATE webhook_deliveries SET status = ?, next_attempt_at = ?, lease_token = NULL, event_created_at = ?, updated_at = ? WHERE id = ?", [status, t, t, t, d.id]);
        } else {
          // The endpoint's first delivery of the event (it was created later, or filtered the type out), or a replay.
          await insert(em, [{ eventId: ev.id, replayOf: d ? d.id : "" }]);
        }
        return 1;
      }
      const failed = (await em.query(`SELECT d.id, d.event_id FROM webhook_deliveries d WHERE d.endpoint_id = ? AND d.status = 'failed' AND d.created_at >= ? AND ${latest}`, [
        endpoint.id,
        dbTime(target.failedSince),
      ])) as { id: string; event_id: string }[];
      return insert(
        em,
        failed.map((d) => ({ eventId: d.event_id, replayOf: d.id })),
      );
    });
  }

  async fanOut(limit: number, leaseUntil: Date): Promise<{ events: number; claims: ClaimedDelivery[] }> {
    const mysql = this.sql.dialect === "mysql";
    const token = randomBase62(24);
    // READ COMMITTED on MySQL: the locking read of the fan-out index takes no gap locks (it must
    // not block the changes' inserts of new events), and SKIP LOCKED passes over events another
    // server is fanning out and those of transactions not yet committed.
    return this.sql.pipelined(
      async (p) => {
        const [events] = (await p.run([[`SELECT ${EVENT_COLUMNS} FROM events WHERE fanout = 1 ORDER BY seq LIMIT ?${mysql ? " FOR UPDATE SKIP LOCKED" : ""}`, [limit]]])) as [EventRaw[]];
        if (events.length === 0) return { events: 0, claims: [] };
        const envs = [...new Set(events.map((e) => e.environment_id))];
        // A shared lock on the endpoints: an endpoint disabled or deleted meanwhile waits for this
        // transaction, then holds or drops the deliveries it wrote.
        const [endpoints] = (await p.run([
          [
            `SELECT w.id, w.environment_id, w.url, w.secret, w.event_types, w.status, w.created_at, v.mode FROM webhook_endpoints w JOIN environments v ON v.id = w.environment_id WHERE w.environment_id IN (${envs.map(() => "?").join(", ")}) AND w.deleted_at IS NULL${mysql ? " LOCK IN SHARE MODE" : ""}`,
            envs,
          ],
        ])) as [{ id: string; environment_id: string; url: string; secret: string; event_types: unknown; status: string; created_at: unknown; mode: string }[]];
        const seqs = events.map((e) => Number(e.seq));
        const mark = [`UPDATE events SET fanout = 0 WHERE seq IN (${seqs.map(() => "?").join(", ")})`, seqs] as const;
        const eps = endpoints.map((w) => ({ ...w, types: fromJsonText<string[]>(w.event_types) ?? [], since: fromDbTime(w.created_at).getTime() }));
        const rows: unknown[][] = [];
        const sent = new Map<string, Omit<ClaimedDelivery, "seq">>();
        const at = dbTime(new Date());
        const lease = dbTime(leaseUntil);
        for (const r of events) {
          const e = eventFromRow(r);
          const t = dbTime(e.createdAt);
          for (const w of eps) {
            // An endpoint takes the events of its environment made since it was created, of its types (all when none).
            if (w.environment_id !== e.environmentId || w.since > e.createdAt.getTime() || (w.types.length > 0 && !w.types.includes(e.type))) continue;
            const id = newId("whd");
            if (w.status === "enabled") {
              // Claimed by this server at once (the lease as claimDue's): sent now, without a claim of its own.
              rows.push([id, e.environmentId, w.id, e.id, t, "pending", 0, lease, token, at, at]);
              sent.set(id, {
                id,
                leaseToken: token,
                attempts: 0,
                eventCreatedAt: e.createdAt,
                endpoint: { id: w.id, url: w.url, secret: w.secret, environmentId: w.environment_id },
                event: e,
                mode: w.mode,
              });
            } else {
              // A disabled endpoint's deliveries are held until it is enabled again.
              rows.push([id, e.environmentId, w.id, e.id, t, "held", 0, at, null, at, at]);
            }
          }
        }
        if (rows.length === 0) {
          p.defer(mark);
          return { events: events.length, claims: [] };
        }
        // IGNORE: a delivery of the same (endpoint, event) made by a replay before the fan-out stays
        // as it is (and is not sent from here); only rows under this claim's token are sent.
        const ignore = mysql ? "INSERT IGNORE" : "INSERT OR IGNORE";
        const statements: [string, unknown[]][] = chunks(rows, 200).map((part) => [
          `${ignore} INTO webhook_deliveries (id, environment_id, endpoint_id, event_id, event_created_at, status, attempts, next_attempt_at, lease_token, created_at, updated_at) VALUES ${placeholders(part.length, 11)}`,
          part.flat(),
        ]);
        const ids = [...sent.keys()];
        const mine = ids.length === 0 ? [] : [[`SELECT seq, id FROM webhook_deliveries WHERE id IN (${ids.map(() => "?").join(", ")}) AND lease_token = ?`, [...ids, token]] as [string, unknown[]]];
        const results = await p.finish([...statements, [mark[0], [...mark[1]]], ...mine]);
        if (mine.length === 0) return { events: events.length, claims: [] };
        const owned = results[results.length - 1] as { seq: unknown; id: string }[];
        const out: ClaimedDelivery[] = [];
        for (const o of owned) {
          const c = sent.get(o.id);
          if (c) out.push({ ...c, seq: Number(o.seq) });
        }
        return { events: events.length, claims: out };
      },
      { readCommitted: true },
    );
  }

  async claimDue(now: Date, limit: number, leaseUntil: Date): Promise<ClaimedDelivery[]> {
    const token = randomBase62(24);
    // Candidates by a plain read first, then locked and updated by primary key only: a locking
    // range scan of the due index (or a scan the optimizer prefers on a small table) would take
    // gap locks that block the outbox's inserts and deadlock with them.
    const candidates = await this.sql.query<{ seq: unknown }[]>("SELECT seq FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?", [
      dbTime(now),
      limit,
    ]);
    if (candidates.length === 0) return [];
    const claimed = await this.sql.transactionReadCommitted(async (em) => {
      const lock = this.sql.dialect === "mysql" ? " FOR UPDATE SKIP LOCKED" : "";
      const rows = (await em.query(
        `SELECT seq, id, attempts, event_created_at FROM webhook_deliveries WHERE seq IN (${candidates.map(() => "?").join(", ")}) AND status = 'pending' AND next_attempt_at <= ?${lock}`,
        [...candidates.map((c) => Number(c.seq)), dbTime(now)],
      )) as { seq: unknown; id: string; attempts: unknown; event_created_at: unknown }[];
      if (rows.length === 0) return [];
      await em.query(`UPDATE webhook_deliveries SET lease_token = ?, next_attempt_at = ? WHERE seq IN (${rows.map(() => "?").join(", ")})`, [
        token,
        dbTime(leaseUntil),
        ...rows.map((r) => Number(r.seq)),
      ]);
      return rows;
    });
    if (claimed.length === 0) return [];

    const details = await this.sql.query<(EventRaw & { delivery_id: string; endpoint_id: string; url: string; secret: string; mode: string })[]>(
      `SELECT d.id AS delivery_id, d.endpoint_id, w.url, w.secret, v.mode, e.seq, e.id, e.environment_id, e.type, e.data, e.created_at FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id JOIN events e ON e.id = d.event_id JOIN environments v ON v.id = d.environment_id WHERE d.id IN (${claimed.map(() => "?").join(", ")})`,
      claimed.map((r) => r.id),
    );
    const byId = new Map(details.map((d) => [d.delivery_id, d]));
    const out: ClaimedDelivery[] = [];
    for (const r of claimed) {
      const d = byId.get(r.id);
      if (!d) continue;
      out.push({
        seq: Number(r.seq),
        id: r.id,
        leaseToken: token,
        attempts: Number(r.attempts),
        eventCreatedAt: fromDbTime(r.event_created_at),
        endpoint: { id: d.endpoint_id, url: d.url, secret: d.secret, environmentId: d.environment_id },
        event: eventFromRow(d),
        mode: d.mode,
      });
    }
    return out;
  }

  async recordAttempts(results: { claim: ClaimedDelivery; outcome: AttemptOutcome }[]): Promise<void> {
    if (results.length === 0) return;
    const lock = this.sql.dialect === "mysql" ? " FOR UPDATE" : "";
    // Two round trips on MySQL: the claims still this server's (locked until the commit, so that no
    // other server takes one over meanwhile), then every write with the COMMIT. READ COMMITTED: no
    // next-key lock at the end of the table against a fan-out's inserts (which holds its endpoints
    // shared while this clears their failing mark: a deadlock in REPEATABLE READ). A deadlock lost
    // anyway is retried: unrecorded claims would be sent again once their lease ends.
    for (let attempt = 1; ; attempt++) {
      try {
        await this.recordOnce(results, lock);
        return;
      } catch (err) {
        if (attempt >= 4 || !isTransient(err)) throw err;
        await new Promise((r) => setTimeout(r, 10 * attempt * Math.random()));
      }
    }
  }

  private async recordOnce(results: { claim: ClaimedDelivery; outcome: AttemptOutcome }[], lock: string): Promise<void> {
    await this.sql.pipelined(
      async (p) => {
        const byToken = [...groupBy(results, (r) => r.claim.leaseToken)];
        const found = (await p.run(
          byToken.map(([token, group]) => [
            `SELECT seq FROM webhook_deliveries WHERE seq IN (${group.map(() => "?").join(", ")}) AND lease_token = ?${lock}`,
            [...group.map((r) => r.claim.seq), token],
          ]),
        )) as { seq: unknown }[][];
        const mine = new Set(found.flat().map((r) => Number(r.seq)));
        const logged = results.filter((r) => mine.has(r.claim.seq));
        if (logged.length === 0) return;
        // Successes at once (by primary key), grouped by status code; the others one by one.
        const ok = logged.filter((r) => r.outcome.status === "succeeded");
        for (const group of groupBy(ok, (r) => String(r.outcome.attempt.statusCode)).values()) {
          const at = dbTime(group[0]?.outcome.attempt.attemptedAt ?? new Date());
          p.defer([
            `UPDATE webhook_deliveries SET status = 'succeeded', attempts = attempts + 1, lease_token = NULL, last_attempt_at = ?, last_status_code = ?, last_error = NULL, updated_at = ? WHERE seq IN (${group.map(() => "?").join(", ")})`,
            [at, group[0]?.outcome.attempt.statusCode, at, ...group.map((r) => r.claim.seq)],
          ]);
        }
        for (const { claim, outcome } of logged) {
          if (outcome.status === "succeeded") continue;
          const a = outcome.attempt;
          const at = dbTime(a.attemptedAt);
          p.defer([
            "UPDATE webhook_deliveries SET status = ?, attempts = attempts + 1, next_attempt_at = ?, lease_token = NULL, last_attempt_at = ?, last_status_code = ?, last_error = ?, updated_at = ? WHERE seq = ?",
            [outcome.status, dbTime(outcome.nextAttemptAt ?? a.attemptedAt), at, a.statusCode, a.error, at, claim.seq],
          ]);
        }
        for (const part of chunks(logged, 200)) {
          p.defer([
            `INSERT INTO webhook_attempts (id, delivery_id, endpoint_id, event_id, attempted_at, succeeded, status_code, latency_ms, response_excerpt, error) VALUES ${placeholders(part.length, 10)}`,
            part.flatMap(({ outcome: { attempt: a } }) => [
              a.id,
              a.deliveryId,
              a.endpointId,
              a.eventId,
              dbTime(a.attemptedAt),
              a.succeeded ? 1 : 0,
              a.statusCode,
              a.latencyMs,
              a.responseExcerpt,
              a.error,
            ]),
          ]);
        }
        // An endpoint whose delivery ran out of retries is failing until one of its deliveries succeeds.
        const failing = [...new Set(logged.filter((r) => r.outcome.status === "failed").map((r) => r.claim.endpoint.id))];
        const healed = [...new Set(logged.filter((r) => r.outcome.status === "succeeded").map((r) => r.claim.endpoint.id))].filter((id) => !failing.includes(id));
        const now = dbTime(logged[0]?.outcome.attempt.attemptedAt ?? new Date());
        for (const id of failing) p.defer(["UPDATE webhook_endpoints SET failing_since = ? WHERE id = ? AND failing_since IS NULL", [now, id]]);
        for (const id of healed) p.defer(["UPDATE webhook_endpoints SET failing_since = NULL WHERE id = ? AND failing_since IS NOT NULL", [id]]);
      },
      { readCommitted: true },
    );
  }

  async event(environmentId: string, id: string): Promise<StoredEvent | undefined> {
    const [r] = await this.sql.query<EventRaw[]>(`SELECT ${EVENT_COLUMNS} FROM events WHERE environment_id = ? AND id = ?`, [environmentId, id]);
    return r ? eventFromRow(r) : undefined;
  }

  async eventsBetween(environmentId: string, afterSeq: number, uptoSeq: number, types: readonly EventType[], limit: number): Promise<StoredEvent[]> {
    const typeFilter = types.length > 0 ? ` AND type IN (${types.map(() => "?").join(", ")})` : "";
    const rows = await this.sql.query<EventRaw[]>(`SELECT ${EVENT_COLUMNS} FROM events WHERE environment_id = ? AND seq > ? AND seq <= ?${typeFilter} ORDER BY seq LIMIT ?`, [
      environmentId,
      afterSeq,
      uptoSeq,
      ...types,
      limit,
    ]);
    return rows.map(eventFromRow);
  }

  async horizon(afterSeq: number, gapWaitMs: number, now: Date): Promise<number> {
    const rows = await this.sql.query<{ seq: unknown; created_at: unknown }[]>("SELECT seq, created_at FROM events WHERE seq > ? ORDER BY seq LIMIT 2000", [afterSeq]);
    const settled = now.getTime() - gapWaitMs;
    let upto = afterSeq;
    for (const r of rows) {
      const seq = Number(r.seq);
      if (seq !== upto + 1 && fromDbTime(r.created_at).getTime() > settled) break;
      upto = seq;
    }
    return upto;
  }

  async lastSeq(): Promise<number> {
    const [r] = await this.sql.query<{ seq: unknown }[]>("SELECT MAX(seq) AS seq FROM events", []);
    return r?.seq === null || r?.seq === undefined ? 0 : Number(r.seq);
  }

  async emit(events: NewEvent[]): Promise<void> {
    if (events.length === 0) return;
    await this.sql.transaction((em) => writeEvents(emOutbox(em), this.encode, this.now, events));
  }
}

/**
 * Deliveries not yet delivered (pending, or held by a disabled endpoint), counting those of
 * events not yet fanned out (one per endpoint that will take the event), and the creation time
 * of the oldest event with one pending to an enabled endpoint (null when none): the webhook lag.
 */
export async function webhookBacklog(sql: Sql): Promise<{ pending: number; oldestPendingAt: Date | null }> {
  // By the due index (status first), and by the fan-out index (fanout first).
  const [d] = await sql.query<{ n: unknown; t: unknown }[]>(
    "SELECT COUNT(*) AS n, MIN(CASE WHEN status = 'pending' THEN event_created_at END) AS t FROM webhook_deliveries WHERE status IN ('pending', 'held')",
    [],
  );
  const quoted = sql.dialect === "mysql" ? "CONCAT('\"', e.type, '\"')" : "('\"' || e.type || '\"')";
  const [f] = await sql.query<{ n: unknown; t: unknown }[]>(
    `SELECT COUNT(*) AS n, MIN(CASE WHEN w.status = 'enabled' THEN e.created_at END) AS t FROM events e JOIN webhook_endpoints w ON w.environment_id = e.environment_id AND w.deleted_at IS NULL AND w.created_at <= e.created_at WHERE e.fanout = 1 AND (w.event_types = '[]' OR INSTR(w.event_types, ${quoted}) > 0)`,
    [],
  );
  const times = [fromDbTimeOrNull(d?.t), fromDbTimeOrNull(f?.t)].filter((t): t is Date => t !== null);
  return {
    pending: Number(d?.n ?? 0) + Number(f?.n ?? 0),
    oldestPendingAt: times.length === 0 ? null : new Date(Math.min(...times.map((t) => t.getTime()))),
  };
}

/** Rows a statement in a transaction changed (the query runner's structured result, on both drivers). */
async function changed(em: EntityManager, sql: string, params: unknown[]): Promise<number> {
  const runner = em.queryRunner;
  if (!runner) throw new Error("changed() needs a transaction's entity manager");
  const res = await runner.query(sql, params, true);
  return res.affected ?? 0;
}

function groupBy<T>(list: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const m = new Map<string, T[]>();
  for (const item of list) {
    const k = key(item);
    const g = m.get(k);
    if (g) g.push(item);
    else m.set(k, [item]);
  }
  return m;
}
