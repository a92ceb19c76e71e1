/**
 * The configuration of the CLIs (keys.ts, billing.ts): read as the server reads it, from the
 * environment and the env file (`--env-file PATH` anywhere on the command line, else ENV_FILE), so
 * that a CLI given the server's file works on the server's database. Commands that write say on
 * stderr which database they write to (password redacted) and where that came from, and no
 * command creates a database that nothing named: with neither an env file nor DATABASE_URL, the
 * default SQLite file must already exist (the server made it).
 */
import { type Config, ConfigError, loadConfig } from "../config.js";
import { describeDatabase, missingSqliteFile, readSettings, type Settings, takeEnvFile } from "../env-file.js";

export { takeEnvFile };

export interface CliSettings {
  config: Readonly<Config>;
  settings: Settings;
  /** The command line without `--env-file PATH`. */
  args: string[];
}

/** The configuration for a CLI run, or the message (exit code 2) that refuses it. */
export function cliSettings(args: readonly string[], env: Record<string, string | undefined>): CliSettings | { error: string } {
  const taken = takeEnvFile(args);
  if ("error" in taken) return taken;
  let settings: Settings;
  let config: Readonly<Config>;
  try {
    settings = readSettings(env, taken.envFile);
    config = loadConfig(settings.env);
  } catch (err) {
    if (err instanceof ConfigError) return { error: err.message };
    throw err;
  }
  const missing = settings.databaseFrom === "default" ? missingSqliteFile(config.databaseUrl) : undefined;
  if (missing !== undefined) {
    return {
      error: `no database named: neither --env-file, ENV_FILE nor DATABASE_URL is set, and the default database ${missing} does not exist (the CLI creates no database). Pass the server's env file (--env-file PATH) or DATABASE_URL.`,
    };
  }
  return { config, settings, args: taken.args };
}

/** "database: mysql://billing:***@db:3306/billing (DATABASE_URL from /etc/billing.env)". */
export function databaseLine({ config, settings }: CliSettings): string {
  const from =
    settings.databaseFrom === "env-file"
      ? `DATABASE_URL from ${settings.envFile}`
      : settings.databaseFrom === "environment"
        ? "DATABASE_URL from the environment"
        : "the default: no --env-file, ENV_FILE or DATABASE_URL";
  return `database: ${describeDatabase(config.databaseUrl)} (${from})`;
}
