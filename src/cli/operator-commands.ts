/**
 * The operator's commands: migrations (the only commands that change the schema, and only when
 * asked: `migrate up`), the service's status, set-aside subscriptions retried now, and invoices
 * finalized, voided or marked uncollectible through the domain (as the API would).
 */
import { readFileSync } from "node:fs";
import { BillingError } from "../billing/errors.js";
import { systemCaller } from "../billing/tenancy.js";
import { type Database, dialectOf } from "../db/datasource.js";
import { SqlAuthStore } from "../db/stores/auth-store.js";
import { OperatorStore } from "../db/stores/operator-store.js";
import { buildServices } from "../wiring/services.js";
import { type Command, type Context, Refusal, print, withDatabase, withMigratedDatabase } from "./context.js";

const VERSION = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;

/** An environment by name or ID. */
async function environment(db: Database, nameOrId: string) {
  const store = new SqlAuthStore(db.sql, db.entities);
  const env = (await store.findEnvironmentByName(nameOrId)) ?? (await store.listEnvironments()).find((e) => e.id === nameOrId);
  if (!env) throw new Refusal(`no environment named or with ID ${nameOrId}`, 1);
  return env;
}

const migrateStatus: Command = {
  positionals: [],
  flags: {},
  synopsis: "",
  summary: "list applied and pending migrations",
  writes: false,
  run: (ctx) =>
    withDatabase(ctx.databaseUrl, async (db) => {
      const m = await new OperatorStore(db).migrations();
      print(ctx, m, [...m.applied.map((n) => `applied\t${n}`), ...m.pending.map((n) => `pending\t${n}`), `${m.applied.length} applied, ${m.pending.length} pending`]);
    }),
};

const migrateUp: Command = {
  positionals: [],
  flags: {},
  synopsis: "",
  summary: "apply the pending migrations",
  writes: true,
  run: (ctx) =>
    withDatabase(ctx.databaseUrl, async (db) => {
      const ran = await new OperatorStore(db).migrateUp();
      print(ctx, { applied: ran }, ran.length === 0 ? ["nothing to apply: the database is up to date"] : [...ran.map((n) => `applied\t${n}`), `${ran.length} applied`]);
    }),
};

interface StatusReport {
  migrations?: { applied: number; pending: number };
  billing?: { due_cycles: number; set_aside_subscriptions: number };
  webhooks?: { pending_deliveries: number; failing_endpoints: number };
  error?: string;
}

/** What `status` finds in the database: migrations, and the backlogs once the schema is current. */
async function statusOf(url: string): Promise<{ reachable: boolean; report: StatusReport }> {
  let reachable = false;
  const report: StatusReport = {};
  try {
    await withDatabase(url, async (db) => {
      reachable = await db.ping(5_000);
      const ops = new OperatorStore(db);
      const m = await ops.migrations();
      report.migrations = { applied: m.applied.length, pending: m.pending.length };
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
  return { reachable, report };
}

const status: Command = {
  positionals: [],
  flags: {},
  synopsis: "",
  summary: "version, database, migrations, due and set-aside billing cycles, webhook backlog",
  writes: false,
  run: async (ctx) => {
    const kind = dialectOf(ctx.databaseUrl);
    const { reachable, report } = await statusOf(ctx.databaseUrl);
    const { migrations: m, billing: b, webhooks: w } = report;
    print(ctx, { version: VERSION, database: { kind, reachable }, ...report }, [
      `version\t${VERSION}`,
      `database\t${kind}, ${reachable ? "reachable" : "NOT reachable"}`,
      ...(m ? [`migrations\t${m.applied} applied, ${m.pending} pending`] : []),
      ...(b ? [`due cycles\t${b.due_cycles}`, `set-aside subscriptions\t${b.set_aside_subscriptions}`] : []),
      ...(w ? [`webhook deliveries pending\t${w.pending_deliveries}`, `webhook endpoints failing\t${w.failing_endpoints}`] : []),
      ...(report.error ? [`error\t${report.error}`] : []),
    ]);
    if (!reachable) throw new Refusal("", 1);
  },
};

const retryFailed: Command = {
  positionals: [],
  flags: { "--env": "value", "--subscription": "value" },
  synopsis: "[--env <name|id>] [--subscription <id>]",
  summary: "retry set-aside subscriptions now (ends their backoff)",
  writes: true,
  run: (ctx) =>
    withMigratedDatabase(ctx.databaseUrl, async (db) => {
      const ops = new OperatorStore(db);
      const envFlag = ctx.flags.get("--env");
      const env = envFlag ? await environment(db, envFlag) : undefined;
      let list = await ops.setAside(env?.id);
      const only = ctx.flags.get("--subscription");
      if (only !== undefined) {
        list = list.filter((s) => s.id === only);
        if (list.length === 0) throw new Refusal(`subscription ${only} is not set aside${env ? ` in ${env.name}` : ""}`, 1);
      }
      const changed = await ops.retryNow(
        list.map((s) => s.id),
        new Date(),
      );
      print(ctx, { retried: list.map((s) => ({ id: s.id, environment_id: s.environmentId, attempts: s.attempts, error: s.error })), count: changed }, [
        ...list.map((s) => `${s.id}\t${s.environmentId}\t${s.attempts} attempt(s)\t${s.error}`),
        `${changed} set-aside subscription(s) will be retried on the scheduler's next run`,
      ]);
    }),
};

type InvoiceChange = "finalize" | "void" | "mark-uncollectible";

/** `invoices finalize|void|mark-uncollectible <invoice_id>`: through the domain's Invoices use case. */
function invoiceCommand(change: InvoiceChange, summary: string): Command {
  return {
    positionals: ["invoice_id"],
    flags: { "--env": "value" },
    synopsis: "<invoice_id> [--env <name|id>]",
    summary,
    writes: true,
    run: (ctx) => withMigratedDatabase(ctx.databaseUrl, (db) => changeInvoice(ctx, db, change)),
  };
}

async function changeInvoice(ctx: Context, db: Database, change: InvoiceChange): Promise<void> {
  const id = ctx.positionals[0] as string;
  const envFlag = ctx.flags.get("--env");
  const envId = envFlag ? (await environment(db, envFlag)).id : await new OperatorStore(db).invoiceEnvironment(id);
  if (!envId) throw new Refusal(`invoice ${JSON.stringify(id)} not found`, 1);
  const env = await environment(db, envId);
  const { invoices } = buildServices(
    db,
    () => ctx.publicBaseUrl,
    () => new Date(),
  );
  const caller = systemCaller(env.id, env.mode);
  try {
    const inv = change === "finalize" ? await invoices.finalize(caller, id) : await invoices.setInvoiceStatus(caller, id, change === "void" ? "void" : "uncollectible");
    print(ctx, { id: inv.id, environment_id: env.id, status: inv.status, total: inv.total, currency: inv.currency }, [`${inv.id}\t${env.name}\t${inv.status}`]);
  } catch (err) {
    if (err instanceof BillingError) throw new Refusal(err.message, 1);
    throw err;
  }
}

/** The operator's commands by their words. */
export const OPERATOR_COMMANDS: Record<string, Command> = {
  "migrate status": migrateStatus,
  "migrate up": migrateUp,
  status,
  "subscriptions retry-failed": retryFailed,
  "invoices finalize": invoiceCommand("finalize", "a draft invoice is finalized now (open, then charged)"),
  "invoices void": invoiceCommand("void", "an open invoice becomes void"),
  "invoices mark-uncollectible": invoiceCommand("mark-uncollectible", "an open invoice becomes uncollectible"),
};
