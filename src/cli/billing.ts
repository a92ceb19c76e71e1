/**
 * The operator CLI, against the configured database (DATABASE_URL, as the server reads it, with
 * the server's env file when given: `--env-file PATH` anywhere on the command line; settings.ts):
 *
 *   npm run billing -- migrate status            applied and pending migrations
 *   npm run billing -- migrate up                applies the pending ones
 *   npm run billing -- status                    version, database, migrations, billing backlog
 *   npm run billing -- subscriptions retry-failed [--env <name|id>] [--subscription <id>]
 *   npm run billing -- invoices finalize <invoice_id> [--env <name|id>]
 *   npm run billing -- invoices void <invoice_id> [--env <name|id>]
 *   npm run billing -- invoices mark-uncollectible <invoice_id> [--env <name|id>]
 *   npm run billing -- keys …                    the keys CLI (src/cli/keys.ts)
 *
 * Every command takes --json (one JSON document on stdout, for scripts). A command line it does
 * not understand exits 2 with the usage; a refusal (an unknown invoice, one that is not open, a
 * database that cannot be reached or is not migrated) exits 1 with the reason on stderr.
 */
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { buildServices } from "../wiring/services.js";
import { BillingError } from "../billing/errors.js";
import { systemCaller } from "../billing/tenancy.js";
import { type Database, createDatabase, dialectOf } from "../db/datasource.js";
import { SqlAuthStore } from "../db/stores/auth-store.js";
import { OperatorStore } from "../db/stores/operator-store.js";
import { type CommandSpec, parseCommandLine, wantsHelp } from "./args.js";
import { run as runKeys } from "./keys.js";
import { cliSettings, databaseLine, takeEnvFile } from "./settings.js";

export const USAGE = `usage: billing [--env-file PATH] <command> [--json]
  migrate status                          list applied and pending migrations
  migrate up                              apply the pending migrations
  status                                  version, database, migrations, due and set-aside billing cycles, webhook backlog
  subscriptions retry-failed [--env <name|id>] [--subscription <id>]
                                          retry set-aside subscriptions now (ends their backoff)
  invoices finalize <invoice_id> [--env <name|id>]
                                          a draft invoice is finalized now (open, then charged)
  invoices void <invoice_id> [--env <name|id>]
  invoices mark-uncollectible <invoice_id> [--env <name|id>]
                                          an open invoice becomes void or uncollectible
  keys <command> …                        environments and API keys (see: billing keys --help)`;

const JSON_FLAG = { "--json": "switch" } as const;
const COMMANDS: Record<string, CommandSpec> = {
  "migrate status": { positionals: [], flags: { ...JSON_FLAG } },
  "migrate up": { positionals: [], flags: { ...JSON_FLAG } },
  status: { positionals: [], flags: { ...JSON_FLAG } },
  "subscriptions retry-failed": { positionals: [], flags: { ...JSON_FLAG, "--env": "value", "--subscription": "value" } },
  "invoices finalize": { positionals: ["invoice_id"], flags: { ...JSON_FLAG, "--env": "value" } },
  "invoices void": { positionals: ["invoice_id"], flags: { ...JSON_FLAG, "--env": "value" } },
  "invoices mark-uncollectible": { positionals: ["invoice_id"], flags: { ...JSON_FLAG, "--env": "value" } },
};

export function parseArgs(args: readonly string[]) {
  return parseCommandLine("billing", COMMANDS, args);
}

/** A refusal with its exit code: 2 for a command line, 1 for what the command found. */
class Refusal extends Error {
  constructor(
    message: string,
    readonly code: 1 | 2,
  ) {
    super(message);
  }
}

const VERSION = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;

type Out = (line: string) => void;

/** Where a run writes: its output (stdout) and its refusals (stderr). */
export interface Io {
  out: Out;
  err: Out;
}

const STDIO: Io = { out: (l) => process.stdout.write(`${l}\n`), err: (l) => process.stderr.write(`${l}\n`) };

async function withDatabase<T>(url: string, fn: (db: Database) => Promise<T>): Promise<T> {
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

/** Refuses to change anything on a database whose schema is behind the code. */
async function requireMigrated(ops: OperatorStore): Promise<void> {
  const { pending } = await ops.migrations();
  if (pending.length > 0) throw new Refusal(`the database has ${pending.length} pending migration(s) (${pending.join(", ")}): run billing migrate up first`, 1);
}

/** An environment by name or ID. */
async function environment(db: Database, nameOrId: string) {
  const store = new SqlAuthStore(db.sql, db.entities);
  const env = (await store.findEnvironmentByName(nameOrId)) ?? (await store.listEnvironments()).find((e) => e.id === nameOrId);
  if (!env) throw new Refusal(`no environment named or with ID ${nameOrId}`, 1);
  return env;
}

async function execute(command: string, positionals: string[], flags: Map<string, string>, url: string, publicBaseUrl: string, out: Out): Promise<void> {
  const json = flags.has("--json");
  const print = (value: unknown, text: string[]) => {
    if (json) out(JSON.stringify(value, null, 2));
    else for (const line of text) out(line);
  };

  if (command === "status") {
    const kind = dialectOf(url);
    let reachable = false;
    let report: Record<string, unknown> = {};
    try {
      await withDatabase(url, async (db) => {
        reachable = await db.ping(5_000);
        const ops = new OperatorStore(db);
        const m = await ops.migrations();
        report = { migrations: { applied: m.applied.length, pending: m.pending.length } };
        if (m.pending.length === 0) {
          report.billing = { due_cycles: await ops.dueCycles(new Date()), set_aside_subscriptions: (await ops.setAside()).length };
          const hooks = await ops.webhookBacklog();
          report.webhooks = { pending_deliveries: hooks.pendingDeliveries, failing_endpoints: hooks.failingEndpoints };
        }
      });
    } catch (err) {
      if (!(err instanceof Refusal)) throw err;
      reachable = false;
      report.error = err.message;
    }
    const doc = { version: VERSION, database: { kind, reachable }, ...report };
    const m = report.migrations as { applied: number; pending: number } | undefined;
    const b = report.billing as { due_cycles: number; set_aside_subscriptions: number } | undefined;
    const w = report.webhooks as { pending_deliveries: number; failing_endpoints: number } | undefined;
    print(doc, [
      `version\t${VERSION}`,
      `database\t${kind}, ${reachable ? "reachable" : "NOT reachable"}`,
      ...(m ? [`migrations\t${m.applied} applied, ${m.pending} pending`] : []),
      ...(b ? [`due cycles\t${b.due_cycles}`, `set-aside subscriptions\t${b.set_aside_subscriptions}`] : []),
      ...(w ? [`webhook deliveries pending\t${w.pending_deliveries}`, `webhook endpoints failing\t${w.failing_endpoints}`] : []),
      ...(report.error ? [`error\t${report.error}`] : []),
    ]);
    if (!reachable) throw new Refusal("", 1);
    return;
  }

  await withDatabase(url, async (db) => {
    const ops = new OperatorStore(db);
    if (command === "migrate status") {
      const m = await ops.migrations();
      print(m, [...m.applied.map((n) => `applied\t${n}`), ...m.pending.map((n) => `pending\t${n}`), `${m.applied.length} applied, ${m.pending.length} pending`]);
      return;
    }
    if (command === "migrate up") {
      const ran = await ops.migrateUp();
      print({ applied: ran }, ran.length === 0 ? ["nothing to apply: the database is up to date"] : [...ran.map((n) => `applied\t${n}`), `${ran.length} applied`]);
      return;
    }
    await requireMigrated(ops);
    if (command === "subscriptions retry-failed") {
      const envFlag = flags.get("--env");
      const env = envFlag ? await environment(db, envFlag) : undefined;
      let list = await ops.setAside(env?.id);
      const only = flags.get("--subscription");
      if (only !== undefined) {
        list = list.filter((s) => s.id === only);
        if (list.length === 0) throw new Refusal(`subscription ${only} is not set aside${env ? ` in ${env.name}` : ""}`, 1);
      }
      const changed = await ops.retryNow(
        list.map((s) => s.id),
        new Date(),
      );
      print({ retried: list.map((s) => ({ id: s.id, environment_id: s.environmentId, attempts: s.attempts, error: s.error })), count: changed }, [
        ...list.map((s) => `${s.id}\t${s.environmentId}\t${s.attempts} attempt(s)\t${s.error}`),
        `${changed} set-aside subscription(s) will be retried on the scheduler's next run`,
      ]);
      return;
    }
    if (command === "invoices finalize" || command === "invoices void" || command === "invoices mark-uncollectible") {
      const id = positionals[0] as string;
      const envFlag = flags.get("--env");
      const envId = envFlag ? (await environment(db, envFlag)).id : await ops.invoiceEnvironment(id);
      if (!envId) throw new Refusal(`invoice ${JSON.stringify(id)} not found`, 1);
      const env = await environment(db, envId);
      const { invoices } = buildServices(
        db,
        () => publicBaseUrl,
        () => new Date(),
      );
      const caller = systemCaller(env.id, env.mode);
      try {
        const inv = command === "invoices finalize" ? await invoices.finalize(caller, id) : await invoices.setInvoiceStatus(caller, id, command === "invoices void" ? "void" : "uncollectible");
        print({ id: inv.id, environment_id: env.id, status: inv.status, total: inv.total, currency: inv.currency }, [`${inv.id}\t${env.name}\t${inv.status}`]);
      } catch (err) {
        if (err instanceof BillingError) throw new Refusal(err.message, 1);
        throw err;
      }
    }
  });
}

/** The commands that change the database: they say which database first. */
const WRITES = new Set(["migrate up", "subscriptions retry-failed", "invoices finalize", "invoices void", "invoices mark-uncollectible"]);

/** Runs one command line; its exit code. `env`: the configuration's environment (DATABASE_URL, ENV_FILE, …). */
export async function run(argv: string[], io: Io = STDIO, env: Record<string, string | undefined> = process.env): Promise<number> {
  const taken = takeEnvFile(argv);
  const args = "error" in taken ? argv : taken.args;
  if (args[0] === "keys") {
    // The keys CLI reads --env-file itself, wherever it is.
    const at = argv.indexOf("keys");
    await runKeys([...argv.slice(0, at), ...argv.slice(at + 1)], io.out, env);
    return 0;
  }
  if (wantsHelp(args)) {
    io.out(USAGE);
    return 0;
  }
  const parsed = "error" in taken ? taken : parseArgs(args);
  if ("error" in parsed) {
    io.err(`${parsed.error}\n${USAGE}`);
    return 2;
  }
  const settings = cliSettings(argv, env);
  if ("error" in settings) {
    io.err(settings.error);
    return 2;
  }
  const { config } = settings;
  if (WRITES.has(parsed.command)) io.err(databaseLine(settings));
  try {
    await execute(parsed.command, parsed.positionals, parsed.flags, config.databaseUrl, config.publicBaseUrl ?? `http://localhost:${config.port}`, io.out);
    return 0;
  } catch (err) {
    if (!(err instanceof Refusal)) throw err;
    if (err.message) io.err(err.message);
    return err.code;
  }
}

// Run as a command (npm run billing); imported (tests of parseArgs), it does nothing.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) process.exitCode = await run(process.argv.slice(2));
