/**
 * The finance exports' reads (DESIGN §15, `billing invoices export`, `billing credit-notes
 * export`): an environment's finalized invoices with their lines, and its credit notes, one page
 * at a time by keyset, so an export of any size holds one page in memory.
 */
import { In } from "typeorm";
import type { CreditNote } from "../../billing/credit-notes/types.js";
import type { Invoice } from "../../billing/subscriptions/types.js";
import type { Database } from "../datasource.js";
import { dbTime } from "../raw.js";
import { creditNoteFromRow } from "./credit-note-store.js";
import { invoiceFromRows } from "./invoice-store.js";

/** Where the previous page (of invoices or of credit notes) ended: its last row's time (the one the range is of) and seq. */
export interface ExportCursor {
  at: Date;
  seq: string;
}

/** The instant an export's range is of: when invoices were finalized, voided or marked uncollectible. */
export type ExportedBy = "finalized" | "voided" | "uncollectible";

const BY_COLUMN: Record<ExportedBy, string> = { finalized: "finalized_at", voided: "voided_at", uncollectible: "marked_uncollectible_at" };

export interface FinalizedRange {
  /** The instant of `by` in [from, to). */
  from: Date;
  to: Date;
  /** Which instant (default: finalized_at). */
  by?: ExportedBy;
  /** Only these statuses (none: every status but draft). */
  statuses?: string[];
}

/** An invoice as the export writes it: with when it was voided or marked uncollectible (null: not). */
export type ExportedInvoice = Invoice & { voidedAt: Date | null; markedUncollectibleAt: Date | null };

export class InvoiceExportStore {
  constructor(private readonly db: Database) {}

  /**
   * One page of the environment's invoices whose instant `range.by` lies in the range (never
   * drafts), in that instant's order then seq, after `after`: a range of the index on
   * (environment_id, that instant) (ix_invoices_env_finalized, _voided, _uncollectible), which
   * holds seq as its last part on InnoDB, so each page reads its own rows.
   */
  async page(environmentId: string, range: FinalizedRange, after: ExportCursor | undefined, limit: number): Promise<{ invoices: ExportedInvoice[]; next: ExportCursor | undefined }> {
    const E = this.db.entities;
    const at = `i.${BY_COLUMN[range.by ?? "finalized"]}`;
    return this.db.sql.run(async (em) => {
      const q = em
        .createQueryBuilder(E.Invoice, "i")
        .where(`i.environment_id = :env AND ${at} >= :from AND ${at} < :to AND i.status <> 'draft'`, { env: environmentId, from: dbTime(range.from), to: dbTime(range.to) });
      if (range.statuses?.length) q.andWhere("i.status IN (:...statuses)", { statuses: range.statuses });
      if (after) q.andWhere(`(${at} > :at OR (${at} = :at AND i.seq > :seq))`, { at: dbTime(after.at), seq: after.seq });
      const rows = await q.orderBy(at, "ASC").addOrderBy("i.seq", "ASC").limit(limit).getMany();
      if (rows.length === 0) return { invoices: [], next: undefined };
      const lines = await em.find(E.InvoiceLine, { where: { invoice_id: In(rows.map((r) => r.id)) }, order: { invoice_id: "ASC", position: "ASC" } });
      const last = rows[rows.length - 1] as (typeof rows)[number];
      const lastAt = { finalized: last.finalized_at, voided: last.voided_at, uncollectible: last.marked_uncollectible_at }[range.by ?? "finalized"] as Date;
      return {
        invoices: rows.map((r) => ({
          ...invoiceFromRows(
            r,
            lines.filter((l) => l.invoice_id === r.id),
          ),
          voidedAt: r.voided_at ?? null,
          markedUncollectibleAt: r.marked_uncollectible_at ?? null,
        })),
        next: rows.length < limit ? undefined : { at: lastAt, seq: String(last.seq) },
      };
    });
  }

  /**
   * One page of the environment's credit notes dated in [from, to) (created_at: the note's date,
   * on its subject's clock), void ones too, or with `by` "voided" those voided in it (voided_at:
   * with their invoice, in real time), in that instant's order then seq, after `after`: a range of
   * ix_credit_notes_env_created or _voided (environment_id, that instant), seq its last part on InnoDB.
   */
  async creditNotePage(
    environmentId: string,
    range: { from: Date; to: Date; by?: "created" | "voided" },
    after: ExportCursor | undefined,
    limit: number,
  ): Promise<{ notes: CreditNote[]; next: ExportCursor | undefined }> {
    const E = this.db.entities;
    const at = range.by === "voided" ? "n.voided_at" : "n.created_at";
    return this.db.sql.run(async (em) => {
      const q = em.createQueryBuilder(E.CreditNote, "n").where(`n.environment_id = :env AND ${at} >= :from AND ${at} < :to`, { env: environmentId, from: dbTime(range.from), to: dbTime(range.to) });
      if (after) q.andWhere(`(${at} > :at OR (${at} = :at AND n.seq > :seq))`, { at: dbTime(after.at), seq: after.seq });
      const rows = await q.orderBy(at, "ASC").addOrderBy("n.seq", "ASC").limit(limit).getMany();
      const last = rows[rows.length - 1];
      return {
        notes: rows.map(creditNoteFromRow),
        next: last === undefined || rows.length < limit ? undefined : { at: (range.by === "voided" ? last.voided_at : last.created_at) as Date, seq: String(last.seq) },
      };
    });
  }
}
