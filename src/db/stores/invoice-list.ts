/**
 * The invoice lists' queries: GET /invoices across subjects with its filters (DESIGN §15), and
 * the dashboard's lists, newest first; a subscription's invoices of one billing period, and
 * those created during one (the invoice that closed it among them).
 */
import { type EntityManager, In } from "typeorm";
import type { Page } from "../../billing/pagination.js";
import type { InvoiceFilter } from "../../billing/subscriptions/ports.js";
import type { InvoiceStatus } from "../../billing/subscriptions/types.js";
import type { Entities, InvoiceLineRow, InvoiceRow } from "../entities/index.js";
import { dbTime } from "../raw.js";

/**
 * A page of the rows of `filter` in the environment (one more than the page's limit: whether
 * another follows), oldest first (seq). Each filter meets an index that
 * starts with it: one subject's list ix_invoices_subject_seq, one number uq_invoices_env_number,
 * one status ix_invoices_env_status_seq (already in seq order), a created range
 * ix_invoices_env_created; the database picks among them when several are given.
 */
export function invoiceListRows(em: EntityManager, E: Entities, environmentId: string, filter: InvoiceFilter, page: Page): Promise<InvoiceRow[]> {
  const q = em.createQueryBuilder(E.Invoice, "i").where("i.environment_id = :env", { env: environmentId });
  if (filter.subjectId !== undefined) q.andWhere("i.subject_id = :subject", { subject: filter.subjectId });
  if (filter.number !== undefined) q.andWhere("i.number = :number", { number: filter.number });
  if (filter.status !== undefined) q.andWhere("i.status = :status", { status: filter.status });
  if (filter.createdFrom !== undefined) q.andWhere("i.created_at >= :from", { from: dbTime(filter.createdFrom) });
  if (filter.createdTo !== undefined) q.andWhere("i.created_at < :to", { to: dbTime(filter.createdTo) });
  return q
    .orderBy("i.seq", "ASC")
    .limit(page.limit + 1)
    .offset(page.offset)
    .getMany();
}

/** A page of rows (one more than its limit), newest first, of one status or any, of one subscription or any (the dashboard's lists). */
export function newestFirstRows(em: EntityManager, E: Entities, environmentId: string, filter: { status?: InvoiceStatus; subscriptionId?: string }, page: Page): Promise<InvoiceRow[]> {
  const where = { environment_id: environmentId, ...(filter.status ? { status: filter.status } : {}), ...(filter.subscriptionId ? { subscription_id: filter.subscriptionId } : {}) };
  return em.find(E.Invoice, { where, order: { seq: "DESC" }, take: page.limit + 1, skip: page.offset });
}

/**
 * A subscription's rows, not void, whose period lies within [from, to], oldest first: what was
 * billed for one billing period (over ix_invoices_subscription_seq, one subscription's few rows).
 */
export function billedWithinRows(em: EntityManager, E: Entities, p: { subscriptionId: string; environmentId: string; from: Date; to: Date }): Promise<InvoiceRow[]> {
  return em
    .createQueryBuilder(E.Invoice, "i")
    .where("i.environment_id = :env AND i.subscription_id = :sub AND i.status <> 'void'", { env: p.environmentId, sub: p.subscriptionId })
    .andWhere("i.period_start >= :from AND i.period_end <= :to", { from: dbTime(p.from), to: dbTime(p.to) })
    .orderBy("i.seq", "ASC")
    .getMany();
}

/**
 * A subscription's rows created in (from, to], any status, oldest first, each with its line rows
 * and the line rows tied to it (window_invoice_id, on any invoice): over
 * ix_invoices_subscription_seq (one subscription's few rows), lines by invoice and by window invoice.
 */
export async function createdWithinRows(
  em: EntityManager,
  E: Entities,
  p: { subscriptionId: string; environmentId: string; from: Date; to: Date },
): Promise<{ row: InvoiceRow; lines: InvoiceLineRow[]; tied: InvoiceLineRow[] }[]> {
  const rows = await em
    .createQueryBuilder(E.Invoice, "i")
    .where("i.environment_id = :env AND i.subscription_id = :sub", { env: p.environmentId, sub: p.subscriptionId })
    .andWhere("i.created_at > :from AND i.created_at <= :to", { from: dbTime(p.from), to: dbTime(p.to) })
    .orderBy("i.seq", "ASC")
    .getMany();
  if (rows.length === 0) return [];
  const ids = rows.map((r) => r.id);
  const lines = await em.find(E.InvoiceLine, { where: { invoice_id: In(ids) }, order: { invoice_id: "ASC", position: "ASC" } });
  const tied = await em.find(E.InvoiceLine, { where: { window_invoice_id: In(ids) }, order: { seq: "ASC" } });
  return rows.map((row) => ({ row, lines: lines.filter((l) => l.invoice_id === row.id), tied: tied.filter((l) => l.window_invoice_id === row.id) }));
}
