/**
 * `billing invoices export`: the finance export (DESIGN §15). Finalized invoices (never drafts,
 * never the empty ones kept internal) whose finalized_at lies in [--from, --to) (with `--by voided`
 * or `--by uncollectible`: those voided or written off in it, however long after they were
 * finalized), as CSV (RFC 4180, CRLF), one row per invoice line, every amount an exact decimal in
 * the currency's smallest unit, plus the invoice total in major units. Read page by page: an export
 * of any size holds one page.
 */
import { dec, formatDecimal } from "../billing/money.js";
import { carriedInOf } from "../billing/payments/carries.js";
import { type InvoiceLine, amountDueOf, isInternal } from "../billing/subscriptions/types.js";
import type { Environment } from "../billing/tenancy.js";
import { type ExportCursor, type ExportedBy, type ExportedInvoice, InvoiceExportStore } from "../db/stores/invoice-export-store.js";
import { type Command, type Context, Refusal } from "./context.js";
import { type Column, exact, major, text, timeRange, total, writeExport } from "./csv-export.js";

/** The statuses a finalized invoice can have, which --status may name. */
const FINALIZED_STATUSES = ["open", "paid", "void", "uncollectible"];
/** What --by may name: the instant the range is of. */
const BY: readonly ExportedBy[] = ["finalized", "voided", "uncollectible"];
const PAGE = 200;

/** The export's columns, in order, and each one's value for a line of an invoice. */
const COLUMNS: Column<Row>[] = [
  ["environment", (r) => text(r.env.name)],
  ["environment_id", (r) => r.env.id],
  ["invoice_id", (r) => r.inv.id],
  ["number", (r) => text(r.inv.number ?? "")],
  ["status", (r) => r.inv.status],
  ["subject_id", (r) => text(r.inv.subjectId)],
  ["customer_name", (r) => text(r.inv.customer?.legalName ?? r.inv.customerName ?? "")],
  ["customer_country", (r) => text(r.inv.customer?.address?.country ?? "")],
  ["customer_tax_id", (r) => text((r.inv.customer?.taxIds ?? []).map((t) => `${t.type} ${t.value}`).join("; "))],
  ["currency", (r) => r.inv.currency],
  ["created_at", (r) => r.inv.createdAt.toISOString()],
  ["finalized_at", (r) => r.inv.finalizedAt?.toISOString() ?? ""],
  ["period_start", (r) => r.inv.periodStart.toISOString()],
  ["period_end", (r) => r.inv.periodEnd.toISOString()],
  ["line_index", (r) => String(r.index)],
  ["line_description", (r) => text(r.line.description)],
  ["line_kind", (r) => r.line.kind],
  ["quantity", (r) => exact(r.line.quantity)],
  ["unit_amount", (r) => exact(r.line.unitAmount)],
  ["line_amount", (r) => exact(r.line.amount)],
  ["line_discount", (r) => total((r.line.discountAmounts ?? []).map((d) => d.amount))],
  ["line_tax", (r) => total((r.line.taxAmounts ?? []).map((t) => t.amount))],
  ["line_tax_rates", (r) => text((r.line.taxAmounts ?? []).map((t) => `${t.displayName} ${t.percentage}%${t.inclusive ? " inclusive" : ""}`).join("; "))],
  ["invoice_subtotal", (r) => exact(r.inv.subtotal ?? r.inv.total)],
  ["invoice_total_discount", (r) => exact(r.inv.totalDiscount ?? "0")],
  ["invoice_total_tax", (r) => exact(r.inv.totalTax ?? "0")],
  ["invoice_total", (r) => exact(r.inv.total)],
  ["invoice_total_major", (r) => major(dec(r.inv.total), r.inv.currency)],
  ["credits_applied", (r) => total((r.inv.creditsApplied ?? []).map((c) => c.amount))],
  ["amount_credited", (r) => exact(r.inv.amountCredited ?? "0")],
  ["amount_due", (r) => exact(amountDueOf(r.inv))],
  ["voided_at", (r) => r.inv.voidedAt?.toISOString() ?? ""],
  ["marked_uncollectible_at", (r) => r.inv.markedUncollectibleAt?.toISOString() ?? ""],
  // DESIGN §16: an amount due below the provider's minimum charge, not collected: carried to the next invoice (its amount_carried_in there).
  ["amount_carried", (r) => exact(r.inv.payment?.carried ?? "0")],
  // What it took of earlier invoices' amounts carried: in its amount_due, not its total (counted in theirs).
  ["amount_carried_in", (r) => exact(formatDecimal(carriedInOf(r.inv)))],
];

interface Row {
  env: Environment;
  inv: ExportedInvoice;
  line: InvoiceLine;
  index: number;
}

/** What the command line asks for: the range, the instant it is of, and the statuses. */
function exportRange(ctx: Context): { from: Date; to: Date; by: ExportedBy; statuses: string[] } {
  const range = timeRange(ctx, "invoices export");
  const by = (ctx.flags.get("--by") ?? "finalized") as ExportedBy;
  if (!BY.includes(by)) throw new Refusal(`--by: ${by} is not one of ${BY.join(", ")}`, 2);
  const statuses = (ctx.flags.get("--status") ?? "").split(",").filter((s) => s !== "");
  const bad = statuses.filter((s) => !FINALIZED_STATUSES.includes(s));
  if (bad.length > 0) throw new Refusal(`--status: ${bad.join(", ")} is not one of ${FINALIZED_STATUSES.join(", ")} (drafts are not exported)`, 2);
  return { ...range, by, statuses };
}

async function exportInvoices(ctx: Context): Promise<void> {
  const range = exportRange(ctx);
  await writeExport(
    ctx,
    COLUMNS,
    (db) => async (environmentId, after: ExportCursor | undefined) => {
      const page = await new InvoiceExportStore(db).page(environmentId, range, after, PAGE);
      return { items: page.invoices, next: page.next };
    },
    // Never the empty invoices kept internal (DESIGN §15).
    (env, inv: ExportedInvoice) => (isInternal(inv) ? [] : inv.lines.map((line, index) => ({ env, inv, line, index }))),
  );
}

/** The invoice commands of this file by their words. */
export const INVOICE_COMMANDS: Record<string, Command> = {
  "invoices export": {
    positionals: [],
    flags: { "--from": "value", "--to": "value", "--env": "value", "--status": "value", "--by": "value" },
    synopsis: "--from <time> --to <time> [--by finalized|voided|uncollectible] [--env <name|id>] [--status open,paid,void,uncollectible]",
    summary: "finalized invoices as CSV for finance, one row per line (finalized, or voided or written off, in [from, to))",
    writes: false,
    run: exportInvoices,
  },
};
