/**
 * Dunning's storage (DESIGN §16; migration 30): an invoice's attempts, its next attempt and its
 * payment state (JSON), the due retries (index ix_invoices_status_next_attempt), and the claim of
 * one invoice under its row lock: SKIP LOCKED on MySQL so that N servers never retry one invoice
 * at once (SQLite serialises its writers anyway).
 */
import type { EntityManager, EntitySchema } from "typeorm";
import type { DueInvoice, DunningStore, DunningWrites } from "../../billing/payments/dunning.js";
import type { Entities, InvoiceLineRow } from "../entities/index.js";
import { dbTime, fromDbTime } from "../raw.js";
import type { Sql } from "../sql.js";
import { chunks } from "../statements.js";
import { invoiceFromRows } from "./invoice-store.js";

const isMysql = (em: EntityManager) => em.connection.options.type !== "better-sqlite3";

/** Raw rows of `entity`'s table (`SELECT *`) as its find() would give them: each column through the driver's hydration (its transformer included). */
function hydrated<T>(em: EntityManager, entity: EntitySchema<T>, raw: Record<string, unknown>[]): T[] {
  const { columns } = em.connection.getMetadata(entity);
  const driver = em.connection.driver;
  return raw.map((r) => {
    const row: Record<string, unknown> = {};
    for (const c of columns) {
      const v = r[c.databaseName];
      if (v !== undefined) row[c.propertyName] = driver.prepareHydratedValue(v, c);
    }
    return row as T;
  });
}

/** Dunning's writes in a billing transaction on `em`. */
export function dunningWrites(em: EntityManager, E: Entities): DunningWrites {
  return {
    async claim(environmentId, id, dueBy) {
      const lock = isMysql(em) ? (dueBy ? " FOR UPDATE SKIP LOCKED" : " FOR UPDATE") : "";
      const due = dueBy ? " AND status = 'open' AND next_payment_attempt IS NOT NULL AND next_payment_attempt <= ?" : "";
      const rows = (await em.query(`SELECT id FROM invoices WHERE environment_id = ? AND id = ?${due}${lock}`, [environmentId, id, ...(dueBy ? [dbTime(dueBy)] : [])])) as { id: string }[];
      if (rows.length === 0) return undefined;
      const r = await em.findOneBy(E.Invoice, { environment_id: environmentId, id });
      if (!r) return undefined;
      const lines = await em.find(E.InvoiceLine, { where: { invoice_id: id }, order: { position: "ASC" } });
      return invoiceFromRows(r, lines);
    },
    async claimAll(environmentId, ids) {
      const lock = isMysql(em) ? " FOR UPDATE" : "";
      const byId = new Map<string, ReturnType<typeof invoiceFromRows>>();
      // In ID order, so that two batches sharing invoices lock them in the same order; the locking
      // read is the invoices' read (a batch of first charges claims a hundred invoices twice).
      for (const part of chunks([...new Set(ids)].sort(), 200)) {
        const marks = part.map(() => "?").join(", ");
        const invoices = hydrated(em, E.Invoice, await em.query(`SELECT * FROM invoices WHERE environment_id = ? AND id IN (${marks}) ORDER BY id${lock}`, [environmentId, ...part]));
        if (invoices.length === 0) continue;
        const found = invoices.map((r) => r.id);
        const lines = hydrated(em, E.InvoiceLine, await em.query(`SELECT * FROM invoice_lines WHERE invoice_id IN (${found.map(() => "?").join(", ")}) ORDER BY invoice_id, position`, found));
        const linesOf = new Map<string, InvoiceLineRow[]>();
        for (const l of lines) linesOf.set(l.invoice_id, [...(linesOf.get(l.invoice_id) ?? []), l]);
        for (const r of invoices) byId.set(r.id, invoiceFromRows(r, linesOf.get(r.id) ?? []));
      }
      return ids.flatMap((id) => byId.get(id) ?? []);
    },
    async planFirsts(environmentId, plans) {
      // One statement per planned time (a batch's invoices mostly share one).
      const byAt = new Map<string, string[]>();
      for (const p of plans) byAt.set(dbTime(p.at), [...(byAt.get(dbTime(p.at)) ?? []), p.id]);
      for (const [at, all] of byAt) {
        for (const ids of chunks(all, 200)) {
          await em.query(
            `UPDATE invoices SET next_payment_attempt = ? WHERE environment_id = ? AND id IN (${ids.map(() => "?").join(", ")}) AND status = 'open' AND attempt_count = 0 AND next_payment_attempt IS NULL`,
            [at, environmentId, ...ids],
          );
        }
      }
    },
    async recordAttempts(environmentId, list, at) {
      // One statement for a batch: each column set by a CASE on the invoice's ID.
      for (const part of chunks(list, 200)) {
        const cases = (value: (a: (typeof part)[number]) => unknown) => ({ sql: `CASE id ${part.map(() => "WHEN ? THEN ?").join(" ")} END`, params: part.flatMap((a) => [a.id, value(a)]) });
        const count = cases((a) => a.attempt.attemptCount);
        const next = cases((a) => (a.attempt.nextPaymentAttempt ? dbTime(a.attempt.nextPaymentAttempt) : null));
        const state = cases((a) => JSON.stringify(a.attempt.payment));
        await em.query(
          `UPDATE invoices SET attempt_count = ${count.sql}, next_payment_attempt = ${next.sql}, payment_state = ${state.sql}, updated_at = ? WHERE environment_id = ? AND id IN (${part.map(() => "?").join(", ")})`,
          [...count.params, ...next.params, ...state.params, dbTime(at), environmentId, ...part.map((a) => a.id)],
        );
      }
    },
  };
}

/** The retries due, read without a lock (each is claimed in its own transaction). */
export class SqlDunningStore implements DunningStore {
  constructor(private readonly sql: Sql) {}

  async due(now: Date, clockId: string | null, limit: number, exclude: readonly string[]): Promise<DueInvoice[]> {
    const params: unknown[] = [dbTime(now)];
    let where = "status = 'open' AND next_payment_attempt IS NOT NULL AND next_payment_attempt <= ?";
    if (clockId === null) where += " AND clock_id IS NULL";
    else {
      where += " AND clock_id = ?";
      params.push(clockId);
    }
    if (exclude.length > 0) {
      where += ` AND id NOT IN (${exclude.map(() => "?").join(", ")})`;
      params.push(...exclude);
    }
    const rows = await this.sql.query<{ id: string; environment_id: string; subject_id: string }[]>(
      `SELECT id, environment_id, subject_id FROM invoices WHERE ${where} ORDER BY next_payment_attempt, id LIMIT ${Math.max(1, Math.floor(limit))}`,
      params,
    );
    return rows.map((r) => ({ id: r.id, environmentId: r.environment_id, subjectId: r.subject_id }));
  }

  async nextDue(after: Date | null, upTo: Date, clockId: string, exclude: readonly string[] = []): Promise<Date | null> {
    const params: unknown[] = [dbTime(upTo), clockId];
    let where = "status = 'open' AND next_payment_attempt IS NOT NULL AND next_payment_attempt <= ? AND clock_id = ?";
    if (after) {
      where += " AND next_payment_attempt > ?";
      params.push(dbTime(after));
    }
    if (exclude.length > 0) {
      where += ` AND id NOT IN (${exclude.map(() => "?").join(", ")})`;
      params.push(...exclude);
    }
    const [row] = await this.sql.query<{ at: unknown }[]>(`SELECT MIN(next_payment_attempt) AS at FROM invoices WHERE ${where}`, params);
    return row?.at ? fromDbTime(row.at) : null;
  }

  async cancelsDue(now: Date, limit: number): Promise<DueInvoice[]> {
    // The index on (status, next_payment_attempt): a paid, void or uncollectible invoice has a next attempt only while its payment's cancel is pending.
    const rows = await this.sql.query<{ id: string; environment_id: string; subject_id: string }[]>(
      `SELECT id, environment_id, subject_id FROM invoices WHERE status IN ('paid', 'void', 'uncollectible') AND next_payment_attempt IS NOT NULL AND next_payment_attempt <= ? ORDER BY next_payment_attempt, id LIMIT ${Math.max(1, Math.floor(limit))}`,
      [dbTime(now)],
    );
    return rows.map((r) => ({ id: r.id, environmentId: r.environment_id, subjectId: r.subject_id }));
  }

  async unplanned(before: Date, clockId: string | null, limit: number): Promise<DueInvoice[]> {
    const rows = await this.sql.query<{ id: string; environment_id: string; subject_id: string }[]>(
      "SELECT i.id, i.environment_id, i.subject_id FROM invoices i JOIN subjects s ON s.environment_id = i.environment_id AND s.id = i.subject_id " +
        "WHERE i.status = 'open' AND i.next_payment_attempt IS NULL AND i.attempt_count = 0 AND COALESCE(i.finalizes_at, i.created_at) <= ? AND " +
        `${clockId === null ? "i.clock_id IS NULL" : "i.clock_id = ?"} AND COALESCE(i.amount_due, i.total) > 0 AND s.payment_method_id IS NOT NULL ` +
        // A credit purchase unplanned awaits its checkout (awaitsCheckout): never dunning's to charge,
        // and an abandoned one left here would fill every batch ahead of the invoices that are.
        "AND NOT (i.subscription_id = '' AND i.period_key LIKE 'credit:%') " +
        `ORDER BY i.created_at, i.id LIMIT ${Math.max(1, Math.floor(limit))}`,
      clockId === null ? [dbTime(before)] : [dbTime(before), clockId],
    );
    return rows.map((r) => ({ id: r.id, environmentId: r.environment_id, subjectId: r.subject_id }));
  }
}
