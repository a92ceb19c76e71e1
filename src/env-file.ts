/**
 * The env file (`--env-file PATH` of the server and the CLIs, else `ENV_FILE`) read over the
 * process environment, and how a database URL is shown: shared by the server (src/main.ts) and the
 * CLIs (src/cli), so that given the same file they work on the same database.
 */
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { parseEnv } from "node:util";
import { ConfigError } from "./config.js";

/**
 * The settings, with the env file (`--env-file PATH` of the server and the CLIs, else `ENV_FILE`)
 * read over the process environment, and where the database came from: a CLI and a server given
 * the same file work on the same database. The file is dotenv lines (`NAME=value`, `#` comments,
 * quoted values; Node's util.parseEnv). A variable set both in the environment and in the file, to
 * different values, is a ConfigError rather than one silently winning; an unreadable file too.
 */
export interface Settings {
  env: Record<string, string | undefined>;
  /** The env file read, or undefined. */
  envFile: string | undefined;
  /** Where DATABASE_URL came from: the env file, the process environment, or nowhere (the default). */
  databaseFrom: "env-file" | "environment" | "default";
}

export function readSettings(env: Record<string, string | undefined> = process.env, envFileFlag?: string): Settings {
  const envFile = envFileFlag ?? (env.ENV_FILE || undefined);
  const own = env.DATABASE_URL ? "environment" : "default";
  if (envFile === undefined) return { env, envFile, databaseFrom: own };
  let text: string;
  try {
    text = readFileSync(envFile, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new ConfigError([`the env file ${envFile} cannot be read (${code})`]);
  }
  const fromFile = parseEnv(text);
  const problems: string[] = [];
  const merged: Record<string, string | undefined> = { ...env };
  for (const [name, value] of Object.entries(fromFile)) {
    if (value === undefined) continue;
    const set = env[name];
    if (set !== undefined && set !== "" && set !== value) problems.push(`${name} is set both in the environment and in the env file ${envFile}, to different values: unset one`);
    merged[name] = value;
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return { env: merged, envFile, databaseFrom: fromFile.DATABASE_URL ? "env-file" : own };
}

/** Takes `--env-file PATH` (or `--env-file=PATH`) out of a command line (the server's or a CLI's), wherever it is. */
export function takeEnvFile(args: readonly string[]): { envFile: string | undefined; args: string[] } | { error: string } {
  const rest: string[] = [];
  let envFile: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const word = args[i] as string;
    if (word !== "--env-file" && !word.startsWith("--env-file=")) {
      rest.push(word);
      continue;
    }
    if (envFile !== undefined) return { error: "--env-file is given twice" };
    const value = word === "--env-file" ? args[++i] : word.slice("--env-file=".length);
    if (value === undefined || value === "" || value.startsWith("--")) return { error: "--env-file needs a path" };
    envFile = value;
  }
  return { envFile, args: rest };
}

/** A database URL fit to print: the password replaced by ***, a SQLite path made absolute. */
export function describeDatabase(url: string): string {
  const file = sqliteFile(url);
  if (file !== undefined) return `sqlite:${file}`;
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return url.replace(/\/\/([^:@/]*):[^@/]*@/, "//$1:***@");
  }
}

/** The SQLite file of a `sqlite:` URL, when it does not exist yet (the database would be new). */
export function missingSqliteFile(url: string): string | undefined {
  const file = sqliteFile(url);
  return file === undefined || file === ":memory:" || existsSync(file) ? undefined : file;
}

/** `sqlite:./data/billing.db` → its absolute path (as src/db/datasource.ts opens it); `:memory:` as it is. */
function sqliteFile(url: string): string | undefined {
  if (!url.startsWith("sqlite:")) return undefined;
  const path = url.slice("sqlite:".length).replace(/^\/\//, "");
  return path === ":memory:" ? path : resolve(path);
}
