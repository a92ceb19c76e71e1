/**
 * What every command of the CLI works with (run.ts): where it writes, the flags and arguments it
 * was given, its database, and the refusal that ends it with exit code 1 (what it found) or 2 (its
 * command line). Nothing here migrates: a command that needs the schema refuses a database whose
 * migrations are pending and says how to apply them.
 */
import type { SecretKeys } from "../billing/payments/secret-box.js";
import { type Database, createDatabase } from "../db/datasource.js";
import { OperatorStore } from "../db/stores/operator-store.js";
import type { CommandSpec } from "./args.js";

/** How to apply pending migrations, as the refusals say it. */
export const MIGRATE_HINT = "run billing migrate up first (npm run billing -- migrate up)";

/** A refusal with its exit code: 1 for what the command found, 2 for its command line. */
export class Refusal extends Error {
  constructor(
    message: string,
    readonly code: 1 | 2,
  ) {
    super(message);
  }
}

export type Out = (line: string) => void;

/** Where a run writes: its output (stdout) and its refusals and notes (stderr). */
export interface Io {
  out: Out;
  err: Out;
}

export const STDIO: Io = { out: (l) => process.stdout.write(`${l}\n`), err: (l) => process.stderr.write(`${l}\n`) };

/** One run of one command. */
export interface Context {
  positionals: string[];
  flags: Map<string, string>;
  io: Io;
  /** The configured database's URL. */
  databaseUrl: string;
  /** The server's public base URL (links the domain builds). */
  publicBaseUrl: string;
  /** SECRETS_ENCRYPTION_KEY (and _PREVIOUS): what provider secrets are sealed with; undefined: none. */
  secrets?: SecretKeys | undefined;
  /** --json: one JSON document on stdout instead of lines of text. */
  json: boolean;
}

/** A command: what it takes (besides --json, which every command takes), its help, and what it does. */
export interface Command extends CommandSpec {
  /** Its arguments and flags as the usage shows them, e.g. "<name> [--mode test|live]". */
  synopsis: string;
  /** What it does, in the usage. */
  summary: string;
  /** It changes the database: the run says which database first (stderr). */
  writes: boolean;
  run(ctx: Context): Promise<void>;
}

/** Prints `value` as JSON with --json, else `text`, one line each. */
export function print(ctx: Context, value: unknown, text: string[]): void {
  if (ctx.json) ctx.io.out(JSON.stringify(value, null, 2));
  else for (const line of text) ctx.io.out(line);
}

/** Opens the database for `fn` and closes it after; a database that cannot be opened is a refusal. */
export async function withDatabase<T>(url: string, fn: (db: Database) => Promise<T>): Promise<T> {
  let db: Database;
  try {
    db = await createDatabase(url, { poolSize: 2 });
    await db.dataSource.initialize();
  } catch (err) {
    throw new Refusal(`the database cannot be reached: ${err instanceof Error ? err.message : String(err)}`, 1);
  }
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

/** Refuses to read or change anything on a database whose schema is behind the code. */
export async function requireMigrated(db: Database): Promise<void> {
  const { pending } = await new OperatorStore(db).migrations();
  if (pending.length === 0) return;
  const names = pending.length <= 3 ? pending.join(", ") : `${pending[0]} … ${pending[pending.length - 1]}`;
  throw new Refusal(`the database has ${pending.length} pending migration(s) (${names}), and this command applies none: ${MIGRATE_HINT}`, 1);
}

/** withDatabase on a database whose migrations are all applied (requireMigrated). */
export function withMigratedDatabase<T>(url: string, fn: (db: Database) => Promise<T>): Promise<T> {
  return withDatabase(url, async (db) => {
    await requireMigrated(db);
    return fn(db);
  });
}

/** A whole number from `raw` in [0, max], or a usage refusal saying `rule`. */
export function wholeNumber(raw: string | undefined, max: number, rule: string): number {
  if (raw === undefined || !/^\d+$/.test(raw) || Number(raw) > max) throw new Refusal(rule, 2);
  return Number(raw);
}
