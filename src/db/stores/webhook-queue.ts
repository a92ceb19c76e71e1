/**
 * The webhook delivery queue on SQL: the fan-out of new events into deliveries, the claims the
 * delivery workers take, the attempts they record, and the backlog the metrics report.
 */
import type { AttemptOutcome, ClaimedDelivery } from "../../billing/events/webhooks.js";
import { newId, randomBase62 } from "../../billing/ids.js";
import { isTransient } from "../errors.js";
import { dbTime, fromDbTime, fromDbTimeOrNull, fromJsonText } from "../raw.js";
import { type Sql, chunks, placeholders } from "../sql.js";
import { EVENT_COLUMNS, type EventRaw, eventFromRow } from "./webhook-rows.js";

/** The queue the delivery workers work from (SqlWebhookStore's fanOut, claimDue and recordAttempts). */
export class SqlDeliveryQueue {
  constructor(private readonly sql: Sql) {}

  /**
   * Fans out up to `limit` new events, one environment per transaction (no transaction spans
   * environments: `environment_id` is the sharding key, docs/operations/scaling.md). The
   * environments come from a plain read of the oldest events not yet fanned out.
   */
  async fanOut(limit: number, leaseUntil: Date): Promise<{ events: number; claims: ClaimedDelivery[] }> {
    const pending = await this.sql.query<{ environment_id: string }[]>("SELECT environment_id FROM events WHERE fanout = 1 ORDER BY seq LIMIT ?", [limit]);
    let events = 0;
    const claims: ClaimedDelivery[] = [];
    for (const env of new Set(pending.map((r) => r.environment_id))) {
      if (events >= limit) break;
      const taken = await this.fanOutOf(env, limit - events, leaseUntil);
      events += taken.events;
      claims.push(...taken.claims);
    }
    return { events, claims };
  }

  private fanOutOf(environmentId: string, limit: number, leaseUntil: Date): Promise<{ events: number; claims: ClaimedDelivery[] }> {
    const mysql = this.sql.dialect === "mysql";
    const token = randomBase62(24);
    // READ COMMITTED on MySQL: the locking read of the fan-out index takes no gap locks (it must
    // not block the changes' inserts of new events), and SKIP LOCKED passes over events another
    // server is fanning out and those of transactions not yet committed.
    return this.sql.pipelined(
      async (p) => {
        const [events] = (await p.run([
          [`SELECT ${EVENT_COLUMNS} FROM events WHERE environment_id = ? AND fanout = 1 ORDER BY seq LIMIT ?${mysql ? " FOR UPDATE SKIP LOCKED" : ""}`, [environmentId, limit]],
        ])) as [EventRaw[]];
        if (events.length === 0) return { events: 0, claims: [] };
        // A shared lock on the endpoints: an endpoint disabled or deleted meanwhile waits for this
        // transaction, then holds or drops the deliveries it wrote.
        const [endpoints] = (await p.run([
          [
            `SELECT w.id, w.environment_id, w.url, w.secret, w.event_types, w.status, w.created_at, v.mode FROM webhook_endpoints w JOIN environments v ON v.id = w.environment_id WHERE w.environment_id = ? AND w.deleted_at IS NULL${mysql ? " LOCK IN SHARE MODE" : ""}`,
            [environmentId],
          ],
        ])) as [{ id: string; environment_id: string; url: string; secret: string; event_types: unknown; status: string; created_at: unknown; mode: string }[]];
        const seqs = events.map((e) => Number(e.seq));
        const mark = [`UPDATE events SET fanout = 0 WHERE environment_id = ? AND seq IN (${seqs.map(() => "?").join(", ")})`, [environmentId, ...seqs]] as const;
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
        const mine =
          ids.length === 0
            ? []
            : [
                [`SELECT seq, id FROM webhook_deliveries WHERE environment_id = ? AND id IN (${ids.map(() => "?").join(", ")}) AND lease_token = ?`, [environmentId, ...ids, token]] as [
                  string,
                  unknown[],
                ],
              ];
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

  /**
   * Claims up to `limit` due deliveries: candidates by a plain read of the due index (every
   * environment's), then locked and updated by primary key only, one environment per transaction:
   * a locking range scan of the due index (or a scan the optimizer prefers on a small table) would
   * take gap locks that block the outbox's inserts and deadlock with them.
   */
  async claimDue(now: Date, limit: number, leaseUntil: Date): Promise<ClaimedDelivery[]> {
    const candidates = await this.sql.query<{ seq: unknown; environment_id: string }[]>(
      "SELECT d.seq, d.environment_id FROM webhook_deliveries d JOIN webhook_endpoints w ON w.environment_id = d.environment_id AND w.id = d.endpoint_id WHERE d.status = 'pending' AND d.next_attempt_at <= ? AND w.status = 'enabled' AND w.deleted_at IS NULL ORDER BY d.next_attempt_at LIMIT ?",
      [dbTime(now), limit],
    );
    const out: ClaimedDelivery[] = [];
    for (const [env, group] of groupBy(candidates, (c) => c.environment_id))
      out.push(
        ...(await this.claimDueOf(
          env,
          group.map((c) => Number(c.seq)),
          now,
          leaseUntil,
        )),
      );
    return out;
  }

  private async claimDueOf(environmentId: string, seqs: number[], now: Date, leaseUntil: Date): Promise<ClaimedDelivery[]> {
    const token = randomBase62(24);
    const claimed = await this.sql.transactionReadCommitted(async (em) => {
      const lock = this.sql.dialect === "mysql" ? " FOR UPDATE SKIP LOCKED" : "";
      let rows = (await em.query(
        `SELECT seq, id, attempts, event_created_at FROM webhook_deliveries WHERE environment_id = ? AND seq IN (${seqs.map(() => "?").join(", ")}) AND status = 'pending' AND next_attempt_at <= ?${lock}`,
        [environmentId, ...seqs, dbTime(now)],
      )) as { seq: unknown; id: string; attempts: unknown; event_created_at: unknown }[];
      if (rows.length === 0) return [];
      // Only deliveries of enabled endpoints (a plain read: a disable committing after it waits
      // for these rows' locks, then holds them, and their attempt's record keeps them held).
      const enabled = new Set(
        (
          (await em.query(
            `SELECT d.seq FROM webhook_deliveries d JOIN webhook_endpoints w ON w.environment_id = d.environment_id AND w.id = d.endpoint_id WHERE d.environment_id = ? AND d.seq IN (${rows.map(() => "?").join(", ")}) AND w.status = 'enabled' AND w.deleted_at IS NULL`,
            [environmentId, ...rows.map((r) => Number(r.seq))],
          )) as { seq: unknown }[]
        ).map((r) => Number(r.seq)),
      );
      rows = rows.filter((r) => enabled.has(Number(r.seq)));
      if (rows.length === 0) return [];
      await em.query(`UPDATE webhook_deliveries SET lease_token = ?, next_attempt_at = ? WHERE environment_id = ? AND seq IN (${rows.map(() => "?").join(", ")})`, [
        token,
        dbTime(leaseUntil),
        environmentId,
        ...rows.map((r) => Number(r.seq)),
      ]);
      return rows;
    });
    if (claimed.length === 0) return [];

    const details = await this.sql.query<(EventRaw & { delivery_id: string; endpoint_id: string; url: string; secret: string; mode: string })[]>(
      `SELECT d.id AS delivery_id, d.endpoint_id, w.url, w.secret, v.mode, e.seq, e.id, e.environment_id, e.type, e.data, e.created_at FROM webhook_deliveries d JOIN webhook_endpoints w ON w.environment_id = d.environment_id AND w.id = d.endpoint_id JOIN events e ON e.environment_id = d.environment_id AND e.id = d.event_id JOIN environments v ON v.id = d.environment_id WHERE d.environment_id = ? AND d.id IN (${claimed.map(() => "?").join(", ")})`,
      [environmentId, ...claimed.map((r) => r.id)],
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
    // One transaction per environment (no transaction spans environments).
    for (const group of groupBy(results, (r) => r.claim.endpoint.environmentId).values()) {
      for (let attempt = 1; ; attempt++) {
        try {
          await this.recordOnce(group, lock);
          break;
        } catch (err) {
          if (attempt >= 4 || !isTransient(err)) throw err;
          await new Promise((r) => setTimeout(r, 10 * attempt * Math.random()));
        }
      }
    }
  }

  /** `results` of one environment's claims, in one transaction. */
  private async recordOnce(results: { claim: ClaimedDelivery; outcome: AttemptOutcome }[], lock: string): Promise<void> {
    const env = results[0]?.claim.endpoint.environmentId;
    await this.sql.pipelined(
      async (p) => {
        const byToken = [...groupBy(results, (r) => r.claim.leaseToken)];
        const found = (await p.run(
          byToken.map(([token, group]) => [
            `SELECT seq FROM webhook_deliveries WHERE environment_id = ? AND seq IN (${group.map(() => "?").join(", ")}) AND lease_token = ?${lock}`,
            [env, ...group.map((r) => r.claim.seq), token],
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
            `UPDATE webhook_deliveries SET status = 'succeeded', attempts = attempts + 1, lease_token = NULL, last_attempt_at = ?, last_status_code = ?, last_error = NULL, updated_at = ? WHERE environment_id = ? AND seq IN (${group.map(() => "?").join(", ")})`,
            [at, group[0]?.outcome.attempt.statusCode, at, env, ...group.map((r) => r.claim.seq)],
          ]);
        }
        for (const { claim, outcome } of logged) {
          if (outcome.status === "succeeded") continue;
          const a = outcome.attempt;
          const at = dbTime(a.attemptedAt);
          // A delivery held meanwhile (its endpoint was disabled while this attempt was out) stays
          // held: it is sent again only once the endpoint is enabled.
          p.defer([
            "UPDATE webhook_deliveries SET status = CASE WHEN status = 'held' THEN 'held' ELSE ? END, attempts = attempts + 1, next_attempt_at = ?, lease_token = NULL, last_attempt_at = ?, last_status_code = ?, last_error = ?, updated_at = ? WHERE environment_id = ? AND seq = ?",
            [outcome.status, dbTime(outcome.nextAttemptAt ?? a.attemptedAt), at, a.statusCode, a.error, at, env, claim.seq],
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
        for (const id of failing) p.defer(["UPDATE webhook_endpoints SET failing_since = ? WHERE environment_id = ? AND id = ? AND failing_since IS NULL", [now, env, id]]);
        for (const id of healed) p.defer(["UPDATE webhook_endpoints SET failing_since = NULL WHERE environment_id = ? AND id = ? AND failing_since IS NOT NULL", [env, id]]);
      },
      { readCommitted: true },
    );
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
