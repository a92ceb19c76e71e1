/**
 * Manages environments and API keys against the configured database: DATABASE_URL, read as the
 * server reads it, with the server's env file when given (`--env-file PATH`, anywhere; settings.ts).
 * Commands that write say on stderr which database they write to.
 *
 *   npm run keys -- env create <name> [--mode test|live]
 *   npm run keys -- env list
 *   npm run keys -- env set-limits <name> [--ingest-rps N|default] [--api-rps N|default]
 *   npm run keys -- env set-invoice-grace <name> <seconds>  how long cycle invoices stay drafts (0: final at once)
 *   npm run keys -- create --env <name> [--publishable]     prints the new key once
 *   npm run keys -- list [--env <name>]
 *   npm run keys -- revoke <key_id>
 */
import { pathToFileURL } from "node:url";
import { type CommandSpec, type Parsed, parseCommandLine } from "./args.js";
import { ensureEnvironment } from "../billing/bootstrap.js";
import { generateKey, storeKey } from "../billing/keys.js";
import type { EnvironmentMode } from "../billing/tenancy.js";
import { createDatabase } from "../db/datasource.js";
import { SqlAuthStore } from "../db/stores/auth-store.js";
import { cliSettings, databaseLine, takeEnvFile } from "./settings.js";

const USAGE = `usage: keys [--env-file PATH] <command>
  keys env create <name> [--mode test|live]
  keys env list
  keys env set-limits <name> [--ingest-rps N|default] [--api-rps N|default]
  keys env set-invoice-grace <name> <seconds>
  keys create --env <name> [--publishable]
  keys list [--env <name>]
  keys revoke <key_id>`;

/** What each command takes: its positional arguments by name, and its flags (with a value, or a switch). */
const COMMANDS: Record<string, CommandSpec> = {
  "env create": { positionals: ["name"], flags: { "--mode": "value" } },
  "env list": { positionals: [], flags: {} },
  "env set-limits": { positionals: ["name"], flags: { "--ingest-rps": "value", "--api-rps": "value" } },
  "env set-invoice-grace": { positionals: ["name", "seconds"], flags: {} },
  create: { positionals: [], flags: { "--env": "value", "--publishable": "switch" } },
  list: { positionals: [], flags: { "--env": "value" } },
  revoke: { positionals: ["key_id"], flags: {} },
};

/**
 * Reads the command line against COMMANDS (the parser every CLI shares, args.ts); a word it does
 * not know (an unknown command or flag, an extra argument, a flag twice or without its value) is a
 * message saying so, with the usage.
 */
export function parseArgs(args: readonly string[]): Parsed | { error: string } {
  return parseCommandLine("keys", COMMANDS, args);
}

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(2);
}

/** The commands that change the database: they say which database first. */
const WRITES = new Set(["env create", "env set-limits", "env set-invoice-grace", "create", "revoke"]);

export async function run(argv: string[], out: (line: string) => void = (l) => process.stdout.write(`${l}\n`), environment: Record<string, string | undefined> = process.env): Promise<void> {
  const withoutEnvFile = takeEnvFile(argv);
  const args = "error" in withoutEnvFile ? argv : withoutEnvFile.args;
  if (args.length === 1 && (args[0] === "--help" || args[0] === "-h" || args[0] === "help")) {
    out(USAGE);
    return;
  }
  if ("error" in withoutEnvFile) fail(`${withoutEnvFile.error}\n${USAGE}`);
  const parsed = parseArgs(args);
  if ("error" in parsed) fail(`${parsed.error}\n${USAGE}`);
  const { command, positionals, flags } = parsed;
  const settings = cliSettings(argv, environment);
  if ("error" in settings) fail(settings.error);
  const { config } = settings;
  if (WRITES.has(command)) process.stderr.write(`${databaseLine(settings)}\n`);
  const db = await createDatabase(config.databaseUrl, { poolSize: 2 });
  await db.dataSource.initialize();
  try {
    await db.dataSource.runMigrations({ transaction: "each" });
    const store = new SqlAuthStore(db.sql, db.entities);
    const now = new Date();
    if (command === "env create") {
      const name = positionals[0] as string;
      const mode = (flags.get("--mode") ?? "test") as EnvironmentMode;
      if (mode !== "test" && mode !== "live") fail("--mode must be test or live");
      if (await store.findEnvironmentByName(name)) fail(`environment ${name} already exists`);
      const env = await ensureEnvironment(store, name, mode, now);
      out(`${env.id}\t${env.name}\t${env.mode}`);
    } else if (command === "env list") {
      for (const e of await store.listEnvironments()) out(`${e.id}\t${e.name}\t${e.mode}\t${e.createdAt.toISOString()}`);
    } else if (command === "env set-limits") {
      // Requests a second per key of the environment; 0 is unlimited, "default" the server's default.
      const name = positionals[0] as string;
      const rps = (flagName: string): number | null | undefined => {
        if (!flags.has(flagName)) return undefined;
        const raw = flags.get(flagName);
        if (raw === "default") return null;
        if (raw === undefined || !/^\d+$/.test(raw) || Number(raw) > 1_000_000) fail(`${flagName} must be an integer from 0 (unlimited) to 1000000, or default`);
        return Number(raw);
      };
      const ingestRps = rps("--ingest-rps");
      const apiRps = rps("--api-rps");
      if (ingestRps === undefined && apiRps === undefined) fail(`keys env set-limits needs --ingest-rps or --api-rps\n${USAGE}`);
      const env = await store.findEnvironmentByName(name);
      if (!env) fail(`no environment named ${name}`);
      await store.setEnvironmentRateLimits(env.id, { ingestRps, apiRps });
      const after = (await store.findEnvironmentByName(name)) ?? env;
      const show = (v: number | null | undefined) => (v === null || v === undefined ? "default" : v === 0 ? "unlimited" : `${v}/s`);
      out(`${after.id}\t${after.name}\tingest ${show(after.ingestRps)}\tapi ${show(after.apiRps)}`);
    } else if (command === "env set-invoice-grace") {
      // How long an invoice that bills usage stays a draft (late usage of its period lands on it).
      const [name, raw] = positionals as [string, string];
      if (!/^\d+$/.test(raw) || Number(raw) > 31 * 86_400) fail("<seconds> must be an integer from 0 (finalize at once) to 2678400 (31 days)");
      const env = await store.findEnvironmentByName(name);
      if (!env) fail(`no environment named ${name}`);
      await store.setInvoiceGraceSeconds(env.id, Number(raw));
      out(`${env.id}\t${env.name}\tinvoice grace ${Number(raw)} s`);
    } else if (command === "create") {
      const envName = flags.get("--env");
      if (!envName) fail(`keys create needs --env <name>\n${USAGE}`);
      const env = await store.findEnvironmentByName(envName);
      if (!env) fail(`no environment named ${envName}; create it with: keys env create ${envName}`);
      const kind = flags.has("--publishable") ? "publishable" : "secret";
      const key = generateKey(kind, env.mode);
      const id = await storeKey(store, env.id, kind, key, now);
      out(`${id}\t${kind}\t${env.name}`);
      out(key);
      process.stderr.write("This key is shown once; only its hash is stored.\n");
    } else if (command === "list") {
      const envName = flags.get("--env");
      const env = envName ? await store.findEnvironmentByName(envName) : undefined;
      if (envName && !env) fail(`no environment named ${envName}`);
      const names = new Map((await store.listEnvironments()).map((e) => [e.id, e.name]));
      for (const k of await store.listKeys(env?.id)) {
        out(`${k.id}\t${k.kind}\t${names.get(k.environmentId) ?? k.environmentId}\t${k.prefix}…\t${k.revokedAt ? `revoked ${k.revokedAt.toISOString()}` : "active"}`);
      }
    } else if (command === "revoke") {
      const id = positionals[0] as string;
      if (!(await store.revokeKey(id, now))) fail(`no active key with id ${id}`);
      out(`revoked ${id}`);
    }
  } finally {
    await db.dataSource.destroy();
  }
}

// Run as a command (npm run keys); imported (tests of parseArgs), it does nothing.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await run(process.argv.slice(2));
