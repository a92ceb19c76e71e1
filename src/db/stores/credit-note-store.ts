/**
 * Storage of credit notes (DESIGN §15) on SQL. Writing one holds its invoice's row lock (FOR
 * UPDATE on MariaDB; on SQLite the transaction holds the file), and what all notes credit of an
 * invoice only grows by one conditional UPDATE of invoices.amount_credited that the database
 * refuses beyond the invoice's total (a NULL amount_credited counts as 0), so no interleaving of
 * credit notes ever credits more than an invoice's total. On MySQL decimal parameters are CAST to
 * DECIMAL (a string in arithmetic would be a double); on SQLite decimals are canonical text and
 * the registered dec_add / dec_max functions do exact arithmetic.
 */
import { type EntityManager, type FindOptionsWhere, In } from "typeorm";
import type { CreditNoteFilter, CreditNoteStore, CreditNoteTx, CreditNoteWrites } from "../../billing/credit-notes/ports.js";
import type { CreditNote, CreditNoteOutcome, CreditNoteReason } from "../../billing/credit-notes/types.js";
import { AbortedError, AlreadyExistsError } from "../../billing/errors.js";
import type { EventEncoder } from "../../billing/events/types.js";
import { dec, formatDecimal } from "../../billing/money.js";
import { type Page, type PageResult, toPageResult } from "../../billing/pagination.js";
import { formatNumber } from "../../billing/subscriptions/booking.js";
import type { Invoice } from "../../billing/subscriptions/types.js";
import type { CreditNoteRow, Entities } from "../entities/index.js";
import { isTransient, isUniqueViolation } from "../errors.js";
import { dbTime } from "../raw.js";
import { type Sql, rowLock } from "../sql.js";
import { creditWrites } from "./credit-store.js";
import { dunningWrites } from "./dunning-store.js";
import { invoiceFromRows } from "./invoice-store.js";
import { nextNumbers } from "./numbering.js";
import { providerEventWrites } from "./provider-store.js";
import { changed, eventWrites } from "./outbox.js";

export function creditNoteFromRow(r: CreditNoteRow): CreditNote {
  return {
    id: r.id,
    environmentId: r.environment_id,
    number: r.number,
    invoiceId: r.invoice_id,
    invoiceNumber: r.invoice_number,
    subjectId: r.subject_id,
    currency: r.currency,
    reason: r.reason as CreditNoteReason,
    memo: r.memo,
    outcome: r.outcome as CreditNoteOutcome,
    lines: r.lines ?? [],
    subtotal: r.subtotal,
    totalTax: r.total_tax,
    total: r.total,
    status: r.status as CreditNote["status"],
    createdAt: r.created_at,
    voidedAt: r.voided_at ?? null,
    creditGrantId: r.credit_grant_id,
    refundId: r.refund_id,
    refundStatus: (r.refund_status ?? null) as CreditNote["refundStatus"],
    refundFailureReason: r.refund_failure_reason ?? null,
    metadata: r.metadata ?? {},
  };
}

function creditNoteToRow(n: CreditNote): CreditNoteRow {
  return {
    id: n.id,
    environment_id: n.environmentId,
    number: n.number,
    invoice_id: n.invoiceId,
    invoice_number: n.invoiceNumber.slice(0, 40),
    subject_id: n.subjectId,
    currency: n.currency,
    reason: n.reason,
    memo: n.memo,
    outcome: n.outcome,
    lines: n.lines,
    subtotal: n.subtotal,
    total_tax: n.totalTax,
    total: n.total,
    status: n.status,
    credit_grant_id: n.creditGrantId,
    refund_id: n.refundId,
    refund_status: n.refundStatus,
    refund_failure_reason: n.refundFailureReason === null ? null : n.refundFailureReason.slice(0, 255),
    metadata: n.metadata,
    created_at: n.createdAt,
  };
}

/** The credit-note writes of a transaction on `em`. */
export function creditNoteWrites(em: EntityManager, sql: Sql, E: Entities): CreditNoteWrites {
  const d = sql.dialect;
  const p = d === "mysql" ? "CAST(? AS DECIMAL(65,12))" : "?";
  return {
    lockInvoice: async (environmentId, invoiceId) => {
      const r = await em.findOne(E.Invoice, { where: { environment_id: environmentId, id: invoiceId }, lock: rowLock(d) });
      if (!r) return undefined;
      const lines = await em.find(E.InvoiceLine, { where: { invoice_id: r.id }, order: { position: "ASC" } });
      return invoiceFromRows(r, lines) as Invoice;
    },
    ofInvoice: async (environmentId, invoiceId) => {
      const rows = await em.find(E.CreditNote, { where: { environment_id: environmentId, invoice_id: invoiceId }, order: { seq: "ASC" } });
      return rows.map(creditNoteFromRow);
    },
    addCredited: async (environmentId, invoiceId, amount, beyondTotal = false) => {
      const a = formatDecimal(dec(amount));
      const within = d === "mysql" ? ` AND (? OR COALESCE(amount_credited, 0) + ${p} <= total)` : " AND (? OR dec_max(total, dec_add(COALESCE(amount_credited, '0'), ?)) = total)";
      const set = d === "mysql" ? `amount_credited = COALESCE(amount_credited, 0) + ${p}` : "amount_credited = dec_add(COALESCE(amount_credited, '0'), ?)";
      const n = await changed(em, `UPDATE invoices SET ${set} WHERE environment_id = ? AND id = ?${within}`, [a, environmentId, invoiceId, beyondTotal ? 1 : 0, a]);
      return n > 0;
    },
    reduceAmountDue: async (environmentId, invoiceId, amount, at) => {
      const a = formatDecimal(dec(amount));
      const due = "COALESCE(amount_due, total)";
      const n =
        d === "mysql"
          ? await changed(em, `UPDATE invoices SET amount_due = ${due} - ${p}, updated_at = ? WHERE environment_id = ? AND id = ? AND status = 'open' AND ${due} >= ${p}`, [
              a,
              dbTime(at),
              environmentId,
              invoiceId,
              a,
            ])
          : await changed(em, `UPDATE invoices SET amount_due = dec_add(${due}, ?), updated_at = ? WHERE environment_id = ? AND id = ? AND status = 'open' AND dec_max(${due}, ?) = ${due}`, [
              `-${a}`,
              dbTime(at),
              environmentId,
              invoiceId,
              a,
            ]);
      return n > 0;
    },
    markPaid: async (environmentId, invoiceId, at) =>
      (await changed(em, "UPDATE invoices SET status = 'paid', updated_at = ? WHERE environment_id = ? AND id = ? AND status = 'open'", [dbTime(at), environmentId, invoiceId])) > 0,
    nextNumber: async (environmentId) => {
      const { prefix, first } = await nextNumbers(em, d, environmentId, "credit_note", 1);
      return formatNumber(prefix, "credit_note", first);
    },
    insert: async (note) => {
      try {
        await em.insert(E.CreditNote, creditNoteToRow(note));
      } catch (err) {
        if (isUniqueViolation(err)) throw new AlreadyExistsError("CREDIT_NOTE_EXISTS", `credit note ${note.id} (${note.number}) already exists`);
        throw err;
      }
    },
    lockByRefund: async (environmentId, refundId) => {
      const r = await em.findOne(E.CreditNote, { where: { environment_id: environmentId, refund_id: refundId }, lock: rowLock(d) });
      return r ? creditNoteFromRow(r) : undefined;
    },
    setRefundStatus: async (environmentId, id, status, failureReason) => {
      await em.update(E.CreditNote, { environment_id: environmentId, id }, { refund_status: status, refund_failure_reason: failureReason === null ? null : failureReason.slice(0, 255) });
    },
    voidNotes: async (environmentId, invoiceId, ids, total, at) => {
      if (ids.length === 0) return;
      await em.update(E.CreditNote, { environment_id: environmentId, invoice_id: invoiceId, id: In([...ids]), status: "issued" }, { status: "void", voided_at: at });
      const a = formatDecimal(dec(total));
      // What the notes took off amount_credited goes back on amount_due (they had lowered it by as much, reduceAmountDue):
      // the void invoice keeps total − credits applied, as one voided without notes does.
      const set =
        d === "mysql"
          ? `amount_credited = COALESCE(amount_credited, 0) - ${p}, amount_due = COALESCE(amount_due, total) + ${p}`
          : "amount_credited = dec_add(COALESCE(amount_credited, '0'), ?), amount_due = dec_add(COALESCE(amount_due, total), ?)";
      const params = d === "mysql" ? [a, a] : [formatDecimal(dec(a).neg()), a];
      await em.query(`UPDATE invoices SET ${set} WHERE environment_id = ? AND id = ?`, [...params, environmentId, invoiceId]);
    },
    insertGrant: (g, entry) => creditWrites(em, sql, E).insertGrant(g, entry),
    lockGrant: (environmentId, id) => creditWrites(em, sql, E).lockGrant(environmentId, id),
    takeBack: (environmentId, grantId, amount, entry, at) => creditWrites(em, sql, E).takeBack(environmentId, grantId, amount, entry, at),
  };
}

export class SqlCreditNoteStore implements CreditNoteStore {
  constructor(
    private readonly sql: Sql,
    private readonly E: Entities,
    private readonly encode: EventEncoder,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** A credit note of the environment (what the PDF reads too). */
  async get(environmentId: string, id: string): Promise<CreditNote | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.E.CreditNote, { environment_id: environmentId, id }));
    return r ? creditNoteFromRow(r) : undefined;
  }

  async list(environmentId: string, filter: CreditNoteFilter, page: Page): Promise<PageResult<CreditNote>> {
    const where: FindOptionsWhere<CreditNoteRow> = { environment_id: environmentId };
    if (filter.invoiceId !== undefined) where.invoice_id = filter.invoiceId;
    if (filter.subjectId !== undefined) where.subject_id = filter.subjectId;
    const rows = await this.sql.run((em) => em.find(this.E.CreditNote, { where, order: { seq: "ASC" }, skip: page.offset, take: page.limit + 1 }));
    return toPageResult(rows.map(creditNoteFromRow), page);
  }

  transaction<T>(fn: (tx: CreditNoteTx) => Promise<T>): Promise<T> {
    const run = this.sql.transaction((em) =>
      fn({
        ...creditNoteWrites(em, this.sql, this.E),
        ...eventWrites(em, this.encode, this.now, this.sql.dialect),
        dunning: dunningWrites(em, this.E),
        providerEvents: providerEventWrites(em, this.E),
      }),
    );
    return run.catch((err: unknown) => {
      if (isTransient(err)) throw new AbortedError("TRANSACTION_CONFLICT", "the write conflicted with another one (deadlock or lock wait timeout); try again");
      throw err;
    });
  }
}
