/**
 * The outbox writer: a change's events, written inside the change's own transaction (events
 * marked for fan-out; the delivery queue writes their deliveries), and the watchers told when
 * such a transaction commits. Subjects, billing and the webhook store write events through it.
 */
import type { EntityManager } from "typeorm";
import type { ThresholdWrites } from "../../billing/events/thresholds.js";
import type { EventEncoder, EventResource, EventWrites, NewEvent, StoredEvent } from "../../billing/events/types.js";
import { newId } from "../../billing/ids.js";
import { dbTime } from "../raw.js";
import { type Pipeline, afterCommit, chunks, placeholders } from "../sql.js";

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

/** Rows a statement in a transaction changed (the query runner's structured result, on both drivers). */
export async function changed(em: EntityManager, sql: string, params: unknown[]): Promise<number> {
  const runner = em.queryRunner;
  if (!runner) throw new Error("changed() needs a transaction's entity manager");
  const res = await runner.query(sql, params, true);
  return res.affected ?? 0;
}
