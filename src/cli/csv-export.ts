/**
 * What the finance exports (`billing invoices export`, `billing credit-notes export`; DESIGN §15)
 * share: RFC 4180 records (CRLF), text cells that never start a spreadsheet formula, exact
 * amounts in the smallest unit and in major units, the [--from, --to) range, the environments to
 * read, and a writer that waits while stdout's pipe is full.
 */
import { once } from "node:events";
import { currencyExponent } from "../billing/currencies.js";
import { type Decimal, dec, formatDecimal, sum } from "../billing/money.js";
import type { Environment } from "../billing/tenancy.js";
import { parseInstant } from "../billing/time.js";
import type { Database } from "../db/datasource.js";
import { SqlAuthStore } from "../db/stores/auth-store.js";
import { type Context, Refusal, STDIO, withMigratedDatabase } from "./context.js";

/** An amount as its exact decimal text. */
export const exact = (value: string) => formatDecimal(dec(value));

/**
 * Text a caller chose (names, descriptions, tax rates' names, IDs, numbers) that a spreadsheet
 * would run as a formula (a leading =, +, -, @, tab or carriage return: OWASP's CSV injection)
 * starts with a quote mark instead. Every text column goes through it; amounts and instants are
 * the service's own, so a negative amount stays a number.
 */
export const text = (value: string) => (/^[=+\-@\t\r]/.test(value) ? `'${value}` : value);

/** The exact sum of amounts. */
export const total = (amounts: string[]) => formatDecimal(sum(amounts.map(dec)));

/** Smallest units in major units by the currency's exponent: 11900 USD → "119.00", 500 JPY → "500". */
export const major = (minor: Decimal, currency: string) => {
  const exp = currencyExponent(currency);
  return minor.div(dec(10).pow(exp)).toFixed(exp);
};

/** A field as RFC 4180 writes it: in double quotes (quotes doubled) when it holds a comma, a quote or a line break. */
export function csvField(value: string): string {
  return /[",\r\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value;
}

/** A record without its line break (io.out adds "\n"; the "\r" before it makes CRLF). */
export const record = (fields: string[]) => `${fields.map(csvField).join(",")}\r`;

/**
 * Writes a line as io.out does; on the process's stdout, waits while the pipe is full, so a slow
 * reader holds the export back instead of the rows piling up in memory.
 */
export function writer(ctx: Context): (line: string) => Promise<void> {
  if (ctx.io !== STDIO) return async (line) => ctx.io.out(line);
  return async (line) => {
    if (!process.stdout.write(`${line}\n`)) await once(process.stdout, "drain");
  };
}

/** An instant flag's value (RFC 3339), or a refusal of `command`'s command line. */
function instantFlag(ctx: Context, command: string, flag: string): Date {
  const raw = ctx.flags.get(flag);
  if (raw === undefined) throw new Refusal(`billing ${command} needs ${flag} <time> (RFC 3339, e.g. 2026-01-01T00:00:00Z)`, 2);
  const p = parseInstant(raw);
  if (!p.ok) throw new Refusal(`${flag}: ${p.problem}`, 2);
  return new Date(p.ms);
}

/** The range [--from, --to) `command` was given (CSV only: --json is refused). */
export function timeRange(ctx: Context, command: string): { from: Date; to: Date } {
  if (ctx.json) throw new Refusal(`billing ${command} writes CSV; it takes no --json`, 2);
  const from = instantFlag(ctx, command, "--from");
  const to = instantFlag(ctx, command, "--to");
  if (to.getTime() <= from.getTime()) throw new Refusal("--to must be after --from", 2);
  return { from, to };
}

/** The environments to export: the one --env names (by name or ID), else every one. */
export async function environments(db: Database, flag: string | undefined): Promise<Environment[]> {
  const store = new SqlAuthStore(db.sql, db.entities);
  const all = await store.listEnvironments();
  if (flag === undefined) return all;
  const env = (await store.findEnvironmentByName(flag)) ?? all.find((e) => e.id === flag);
  if (!env) throw new Refusal(`no environment named or with ID ${flag}`, 1);
  return [env];
}

/** A column of an export: its name, and its cell for a row. */
export type Column<R> = [string, (row: R) => string];

/** One page of an environment's documents after a cursor, and the cursor of the next (none: the last). */
export type PageReader<D, C> = (environmentId: string, after: C | undefined) => Promise<{ items: D[]; next: C | undefined }>;

/**
 * Writes an export as CSV: its header, then per environment (--env, else every one) each page of
 * documents `read` gives, each document's rows (`rowsOf`) as `columns` write them.
 */
export async function writeExport<D, C, R>(ctx: Context, columns: readonly Column<R>[], read: (db: Database) => PageReader<D, C>, rowsOf: (env: Environment, doc: D) => R[]): Promise<void> {
  await withMigratedDatabase(ctx.databaseUrl, async (db) => {
    const envs = await environments(db, ctx.flags.get("--env"));
    const page = read(db);
    const out = writer(ctx);
    await out(record(columns.map(([name]) => name)));
    for (const env of envs) {
      let after: C | undefined;
      do {
        const p = await page(env.id, after);
        for (const doc of p.items) for (const row of rowsOf(env, doc)) await out(record(columns.map(([, value]) => value(row))));
        after = p.next;
      } while (after);
    }
  });
}
