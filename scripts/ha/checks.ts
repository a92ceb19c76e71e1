/**
 * The invariants checked after each scenario, read from the database itself (through HAProxy,
 * the session waiting for the cluster's writes: wsrep_sync_wait), and the check that the schema
 * holds nothing Galera lacks.
 */
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import type mysql from "mysql2/promise";
import { REPO_ROOT } from "../../bench/lib.js";
import { sleep } from "./cluster.js";
import { type Acknowledged, FLOW_EVENTS, FLOW_INVOICES, SEAT_CENTS, type WebhookReceiver } from "./load.js";

export interface Findings {
  /** Acknowledged events not stored, and idempotency keys stored more than once. */
  eventsMissing: number;
  eventsDoubled: number;
  /** Events stored that no answer acknowledged (a request whose answer was lost): allowed, reported. */
  eventsUnacknowledged: number;
  /** Finished subscriptions whose invoices are not FLOW_INVOICES distinct periods, all paid, of the right total. */
  invoicesWrong: string[];
  /** Invoices paid (charged) more than once. */
  chargesDoubled: number;
  /** Events never delivered to the endpoint (after waiting for deliveries to catch up). */
  webhooksMissing: number;
  /** Events delivered more than once (allowed: at least once). */
  webhooksRepeated: number;
}

const rows = async <T>(db: mysql.Connection, sql: string, values: unknown[] = []): Promise<T[]> => (await db.query(sql, values))[0] as T[];

/** The usage-event invariants: every acknowledged key stored, each key once. */
async function eventFindings(db: mysql.Connection, ack: Acknowledged): Promise<Pick<Findings, "eventsMissing" | "eventsDoubled" | "eventsUnacknowledged">> {
  const doubled = await rows<{ n: number }>(db, "SELECT COUNT(*) AS n FROM (SELECT 1 FROM usage_events GROUP BY environment_id, idempotency_key HAVING COUNT(*) > 1) d");
  const stored = new Set((await rows<{ k: string }>(db, "SELECT idempotency_key AS k FROM usage_events")).map((r) => r.k));
  let missing = 0;
  const batches = new Set<string>();
  for (const k of ack.eventKeys) {
    if (stored.has(k)) continue;
    missing++;
    batches.add(k.replace(/-[eu]\d+$/, ""));
  }
  for (const b of batches) process.stderr.write(`[ha] acknowledged, not stored: ${b}* (${ack.batchAnswers.get(b) ?? "a subscription's usage"})\n`);
  return { eventsMissing: missing, eventsDoubled: Number(doubled[0]?.n ?? 0), eventsUnacknowledged: stored.size - (ack.eventKeys.size - missing) };
}

/**
 * Each finished subscription: FLOW_INVOICES invoices of distinct periods totalling its seats and
 * usage, all paid (charged to the card) but the last, a draft until the environment's grace ends.
 */
async function invoiceFindings(db: mysql.Connection, ack: Acknowledged): Promise<Pick<Findings, "invoicesWrong" | "chargesDoubled">> {
  const wrong: string[] = [];
  const ids = [...ack.finishedFlows.keys()];
  const expected = BigInt(FLOW_INVOICES * SEAT_CENTS + FLOW_EVENTS);
  for (let i = 0; i < ids.length; i += 200) {
    const part = ids.slice(i, i + 200);
    const found = await rows<{ s: string; n: number; periods: number; paid: number; total: string }>(
      db,
      `SELECT subscription_id AS s, COUNT(*) AS n, COUNT(DISTINCT period_start) AS periods, SUM(status = 'paid') AS paid, CAST(SUM(total) AS CHAR) AS total FROM invoices WHERE subscription_id IN (${part.map(() => "?").join(",")}) GROUP BY subscription_id`,
      part,
    );
    const bySub = new Map(found.map((r) => [r.s, r]));
    for (const s of part) {
      const r = bySub.get(s);
      const total = r ? BigInt(String(r.total).replace(/\.0*$/, "")) : -1n;
      if (!r || Number(r.n) !== FLOW_INVOICES || Number(r.periods) !== FLOW_INVOICES || Number(r.paid) !== FLOW_INVOICES - 1 || total !== expected) {
        wrong.push(`${s}: ${r ? `${r.n} invoices, ${r.periods} periods, ${r.paid} paid, total ${r.total}` : "no invoice"} (expected ${FLOW_INVOICES}, ${FLOW_INVOICES - 1} paid, total ${expected})`);
      }
    }
  }
  // One invoice.paid event per invoice: a second would be a second charge.
  const doubled = await rows<{ n: number }>(db, "SELECT COUNT(*) AS n FROM (SELECT JSON_VALUE(data, '$.id') AS inv FROM events WHERE type = 'invoice.paid' GROUP BY inv HAVING COUNT(*) > 1) d");
  return { invoicesWrong: wrong, chargesDoubled: Number(doubled[0]?.n ?? 0) };
}

/** Waits (up to `waitMs`) until every event stored has reached the receiver; then what is missing and repeated. */
async function webhookFindings(db: mysql.Connection, receiver: WebhookReceiver, waitMs: number): Promise<Pick<Findings, "webhooksMissing" | "webhooksRepeated">> {
  const end = Date.now() + waitMs;
  let missing = 0;
  for (;;) {
    const ids = (await rows<{ id: string }>(db, "SELECT id FROM events")).map((r) => r.id);
    missing = ids.filter((id) => !receiver.arrivals.has(id)).length;
    if (missing === 0 || Date.now() > end) break;
    await sleep(2000);
  }
  let repeated = 0;
  for (const n of receiver.arrivals.values()) if (n > 1) repeated++;
  return { webhooksMissing: missing, webhooksRepeated: repeated };
}

export async function findings(db: mysql.Connection, ack: Acknowledged, receiver: WebhookReceiver, webhookWaitMs = 120_000): Promise<Findings> {
  await db.query("SET SESSION wsrep_sync_wait = 1");
  return { ...(await eventFindings(db, ack)), ...(await invoiceFindings(db, ack)), ...(await webhookFindings(db, receiver, webhookWaitMs)) };
}

export function violations(f: Findings): string[] {
  const out: string[] = [];
  if (f.eventsMissing > 0) out.push(`${f.eventsMissing} acknowledged usage events not stored`);
  if (f.eventsDoubled > 0) out.push(`${f.eventsDoubled} idempotency keys stored more than once`);
  if (f.invoicesWrong.length > 0) out.push(`${f.invoicesWrong.length} subscriptions with wrong invoices: ${f.invoicesWrong.slice(0, 3).join("; ")}`);
  if (f.chargesDoubled > 0) out.push(`${f.chargesDoubled} invoices paid more than once`);
  if (f.webhooksMissing > 0) out.push(`${f.webhooksMissing} events never delivered to the webhook endpoint`);
  return out;
}

/** Tables Galera cannot replicate well: without a primary key, or not InnoDB. */
export async function schemaProblems(db: mysql.Connection, database: string): Promise<string[]> {
  const found = await rows<{ t: string; e: string | null; pk: number }>(
    db,
    `SELECT t.TABLE_NAME AS t, t.ENGINE AS e,
       (SELECT COUNT(*) FROM information_schema.TABLE_CONSTRAINTS c WHERE c.TABLE_SCHEMA = t.TABLE_SCHEMA AND c.TABLE_NAME = t.TABLE_NAME AND c.CONSTRAINT_TYPE = 'PRIMARY KEY') AS pk
     FROM information_schema.TABLES t WHERE t.TABLE_SCHEMA = ? AND t.TABLE_TYPE = 'BASE TABLE'`,
    [database],
  );
  const out: string[] = [];
  for (const r of found) {
    if (String(r.e).toLowerCase() !== "innodb") out.push(`${r.t}: engine ${r.e} (Galera replicates InnoDB only)`);
    if (Number(r.pk) === 0) out.push(`${r.t}: no primary key`);
  }
  if (found.length === 0) out.push(`no tables in ${database}: the migrations did not run`);
  return out;
}

/** Source files under src/ that issue what Galera does not replicate or support across nodes (GET_LOCK, table locks). */
export function lockStatementsInSource(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) {
        if (name !== "gen") walk(p);
      } else if (p.endsWith(".ts") && /\b(GET_LOCK|RELEASE_LOCK|IS_FREE_LOCK|LOCK\s+TABLES?|FLUSH\s+TABLES\s+WITH\s+READ\s+LOCK)\b/i.test(readFileSync(p, "utf8"))) {
        out.push(p.slice(REPO_ROOT.length + 1));
      }
    }
  };
  walk(join(REPO_ROOT, "src"));
  return out;
}

/** Table locks taken on a node since it started (Com_lock_tables), or undefined when it does not answer. */
export async function tableLocksTaken(db: mysql.Connection): Promise<number> {
  const r = await rows<{ Value: string }>(db, "SHOW GLOBAL STATUS LIKE 'Com_lock_tables'");
  return Number(r[0]?.Value ?? 0);
}
