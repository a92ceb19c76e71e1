/**
 * `billing invoices export`: the finance export (DESIGN §15). Finalized invoices (never drafts,
 * never the empty ones kept internal) whose finalized_at lies in [--from, --to), as CSV (RFC 4180,
 * CRLF), one row per invoice line, every amount an exact decimal in the currency's smallest unit,
 * plus the invoice total in major units. Read page by page: an export of any size holds one page.
 */
import { once } from "node:events";
import { currencyExponent } from "../billing/currencies.js";
import { type Decimal, dec, formatDecimal, sum } from "../billing/money.js";
import type { Environment } from "../billing/tenancy.js";
import { parseInstant } from "../billing/time.js";
import { type Invoice, type InvoiceLine, amountDueOf, isInternal } from "../billing/subscriptions/types.js";
import type { Database } from "../db/datasource.js";
import { SqlAuthStore } from "../db/stores/auth-store.js";
import { type ExportCursor, InvoiceExportStore } from "../db/stores/invoice-export-store.js";
import { type Command, type Context, Refusal, STDIO, withMigratedDatabase } from "./context.js";

/** The statuses a finalized invoice can have, which --status may name. */
const FINALIZED_STATUSES = ["open", "paid", "void", "uncollectible"];
const PAGE = 200;

/** The export's columns, in order, and each one's value for a line of an invoice. */
const COLUMNS: [string, (r: Row) => string][] = [
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
];

interface Row {
  env: Environment;
  inv: Invoice;
  line: InvoiceLine;
  index: number;
}

const exact = (value: string) => formatDecimal(dec(value));
/**
 * Text a caller chose (names, descriptions, tax rates' names, IDs, numbers) that a spreadsheet
 * would run as a formula (a leading =, +, -, @, tab or carriage return: OWASP's CSV injection)
 * starts with a quote mark instead. Every text column goes through it; amounts and instants are
 * the service's own, so a negative amount stays a number.
 */
const text = (value: string) => (/^[=+\-@\t\r]/.test(value) ? `'${value}` : value);
const total = (amounts: string[]) => formatDecimal(sum(amounts.map(dec)));
/** Smallest units in major units by the currency's exponent: 11900 USD → "119.00", 500 JPY → "500". */
const major = (minor: Decimal, currency: string) => {
  const exp = currencyExponent(currency);
  return minor.div(dec(10).pow(exp)).toFixed(exp);
};

/** A field as RFC 4180 writes it: in double quotes (quotes doubled) when it holds a comma, a quote or a line break. */
export function csvField(value: string): string {
  return /[",\r\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value;
}

/** A record without its line break (io.out adds "\n"; the "\r" before it makes CRLF). */
const record = (fields: string[]) => `${fields.map(csvField).join(",")}\r`;

/**
 * Writes a line as io.out does; on the process's stdout, waits while the pipe is full, so a slow
 * reader holds the export back instead of the rows piling up in memory.
 */
function writer(ctx: Context): (line: string) => Promise<void> {
  if (ctx.io !== STDIO) return async (line) => ctx.io.out(line);
  return async (line) => {
    if (!process.stdout.write(`${line}\n`)) await once(process.stdout, "drain");
  };
}

/** An instant flag's value (RFC 3339), or a refusal of the command line. */
function instantFlag(ctx: Context, flag: string): Date {
  const raw = ctx.flags.get(flag);
  if (raw === undefined) throw new Refusal(`billing invoices export needs ${flag} <time> (RFC 3339, e.g. 2026-01-01T00:00:00Z)`, 2);
  const p = parseInstant(raw);
  if (!p.ok) throw new Refusal(`${flag}: ${p.problem}`, 2);
  return new Date(p.ms);
}

/** What the command line asks for: the range and the statuses. */
function exportRange(ctx: Context): { from: Date; to: Date; statuses: string[] } {
  if (ctx.json) throw new Refusal("billing invoices export writes CSV; it takes no --json", 2);
  const from = instantFlag(ctx, "--from");
  const to = instantFlag(ctx, "--to");
  if (to.getTime() <= from.getTime()) throw new Refusal("--to must be after --from", 2);
  const statuses = (ctx.flags.get("--status") ?? "").split(",").filter((s) => s !== "");
  const bad = statuses.filter((s) => !FINALIZED_STATUSES.includes(s));
  if (bad.length > 0) throw new Refusal(`--status: ${bad.join(", ")} is not one of ${FINALIZED_STATUSES.join(", ")} (drafts are not exported)`, 2);
  return { from, to, statuses };
}

/** The environments to export: the one --env names (by name or ID), else every one. */
async function environments(db: Database, flag: string | undefined): Promise<Environment[]> {
  const store = new SqlAuthStore(db.sql, db.entities);
  const all = await store.listEnvironments();
  if (flag === undefined) return all;
  const env = (await store.findEnvironmentByName(flag)) ?? all.find((e) => e.id === flag);
  if (!env) throw new Refusal(`no environment named or with ID ${flag}`, 1);
  return [env];
}

async function exportInvoices(ctx: Context): Promise<void> {
  const range = exportRange(ctx);
  await withMigratedDatabase(ctx.databaseUrl, async (db) => {
    const envs = await environments(db, ctx.flags.get("--env"));
    const reader = new InvoiceExportStore(db);
    const out = writer(ctx);
    await out(record(COLUMNS.map(([name]) => name)));
    for (const env of envs) {
      let after: ExportCursor | undefined;
      do {
        const page = await reader.page(env.id, range, after, PAGE);
        for (const inv of page.invoices) {
          if (isInternal(inv)) continue;
          for (const [index, line] of inv.lines.entries()) await out(record(COLUMNS.map(([, value]) => value({ env, inv, line, index }))));
        }
        after = page.next;
      } while (after);
    }
  });
}

/** The invoice commands of this file by their words. */
export const INVOICE_COMMANDS: Record<string, Command> = {
  "invoices export": {
    positionals: [],
    flags: { "--from": "value", "--to": "value", "--env": "value", "--status": "value" },
    synopsis: "--from <time> --to <time> [--env <name|id>] [--status open,paid,void,uncollectible]",
    summary: "finalized invoices as CSV for finance, one row per line (finalized in [from, to))",
    writes: false,
    run: exportInvoices,
  },
};
