/**
 * Outgoing events on SQL: webhook endpoints, the delivery log, replays and the event feed. The
 * outbox writer (events written in the caller's transaction) is outbox.ts; the delivery queue the
 * workers claim is webhook-queue.ts.
 */
import type { EntityManager } from "typeorm";
import type { EventEncoder, EventType, NewEvent, StoredEvent } from "../../billing/events/types.js";
import type {
  AttemptOutcome,
  ClaimedDelivery,
  Delivery,
  DeliveryAttempt,
  DeliveryStatus,
  EndpointAttention,
  EndpointChanges,
  Horizon,
  ReplayTarget,
  WebhookEndpoint,
  WebhookStore,
} from "../../billing/events/webhooks.js";
import { newId } from "../../billing/ids.js";
import { type Page, type PageResult, toPageResult } from "../../billing/pagination.js";
import type { Entities } from "../entities/index.js";
import { isTransient } from "../errors.js";
import { dbTime, fromDbTime } from "../raw.js";
import { type Sql, chunks, placeholders } from "../sql.js";
import { changed, emOutbox, writeEvents } from "./outbox.js";
import { SqlDeliveryQueue } from "./webhook-queue.js";
import { type AttemptRaw, ENDPOINT_COLUMNS, EVENT_COLUMNS, type DeliveryRaw, type EndpointRaw, type EventRaw, attemptFromRow, deliveryFromRow, endpointFromRow, eventFromRow } from "./webhook-rows.js";

/** How many windows of 2,000 events younger than the gap wait readableUpTo reads at most. */
const MAX_FRESH_WINDOWS = 25;

export class SqlWebhookStore implements WebhookStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
    private readonly encode: EventEncoder,
    private readonly now: () => Date,
  ) {
    this.queue = new SqlDeliveryQueue(sql);
  }

  /** The delivery queue (fan-out, claims, attempts). */
  private readonly queue: SqlDeliveryQueue;

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

  /**
   * The endpoint's row is locked first (FOR UPDATE: a fan-out holding it shared, a replay or
   * another update waits), then only the named columns are written: a rotate or an update never
   * writes back a status or failing_since it read earlier. The held/pending flip runs only when
   * the status really changes, in the same transaction as the row it follows.
   */
  async updateEndpoint(environmentId: string, id: string, changes: EndpointChanges, at: Date): Promise<WebhookEndpoint | undefined> {
    const lock = this.sql.dialect === "mysql" ? " FOR UPDATE" : "";
    const select = `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE environment_id = ? AND id = ? AND deleted_at IS NULL`;
    return this.retried(async (em) => {
      const [before] = (await em.query(`${select}${lock}`, [environmentId, id])) as EndpointRaw[];
      if (!before) return undefined;
      const sets: string[] = ["updated_at = ?"];
      const params: unknown[] = [dbTime(at)];
      const set = (column: string, value: unknown) => {
        sets.push(`${column} = ?`);
        params.push(value);
      };
      if (changes.url !== undefined) set("url", changes.url);
      if (changes.description !== undefined) set("description", changes.description);
      if (changes.eventTypes !== undefined) set("event_types", JSON.stringify(changes.eventTypes));
      if (changes.secret !== undefined) set("secret", changes.secret);
      const flip = changes.status !== undefined && changes.status !== before.status;
      if (flip) set("status", changes.status);
      await em.query(`UPDATE webhook_endpoints SET ${sets.join(", ")} WHERE environment_id = ? AND id = ?`, [...params, environmentId, id]);
      // A disabled endpoint's pending deliveries are held (not attempted) until it is enabled again.
      if (flip && changes.status === "disabled")
        await em.query("UPDATE webhook_deliveries SET status = 'held' WHERE environment_id = ? AND endpoint_id = ? AND status = 'pending'", [environmentId, id]);
      else if (flip)
        await em.query("UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = ? WHERE environment_id = ? AND endpoint_id = ? AND status = 'held'", [dbTime(at), environmentId, id]);
      const [after] = (await em.query(select, [environmentId, id])) as EndpointRaw[];
      return after ? endpointFromRow(after) : undefined;
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
      await em.query("DELETE FROM webhook_deliveries WHERE environment_id = ? AND endpoint_id = ? AND status IN ('pending', 'held')", [environmentId, id]);
      return true;
    });
  }

  async listDeliveries(endpointId: string, filter: { status?: DeliveryStatus; eventId?: string }, page: Page, environmentId: string): Promise<PageResult<Delivery>> {
    const where = ["d.environment_id = ? AND d.endpoint_id = ?"];
    const params: unknown[] = [environmentId, endpointId];
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
      `SELECT d.id, d.environment_id, d.endpoint_id, d.event_id, e.type, d.event_created_at, d.status, d.attempts, d.next_attempt_at, d.last_attempt_at, d.last_status_code, d.last_error, d.created_at FROM webhook_deliveries d JOIN events e ON e.environment_id = d.environment_id AND e.id = d.event_id WHERE ${where.join(" AND ")} ORDER BY d.seq DESC LIMIT ? OFFSET ?`,
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
    const mysql = this.sql.dialect === "mysql";
    const ignore = mysql ? "INSERT IGNORE" : "INSERT OR IGNORE";
    let status = "pending";
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
      // The endpoint's status as it is now, held shared until the commit: an update that disables
      // or enables it meanwhile waits, then flips what this wrote (the caller's read may be stale).
      const [ep] = (await em.query(`SELECT status FROM webhook_endpoints WHERE environment_id = ? AND id = ? AND deleted_at IS NULL${mysql ? " LOCK IN SHARE MODE" : ""}`, [
        endpoint.environmentId,
        endpoint.id,
      ])) as { status: string }[];
      if (!ep) return 0;
      status = ep.status === "enabled" ? "pending" : "held";
      if ("eventId" in target) {
        const [ev] = (await em.query("SELECT id FROM events WHERE environment_id = ? AND id = ?", [endpoint.environmentId, target.eventId])) as { id: string }[];
        if (!ev) return 0;
        const [d] = (await em.query(`SELECT d.id, d.status FROM webhook_deliveries d WHERE d.endpoint_id = ? AND d.event_id = ? AND ${latest}`, [endpoint.id, ev.id])) as {
          id: string;
          status: string;
        }[];
        if (d && (d.status === "pending" || d.status === "held")) {
          // Not delivered yet: sent now, with a fresh retry window from now (event_created_at is its
          // start). One a worker is sending (its lease still runs) is left alone: it is being sent
          // already, and clearing its lease would drop that attempt's record and send it again.
          await em.query(
            "UPDATE webhook_deliveries SET status = ?, next_attempt_at = ?, lease_token = NULL, event_created_at = ?, updated_at = ? WHERE id = ? AND (lease_token IS NULL OR next_attempt_at <= ?)",
            [status, t, t, t, d.id, t],
          );
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

  fanOut(limit: number, leaseUntil: Date): Promise<{ events: number; claims: ClaimedDelivery[] }> {
    return this.queue.fanOut(limit, leaseUntil);
  }

  claimDue(now: Date, limit: number, leaseUntil: Date): Promise<ClaimedDelivery[]> {
    return this.queue.claimDue(now, limit, leaseUntil);
  }

  recordAttempts(results: { claim: ClaimedDelivery; outcome: AttemptOutcome }[]): Promise<void> {
    return this.queue.recordAttempts(results);
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

  async horizon(afterSeq: number, gapWaitMs: number, now: Date): Promise<Horizon> {
    const window = 2000;
    const rows = await this.sql.query<{ seq: unknown; created_at: unknown }[]>("SELECT seq, created_at FROM events WHERE seq > ? ORDER BY seq LIMIT ?", [afterSeq, window]);
    const settled = now.getTime() - gapWaitMs;
    let upto = afterSeq;
    for (const r of rows) {
      const seq = Number(r.seq);
      if (seq !== upto + 1 && fromDbTime(r.created_at).getTime() > settled) return { upto, limited: false };
      upto = seq;
    }
    return { upto, limited: rows.length === window };
  }

  async readableUpTo(afterSeq: number, lastSeq: number, gapWaitMs: number, now: Date): Promise<Horizon> {
    // From `lastSeq` down: only a gap right below an event younger than gapWaitMs holds readers
    // back, so the walk stops at the first older event (every gap below it is settled).
    const window = 2000;
    const settled = now.getTime() - gapWaitMs;
    let upto = lastSeq;
    let above: { seq: number; fresh: boolean } | undefined;
    let below = lastSeq + 1;
    for (let n = 0; n < MAX_FRESH_WINDOWS; n++) {
      const rows = await this.sql.query<{ seq: unknown; created_at: unknown }[]>("SELECT seq, created_at FROM events WHERE seq > ? AND seq < ? ORDER BY seq DESC LIMIT ?", [afterSeq, below, window]);
      for (const r of rows) {
        const seq = Number(r.seq);
        if (above && above.seq - seq > 1 && above.fresh) upto = seq;
        above = { seq, fresh: fromDbTime(r.created_at).getTime() > settled };
        if (!above.fresh) return { upto, limited: false };
      }
      if (rows.length < window) {
        if (above && above.seq - afterSeq > 1 && above.fresh) upto = afterSeq;
        return { upto, limited: false };
      }
      below = above?.seq ?? afterSeq;
    }
    // More fresh events than the walk reads: nothing above afterSeq is vouched for.
    return { upto: afterSeq, limited: true };
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
