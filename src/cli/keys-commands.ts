/**
 * `billing keys …`: environments and API keys, against the configured database (whose migrations
 * must all be applied: these commands refuse otherwise and say how to apply them). A key is
 * printed once, when it is made; only its hash is stored.
 */
import { ensureEnvironment } from "../billing/bootstrap.js";
import { generateKey, storeKey } from "../billing/keys.js";
import type { Environment, EnvironmentMode } from "../billing/tenancy.js";
import { numberPrefixProblem } from "../billing/taxes/settings.js";
import { SqlAuthStore } from "../db/stores/auth-store.js";
import { SqlInvoiceSettingsStore } from "../db/stores/tax-store.js";
import { type Command, type Context, Refusal, print, wholeNumber, withMigratedDatabase } from "./context.js";

/** The auth store of the configured database, for `fn`. */
function withStore<T>(ctx: Context, fn: (store: SqlAuthStore) => Promise<T>): Promise<T> {
  return withMigratedDatabase(ctx.databaseUrl, (db) => fn(new SqlAuthStore(db.sql, db.entities)));
}

async function named(store: SqlAuthStore, name: string, hint = ""): Promise<Environment> {
  const env = await store.findEnvironmentByName(name);
  if (!env) throw new Refusal(`no environment named ${name}${hint}`, 1);
  return env;
}

const envCreate: Command = {
  positionals: ["name"],
  flags: { "--mode": "value" },
  synopsis: "<name> [--mode test|live]",
  summary: "a new environment (test unless --mode live)",
  writes: true,
  run: (ctx) =>
    withStore(ctx, async (store) => {
      const name = ctx.positionals[0] as string;
      const mode = (ctx.flags.get("--mode") ?? "test") as EnvironmentMode;
      if (mode !== "test" && mode !== "live") throw new Refusal("--mode must be test or live", 2);
      if (await store.findEnvironmentByName(name)) throw new Refusal(`environment ${name} already exists`, 1);
      const env = await ensureEnvironment(store, name, mode, new Date());
      print(ctx, { id: env.id, name: env.name, mode: env.mode }, [`${env.id}\t${env.name}\t${env.mode}`]);
    }),
};

const envList: Command = {
  positionals: [],
  flags: {},
  synopsis: "",
  summary: "every environment: id, name, mode, created",
  writes: false,
  run: (ctx) =>
    withStore(ctx, async (store) => {
      const envs = await store.listEnvironments();
      print(
        ctx,
        { environments: envs.map((e) => ({ id: e.id, name: e.name, mode: e.mode, created_at: e.createdAt.toISOString(), ingest_rps: e.ingestRps ?? null, api_rps: e.apiRps ?? null })) },
        envs.map((e) => `${e.id}\t${e.name}\t${e.mode}\t${e.createdAt.toISOString()}`),
      );
    }),
};

/** A rate flag's value: undefined when not given, null for "default", else 0 (unlimited) to 1000000. */
function rps(ctx: Context, flag: string): number | null | undefined {
  if (!ctx.flags.has(flag)) return undefined;
  const raw = ctx.flags.get(flag);
  if (raw === "default") return null;
  return wholeNumber(raw, 1_000_000, `${flag} must be an integer from 0 (unlimited) to 1000000, or default`);
}

const showRps = (v: number | null | undefined) => (v === null || v === undefined ? "default" : v === 0 ? "unlimited" : `${v}/s`);

const envSetLimits: Command = {
  positionals: ["name"],
  flags: { "--ingest-rps": "value", "--api-rps": "value" },
  synopsis: "<name> [--ingest-rps N|default] [--api-rps N|default]",
  summary: "requests a second per key of the environment (0: unlimited; default: the server's)",
  writes: true,
  run: async (ctx) => {
    const ingestRps = rps(ctx, "--ingest-rps");
    const apiRps = rps(ctx, "--api-rps");
    if (ingestRps === undefined && apiRps === undefined) throw new Refusal("billing keys env set-limits needs --ingest-rps or --api-rps", 2);
    await withStore(ctx, async (store) => {
      const name = ctx.positionals[0] as string;
      const env = await named(store, name);
      await store.setEnvironmentRateLimits(env.id, { ingestRps, apiRps });
      const after = (await store.findEnvironmentByName(name)) ?? env;
      print(ctx, { id: after.id, name: after.name, ingest_rps: after.ingestRps ?? null, api_rps: after.apiRps ?? null }, [
        `${after.id}\t${after.name}\tingest ${showRps(after.ingestRps)}\tapi ${showRps(after.apiRps)}`,
      ]);
    });
  },
};

const envSetInvoiceGrace: Command = {
  positionals: ["name", "seconds"],
  flags: {},
  synopsis: "<name> <seconds>",
  summary: "how long invoices that bill usage stay drafts (0: final at once)",
  writes: true,
  run: async (ctx) => {
    const [name, raw] = ctx.positionals as [string, string];
    const seconds = wholeNumber(raw, 31 * 86_400, "<seconds> must be an integer from 0 (finalize at once) to 2678400 (31 days)");
    await withStore(ctx, async (store) => {
      const env = await named(store, name);
      await store.setInvoiceGraceSeconds(env.id, seconds);
      print(ctx, { id: env.id, name: env.name, invoice_grace_seconds: seconds }, [`${env.id}\t${env.name}\tinvoice grace ${seconds} s`]);
    });
  },
};

const envSetInvoicePrefix: Command = {
  positionals: ["name", "prefix"],
  flags: {},
  synopsis: "<name> <prefix>",
  summary: "the prefix of invoice numbers from the next one on (PREFIX-000001; default INV)",
  writes: true,
  run: async (ctx) => {
    const [name, prefix] = ctx.positionals as [string, string];
    const problem = numberPrefixProblem(prefix);
    if (problem) throw new Refusal(`<prefix> ${problem}`, 2);
    await withMigratedDatabase(ctx.databaseUrl, async (db) => {
      const env = await named(new SqlAuthStore(db.sql, db.entities), name);
      const settings = await new SqlInvoiceSettingsStore(db.sql).update(env.id, { numberPrefix: prefix });
      print(ctx, { id: env.id, name: env.name, invoice_prefix: settings.numberPrefix }, [`${env.id}\t${env.name}\tinvoice prefix ${settings.numberPrefix}`]);
    });
  },
};

const create: Command = {
  positionals: [],
  flags: { "--env": "value", "--publishable": "switch" },
  synopsis: "--env <name> [--publishable]",
  summary: "a new secret (or publishable) key of the environment, printed once",
  writes: true,
  run: async (ctx) => {
    const envName = ctx.flags.get("--env");
    if (!envName) throw new Refusal("billing keys create needs --env <name>", 2);
    await withStore(ctx, async (store) => {
      const env = await named(store, envName, `; create it with: billing keys env create ${envName}`);
      const kind = ctx.flags.has("--publishable") ? "publishable" : "secret";
      const key = generateKey(kind, env.mode);
      const id = await storeKey(store, env.id, kind, key, new Date());
      print(ctx, { id, kind, environment: env.name, key }, [`${id}\t${kind}\t${env.name}`, key]);
      ctx.io.err("This key is shown once; only its hash is stored.");
    });
  },
};

const list: Command = {
  positionals: [],
  flags: { "--env": "value" },
  synopsis: "[--env <name>]",
  summary: "keys (of one environment): id, kind, environment, prefix, active or revoked",
  writes: false,
  run: (ctx) =>
    withStore(ctx, async (store) => {
      const envName = ctx.flags.get("--env");
      const env = envName === undefined ? undefined : await named(store, envName);
      const names = new Map((await store.listEnvironments()).map((e) => [e.id, e.name]));
      const keys = await store.listKeys(env?.id);
      const envOf = (id: string) => names.get(id) ?? id;
      print(
        ctx,
        { keys: keys.map((k) => ({ id: k.id, kind: k.kind, environment: envOf(k.environmentId), prefix: k.prefix, revoked_at: k.revokedAt?.toISOString() ?? null })) },
        keys.map((k) => `${k.id}\t${k.kind}\t${envOf(k.environmentId)}\t${k.prefix}…\t${k.revokedAt ? `revoked ${k.revokedAt.toISOString()}` : "active"}`),
      );
    }),
};

const revoke: Command = {
  positionals: ["key_id"],
  flags: {},
  synopsis: "<key_id>",
  summary: "the key is refused from now on (servers may trust it for API_KEY_CACHE_MS more)",
  writes: true,
  run: (ctx) =>
    withStore(ctx, async (store) => {
      const id = ctx.positionals[0] as string;
      const at = new Date();
      if (!(await store.revokeKey(id, at))) throw new Refusal(`no active key with id ${id}`, 1);
      print(ctx, { id, revoked_at: at.toISOString() }, [`revoked ${id}`]);
    }),
};

/** The keys commands by their words. */
export const KEYS_COMMANDS: Record<string, Command> = {
  "keys env create": envCreate,
  "keys env list": envList,
  "keys env set-limits": envSetLimits,
  "keys env set-invoice-grace": envSetInvoiceGrace,
  "keys env set-invoice-prefix": envSetInvoicePrefix,
  "keys create": create,
  "keys list": list,
  "keys revoke": revoke,
};
