/**
 * The finance export's reads (DESIGN §15, `billing invoices export`): an environment's finalized
 * invoices with their lines, one page at a time by keyset, so an export of any size holds one
 * page in memory.
 */
import { In } from "typeorm";
import type { Invoice } from "../../billing/subscriptions/types.js";
import type { Database } from "../datasource.js";
import { dbTime } from "../raw.js";
import { invoiceFromRows } from "./invoice-store.js";

/** Where the previous page ended: its last row's finalization time and seq. */
export interface ExportCursor {
  finalizedAt: Date;
  seq: string;
}

export interface FinalizedRange {
  /** finalized_at in [from, to). */
  from: Date;
  to: Date;
  /** Only these statuses (none: every status but draft). */
  statuses?: string[];
}

export class InvoiceExportStore {
  constructor(private readonly db: Database) {}

  /**
   * One page of the environment's invoices finalized in the range (never drafts), in finalization
   * order then seq, after `after`: a range of ix_invoices_env_finalized (environment_id,
   * finalized_at), which holds seq as its last part on InnoDB, so each page reads its own rows.
   */
  async page(environmentId: string, range: FinalizedRange, after: ExportCursor | undefined, limit: number): Promise<{ invoices: Invoice[]; next: ExportCursor | undefined }> {
    const E = this.db.entities;
    return this.db.sql.run(async (em) => {
      const q = em
        .createQueryBuilder(E.Invoice, "i")
        .where("i.environment_id = :env AND i.finalized_at >= :from AND i.finalized_at < :to AND i.status <> 'draft'", { env: environmentId, from: dbTime(range.from), to: dbTime(range.to) });
      if (range.statuses?.length) q.andWhere("i.status IN (:...statuses)", { statuses: range.statuses });
      if (after) q.andWhere("(i.finalized_at > :at OR (i.finalized_at = :at AND i.seq > :seq))", { at: dbTime(after.finalizedAt), seq: after.seq });
      const rows = await q.orderBy("i.finalized_at", "ASC").addOrderBy("i.seq", "ASC").limit(limit).getMany();
      if (rows.length === 0) return { invoices: [], next: undefined };
      const lines = await em.find(E.InvoiceLine, { where: { invoice_id: In(rows.map((r) => r.id)) }, order: { invoice_id: "ASC", position: "ASC" } });
      const last = rows[rows.length - 1] as (typeof rows)[number];
      return {
        invoices: rows.map((r) =>
          invoiceFromRows(
            r,
            lines.filter((l) => l.invoice_id === r.id),
          ),
        ),
        next: rows.length < limit ? undefined : { finalizedAt: last.finalized_at as Date, seq: String(last.seq) },
      };
    });
  }
}
