/**
 * The operator CLI, `npm run billing -- …` (src/cli/billing.ts): one command table (the
 * operator's commands and `keys …`), one command-line reader, help for every command and group
 * (`--help`, `-h`, or `help` first), `--json` on every command, and one rule for exit codes:
 *
 *   0  done (and help asked for)
 *   1  refused for what the command found: an unknown invoice or environment, a database that
 *      cannot be reached or whose migrations are pending (only `migrate up` applies them)
 *   2  refused for its command line: an unknown command or flag, a missing argument, a bad value,
 *      an env file that cannot be read or disagrees with the environment
 *
 * The configuration is the server's (DATABASE_URL, with the server's env file when given:
 * `--env-file PATH` anywhere on the command line; settings.ts).
 */
import { type CommandSpec, type Parsed, commandWords, groupsOf, helpTopic, parseCommandLine } from "./args.js";
import { type Command, type Context, type Io, Refusal, STDIO } from "./context.js";
import { CREDIT_NOTE_COMMANDS } from "./credit-note-commands.js";
import { INVOICE_COMMANDS } from "./invoice-commands.js";
import { KEYS_COMMANDS } from "./keys-commands.js";
import { OPERATOR_COMMANDS } from "./operator-commands.js";
import { PAYMENT_COMMANDS } from "./payment-commands.js";
import { cliSettings, databaseLine, takeEnvFile } from "./settings.js";

export const PROGRAM = "billing";

/** Every command by its words, in the order the usage lists them. */
export const COMMANDS: Record<string, Command> = { ...OPERATOR_COMMANDS, ...INVOICE_COMMANDS, ...CREDIT_NOTE_COMMANDS, ...KEYS_COMMANDS, ...PAYMENT_COMMANDS };

const JSON_FLAG = { "--json": "switch" } as const;
const SPECS: Record<string, CommandSpec> = Object.fromEntries(Object.entries(COMMANDS).map(([words, c]) => [words, { positionals: c.positionals, flags: { ...JSON_FLAG, ...c.flags } }]));
const GROUPS = groupsOf(Object.keys(COMMANDS));

/** Reads a command line (without `--env-file PATH`) against the command table. */
export function parseArgs(args: readonly string[]): Parsed | { error: string } {
  return parseCommandLine(PROGRAM, SPECS, args);
}

/** One line of the usage: the command with its arguments, then what it does. */
function usageLine(words: string): string {
  const c = COMMANDS[words] as Command;
  const left = `  ${words}${c.synopsis ? ` ${c.synopsis}` : ""}`;
  return left.length <= 40 ? `${left.padEnd(42)}${c.summary}` : `${left}\n${" ".repeat(42)}${c.summary}`;
}

/** The usage of the whole CLI (topic ""), of a group ("keys", "keys env") or of one command. */
export function usage(topic = ""): string {
  const head = `usage: ${PROGRAM} [--env-file PATH]${topic ? ` ${topic}` : ""}`;
  if (COMMANDS[topic]) {
    const c = COMMANDS[topic];
    return `${head}${c.synopsis ? ` ${c.synopsis}` : ""} [--json]\n  ${c.summary}`;
  }
  const under = Object.keys(COMMANDS).filter((w) => topic === "" || w.startsWith(`${topic} `));
  return [`${head} <command> [--json]`, ...under.map(usageLine)].join("\n");
}

/** The usage to show with a refusal of `args`: that of the longest command or group its words name. */
function usageFor(args: readonly string[]): string {
  const words = commandWords(Object.keys(COMMANDS), args).split(" ");
  for (let n = words.length; n > 0; n--) {
    const topic = words.slice(0, n).join(" ");
    if (COMMANDS[topic] || GROUPS.has(topic)) return usage(topic);
  }
  return usage();
}

/** Help for `topic` (helpTopic): exit 0, or 2 when it names no command or group. */
function help(topic: string[], io: Io): number {
  const words = commandWords(Object.keys(COMMANDS), topic);
  if (words === "" || COMMANDS[words] || GROUPS.has(words)) {
    io.out(usage(words));
    return 0;
  }
  io.err(`unknown command: ${PROGRAM} ${words}\n${usage()}`);
  return 2;
}

/** Runs one command line; its exit code. `env`: the configuration's environment (DATABASE_URL, ENV_FILE, …). */
export async function run(argv: string[], io: Io = STDIO, env: Record<string, string | undefined> = process.env): Promise<number> {
  const taken = takeEnvFile(argv);
  const args = "error" in taken ? argv : taken.args;
  const topic = helpTopic(args);
  if (topic) return help(topic, io);
  const parsed = "error" in taken ? taken : parseArgs(args);
  if ("error" in parsed) {
    io.err(`${parsed.error}\n${usageFor(args)}`);
    return 2;
  }
  const settings = cliSettings(argv, env);
  if ("error" in settings) {
    io.err(settings.error);
    return 2;
  }
  const { config } = settings;
  const command = COMMANDS[parsed.command] as Command;
  if (command.writes) io.err(databaseLine(settings));
  const ctx: Context = {
    positionals: parsed.positionals,
    flags: parsed.flags,
    io,
    databaseUrl: config.databaseUrl,
    publicBaseUrl: config.publicBaseUrl ?? `http://localhost:${config.port}`,
    secrets: config.secrets,
    json: parsed.flags.has("--json"),
  };
  try {
    await command.run(ctx);
    return 0;
  } catch (err) {
    if (!(err instanceof Refusal)) throw err;
    if (err.message) io.err(err.code === 2 ? `${err.message}\n${usage(parsed.command)}` : err.message);
    return err.code;
  }
}
