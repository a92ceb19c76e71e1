/**
 * `billing credit-notes export`: the credit notes for finance (DESIGN §15), the documents that
 * reverse part or all of an invoice. Notes dated in [--from, --to) (created_at), void ones too (with
 * `--by voided`: the notes voided with their invoice in it, to book as undoing the note), as
 * CSV (RFC 4180, CRLF), one row per note line: what it credits, tax included, its tax and its net,
 * every amount a positive exact decimal in the currency's smallest unit (a credit: to book as a
 * reversal of the invoice named), plus the note's total in major units. Read page by page.
 */
import type { CreditNote, CreditNoteLine } from "../billing/credit-notes/types.js";
import { dec, formatDecimal } from "../billing/money.js";
import type { Environment } from "../billing/tenancy.js";
import { type ExportCursor, InvoiceExportStore } from "../db/stores/invoice-export-store.js";
import { type Command, type Context, Refusal } from "./context.js";
import { type Column, exact, major, text, timeRange, writeExport } from "./csv-export.js";

const PAGE = 200;

interface Row {
  env: Environment;
  note: CreditNote;
  line: CreditNoteLine;
  index: number;
}

/** The export's columns, in order, and each one's value for a line of a note. */
const COLUMNS: Column<Row>[] = [
  ["environment", (r) => text(r.env.name)],
  ["environment_id", (r) => r.env.id],
  ["credit_note_id", (r) => r.note.id],
  ["number", (r) => text(r.note.number)],
  ["status", (r) => r.note.status],
  ["invoice_id", (r) => r.note.invoiceId],
  ["invoice_number", (r) => text(r.note.invoiceNumber)],
  ["subject_id", (r) => text(r.note.subjectId)],
  ["currency", (r) => r.note.currency],
  ["created_at", (r) => r.note.createdAt.toISOString()],
  ["reason", (r) => r.note.reason],
  ["memo", (r) => text(r.note.memo ?? "")],
  ["outcome", (r) => r.note.outcome],
  ["refund_status", (r) => r.note.refundStatus ?? ""],
  ["line_index", (r) => String(r.index)],
  ["line_description", (r) => text(r.line.description)],
  ["invoice_line_index", (r) => (r.line.invoiceLineIndex === null ? "" : String(r.line.invoiceLineIndex))],
  ["line_amount", (r) => exact(r.line.amount)],
  ["line_tax", (r) => exact(r.line.taxAmount)],
  ["line_net", (r) => formatDecimal(dec(r.line.amount).minus(dec(r.line.taxAmount)))],
  ["note_subtotal", (r) => exact(r.note.subtotal)],
  ["note_total_tax", (r) => exact(r.note.totalTax)],
  ["note_total", (r) => exact(r.note.total)],
  ["note_total_major", (r) => major(dec(r.note.total), r.note.currency)],
  ["voided_at", (r) => r.note.voidedAt?.toISOString() ?? ""],
];

async function exportCreditNotes(ctx: Context): Promise<void> {
  const by = ctx.flags.get("--by") ?? "created";
  if (by !== "created" && by !== "voided") throw new Refusal(`--by: ${by} is not one of created, voided`, 2);
  const range = { ...timeRange(ctx, "credit-notes export"), by: by as "created" | "voided" };
  await writeExport(
    ctx,
    COLUMNS,
    (db) => async (environmentId, after: ExportCursor | undefined) => {
      const page = await new InvoiceExportStore(db).creditNotePage(environmentId, range, after, PAGE);
      return { items: page.notes, next: page.next };
    },
    (env, note: CreditNote) => note.lines.map((line, index) => ({ env, note, line, index })),
  );
}

/** The credit-note commands of this file by their words. */
export const CREDIT_NOTE_COMMANDS: Record<string, Command> = {
  "credit-notes export": {
    positionals: [],
    flags: { "--from": "value", "--to": "value", "--env": "value", "--by": "value" },
    synopsis: "--from <time> --to <time> [--by created|voided] [--env <name|id>]",
    summary: "credit notes as CSV for finance, one row per note line (dated, or voided, in [from, to))",
    writes: false,
    run: exportCreditNotes,
  },
};
