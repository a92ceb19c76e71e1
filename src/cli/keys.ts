/**
 * Manages environments and API keys against the configured database (DATABASE_URL).
 *
 *   npm run keys -- env create <name> [--mode test|live]
 *   npm run keys -- env list
 *   npm run keys -- env set-limits <name> [--ingest-rps N|default] [--api-rps N|default]
 *   npm run keys -- create --env <name> [--publishable]     prints the new key once
 *   npm run keys -- list [--env <name>]
 *   npm run keys -- revoke <key_id>
 */
import { ensureEnvironment } from "../billing/bootstrap.js";
import { generateKey, storeKey } from "../billing/keys.js";
import type { EnvironmentMode } from "../billing/tenancy.js";
import { ConfigError, loadConfig } from "../config.js";
import { createDatabase } from "../db/datasource.js";
import { SqlAuthStore } from "../db/stores/auth-store.js";

const USAGE = `usage:
  keys env create <name> [--mode test|live]
  keys env list
  keys env set-limits <name> [--ingest-rps N|default] [--api-rps N|default]
  keys create --env <name> [--publishable]
  keys list [--env <name>]
  keys revoke <key_id>`;

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(2);
}

export async function run(args: string[], out: (line: string) => void = (l) => process.stdout.write(`${l}\n`)): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) fail(err.message);
    throw err;
  }
  const db = await createDatabase(config.databaseUrl, { poolSize: 2 });
  await db.dataSource.initialize();
  try {
    await db.dataSource.runMigrations({ transaction: "each" });
    const store = new SqlAuthStore(db.sql, db.entities);
    const [cmd, sub] = args;
    const now = new Date();
    if (cmd === "env" && sub === "create") {
      const name = args[2];
      if (!name || name.startsWith("--")) fail(USAGE);
      const mode = (flag(args, "--mode") ?? "test") as EnvironmentMode;
      if (mode !== "test" && mode !== "live") fail("--mode must be test or live");
      if (await store.findEnvironmentByName(name)) fail(`environment ${name} already exists`);
      const env = await ensureEnvironment(store, name, mode, now);
      out(`${env.id}\t${env.name}\t${env.mode}`);
    } else if (cmd === "env" && sub === "list") {
      for (const e of await store.listEnvironments()) out(`${e.id}\t${e.name}\t${e.mode}\t${e.createdAt.toISOString()}`);
    } else if (cmd === "env" && sub === "set-limits") {
      // Requests a second per key of the environment; 0 is unlimited, "default" the server's default.
      const name = args[2];
      if (!name || name.startsWith("--")) fail(USAGE);
      const rps = (flagName: string): number | null | undefined => {
        if (!args.includes(flagName)) return undefined;
        const raw = flag(args, flagName);
        if (raw === "default") return null;
        if (raw === undefined || !/^\d+$/.test(raw) || Number(raw) > 1_000_000) fail(`${flagName} must be an integer from 0 (unlimited) to 1000000, or default`);
        return Number(raw);
      };
      const ingestRps = rps("--ingest-rps");
      const apiRps = rps("--api-rps");
      if (ingestRps === undefined && apiRps === undefined) fail(USAGE);
      const env = await store.findEnvironmentByName(name);
      if (!env) fail(`no environment named ${name}`);
      await store.setEnvironmentRateLimits(env.id, { ingestRps, apiRps });
      const after = (await store.findEnvironmentByName(name)) ?? env;
      const show = (v: number | null | undefined) => (v === null || v === undefined ? "default" : v === 0 ? "unlimited" : `${v}/s`);
      out(`${after.id}\t${after.name}\tingest ${show(after.ingestRps)}\tapi ${show(after.apiRps)}`);
    } else if (cmd === "create") {
      const envName = flag(args, "--env");
      if (!envName) fail(USAGE);
      const env = await store.findEnvironmentByName(envName);
      if (!env) fail(`no environment named ${envName}; create it with: keys env create ${envName}`);
      const kind = args.includes("--publishable") ? "publishable" : "secret";
      const key = generateKey(kind, env.mode);
      const id = await storeKey(store, env.id, kind, key, now);
      out(`${id}\t${kind}\t${env.name}`);
      out(key);
      process.stderr.write("This key is shown once; only its hash is stored.\n");
    } else if (cmd === "list") {
      const envName = flag(args, "--env");
      const env = envName ? await store.findEnvironmentByName(envName) : undefined;
      if (envName && !env) fail(`no environment named ${envName}`);
      const names = new Map((await store.listEnvironments()).map((e) => [e.id, e.name]));
      for (const k of await store.listKeys(env?.id)) {
        out(`${k.id}\t${k.kind}\t${names.get(k.environmentId) ?? k.environmentId}\t${k.prefix}…\t${k.revokedAt ? `revoked ${k.revokedAt.toISOString()}` : "active"}`);
      }
    } else if (cmd === "revoke") {
      const id = args[1];
      if (!id) fail(USAGE);
      if (!(await store.revokeKey(id, now))) fail(`no active key with id ${id}`);
      out(`revoked ${id}`);
    } else {
      fail(USAGE);
    }
  } finally {
    await db.dataSource.destroy();
  }
}

await run(process.argv.slice(2));
