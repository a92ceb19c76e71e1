/**
 * Dunning's storage (DESIGN §16; migration 30): an invoice's attempts, its next attempt and its
 * payment state (JSON), the due retries (index ix_invoices_status_next_attempt), and the claim of
 * one invoice under its row lock: SKIP LOCKED on MySQL so that N servers never retry one invoice
 * at once (SQLite serialises its writers anyway).
 */
import type { EntityManager } from "typeorm";
import type { DueInvoice, DunningStore, DunningWrites } from "../../billing/payments/dunning.js";
import type { Entities } from "../entities/index.js";
import { dbTime } from "../raw.js";
import type { Sql } from "../sql.js";
import { invoiceFromRows } from "./invoice-store.js";

const isMysql = (em: EntityManager) => em.connection.options.type !== "better-sqlite3";

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
    async planFirst(environmentId, id, at) {
      await em.query("UPDATE invoices SET next_payment_attempt = ? WHERE environment_id = ? AND id = ? AND status = 'open' AND attempt_count = 0 AND next_payment_attempt IS NULL", [
        dbTime(at),
        environmentId,
        id,
      ]);
    },
    async recordAttempt(environmentId, id, a, at) {
      await em.update(
        E.Invoice,
        { environment_id: environmentId, id },
        { attempt_count: a.attemptCount, next_payment_attempt: a.nextPaymentAttempt, payment_state: a.payment as never, updated_at: at },
      );
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

  async unplanned(before: Date, clockId: string | null, limit: number): Promise<DueInvoice[]> {
    const rows = await this.sql.query<{ id: string; environment_id: string; subject_id: string }[]>(
      "SELECT i.id, i.environment_id, i.subject_id FROM invoices i JOIN subjects s ON s.environment_id = i.environment_id AND s.id = i.subject_id " +
        "WHERE i.status = 'open' AND i.next_payment_attempt IS NULL AND i.attempt_count = 0 AND COALESCE(i.finalizes_at, i.created_at) <= ? AND " +
        `${clockId === null ? "i.clock_id IS NULL" : "i.clock_id = ?"} AND COALESCE(i.amount_due, i.total) > 0 AND s.payment_method_id IS NOT NULL ` +
        `ORDER BY i.created_at, i.id LIMIT ${Math.max(1, Math.floor(limit))}`,
      clockId === null ? [dbTime(before)] : [dbTime(before), clockId],
    );
    return rows.map((r) => ({ id: r.id, environmentId: r.environment_id, subjectId: r.subject_id }));
  }
}
