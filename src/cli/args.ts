/**
 * The CLI's command-line reader: a command of one or more words (`status`, `migrate up`,
 * `keys env create`), its positional arguments by name, and its flags, each taking a value
 * (`--env acme` or `--env=acme`) or a switch (`--json`). Anything it does not know is an error
 * message naming it, which the CLI prints with its usage and exit code 2.
 */

export interface CommandSpec {
  positionals: string[];
  flags: Record<string, "value" | "switch">;
}

export interface Parsed {
  command: string;
  positionals: string[];
  /** Flags given; a switch's value is "". */
  flags: Map<string, string>;
}

/** Every proper prefix of a command's words ("keys", "keys env" for "keys env create"): the groups. */
export function groupsOf(commands: Iterable<string>): Set<string> {
  const groups = new Set<string>();
  for (const command of commands) {
    const words = command.split(" ");
    for (let n = 1; n < words.length; n++) groups.add(words.slice(0, n).join(" "));
  }
  return groups;
}

/**
 * The command words at the start of `args`: words are taken while they make a group or a
 * command, up to the first flag; the first word that makes neither is taken too (so an unknown
 * command is named whole: "invoices finalise"). The result is a command, a group, "" or unknown.
 */
export function commandWords(commandNames: Iterable<string>, args: readonly string[]): string {
  const names = new Set(commandNames);
  const groups = groupsOf(names);
  const words: string[] = [];
  for (const word of args) {
    if (word.startsWith("-")) break;
    words.push(word);
    const sofar = words.join(" ");
    if (!groups.has(sofar)) break;
  }
  return words.join(" ");
}

/**
 * Reads `args` against `commands` (keys are the command words, e.g. "keys env create");
 * `program` names the CLI in messages.
 */
export function parseCommandLine(program: string, commands: Record<string, CommandSpec>, args: readonly string[]): Parsed | { error: string } {
  const command = commandWords(Object.keys(commands), args);
  const spec = commands[command];
  if (!spec) return { error: command === "" ? "no command given" : `unknown command: ${program} ${command}` };
  const rest = args.slice(command.split(" ").length);
  const positionals: string[] = [];
  const flags = new Map<string, string>();
  for (let i = 0; i < rest.length; i++) {
    const word = rest[i] as string;
    if (word.startsWith("-")) {
      const eq = word.indexOf("=");
      const name = eq > 0 ? word.slice(0, eq) : word;
      const kind = spec.flags[name];
      const known = Object.keys(spec.flags);
      if (!kind) return { error: `unknown flag ${name} for ${program} ${command}${known.length ? ` (it takes ${known.join(", ")})` : " (it takes no flags)"}` };
      if (flags.has(name)) return { error: `${name} is given twice` };
      if (kind === "switch") {
        if (eq > 0) return { error: `${name} takes no value` };
        flags.set(name, "");
      } else {
        const value = eq > 0 ? word.slice(eq + 1) : rest[++i];
        if (value === undefined || value === "" || (eq < 0 && value.startsWith("--"))) return { error: `${name} needs a value` };
        flags.set(name, value);
      }
    } else if (positionals.length < spec.positionals.length) {
      positionals.push(word);
    } else {
      return { error: `unexpected argument ${JSON.stringify(word)} for ${program} ${command}` };
    }
  }
  if (positionals.length < spec.positionals.length) return { error: `${program} ${command} needs <${spec.positionals[positionals.length]}>` };
  return { command, positionals, flags };
}

/**
 * The command line a request for help is about (what follows a first word `help`, or everything
 * but `--help` and `-h` when either is anywhere), whose command words (commandWords) name the
 * topic; undefined when it asks for no help.
 */
export function helpTopic(args: readonly string[]): string[] | undefined {
  if (args[0] === "help") return args.slice(1);
  if (!args.some((a) => a === "--help" || a === "-h")) return undefined;
  return args.filter((a) => a !== "--help" && a !== "-h");
}
