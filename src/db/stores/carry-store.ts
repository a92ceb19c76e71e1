/**
 * Carried debits (payments/carries.ts; migration 41): an invoice's amount due below the provider's
 * minimum charge, written once per invoice (the table's primary key is its ID), and taken by the
 * subject's next invoice in that currency with one conditional UPDATE (applied_invoice_id still
 * NULL): MySQL's UPDATE waits on rows another finalization took and then sees them taken; SQLite
 * serialises its writers.
 */
import { type EntityManager, IsNull } from "typeorm";
import type { CarryReads, CarryWrites } from "../../billing/payments/carries.js";
import { dec, formatDecimal } from "../../billing/money.js";
import type { Entities } from "../entities/index.js";
import { isUniqueViolation } from "../errors.js";
import type { Sql } from "../sql.js";

/** The carried debits' reads: what each subject still owes, per currency. */
export function carryReads(sql: Sql, E: Entities): CarryReads {
  return {
    async pending(environmentId, subjectId) {
      const rows = await sql.run((em) => em.find(E.CarriedDebit, { where: { environment_id: environmentId, subject_id: subjectId, applied_invoice_id: IsNull() } }));
      const sums = new Map<string, ReturnType<typeof dec>>();
      for (const r of rows) sums.set(r.currency, (sums.get(r.currency) ?? dec(0)).plus(dec(r.amount)));
      return [...sums.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([currency, amount]) => ({ currency, amount: formatDecimal(amount) }));
    },
    async pendingIn(environmentId, subjectId, currency) {
      const where = { environment_id: environmentId, subject_id: subjectId, currency, applied_invoice_id: IsNull() };
      const rows = await sql.run((em) => em.find(E.CarriedDebit, { where, order: { created_at: "ASC", source_invoice_id: "ASC" } }));
      return rows.map((r) => ({ sourceInvoiceId: r.source_invoice_id, sourceNumber: r.source_number, amount: r.amount }));
    },
  };
}

/** The carried debits' writes of a billing transaction on `em`. */
export function carryWrites(em: EntityManager, E: Entities): CarryWrites {
  return {
    async carry(i, amount, at) {
      if (await em.findOneBy(E.CarriedDebit, { source_invoice_id: i.id })) return false;
      try {
        await em.insert(E.CarriedDebit, {
          source_invoice_id: i.id,
          environment_id: i.environmentId,
          subject_id: i.subjectId,
          currency: i.currency,
          amount,
          source_number: i.number ?? null,
          applied_invoice_id: null,
          created_at: at,
          applied_at: null,
        });
        return true;
      } catch (err) {
        if (isUniqueViolation(err)) return false;
        throw err;
      }
    },
    async take(environmentId, subjectId, currency, invoiceId, at) {
      const res = await em.update(E.CarriedDebit, { environment_id: environmentId, subject_id: subjectId, currency, applied_invoice_id: IsNull() }, { applied_invoice_id: invoiceId, applied_at: at });
      if ((res.affected ?? 0) === 0) return [];
      const rows = await em.find(E.CarriedDebit, { where: { environment_id: environmentId, applied_invoice_id: invoiceId }, order: { created_at: "ASC", source_invoice_id: "ASC" } });
      return rows.map((r) => ({ sourceInvoiceId: r.source_invoice_id, sourceNumber: r.source_number, amount: r.amount }));
    },
    async release(environmentId, invoiceId) {
      const res = await em.update(E.CarriedDebit, { environment_id: environmentId, applied_invoice_id: invoiceId }, { applied_invoice_id: null, applied_at: null });
      return res.affected ?? 0;
    },
  };
}
