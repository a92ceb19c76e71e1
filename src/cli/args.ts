/**
 * The command-line reader the CLIs share (keys.ts, billing.ts): a command of one or two words
 * (`list`, `env create`), its positional arguments by name, and its flags, each taking a value
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

/**
 * Reads `args` against `commands` (keys are the command words, e.g. "env create"); `program` names
 * the CLI in messages. A first word that starts a two-word command is read with the next word.
 */
export function parseCommandLine(program: string, commands: Record<string, CommandSpec>, args: readonly string[]): Parsed | { error: string } {
  const groups = new Set(
    Object.keys(commands)
      .filter((c) => c.includes(" "))
      .map((c) => c.split(" ")[0]),
  );
  const first = args[0] ?? "";
  const command = groups.has(first) ? `${first} ${args[1] ?? ""}`.trim() : first;
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

/** True when the command line asks for help (`--help`, `-h` or `help` anywhere before a `--`). */
export function wantsHelp(args: readonly string[]): boolean {
  return args.some((a) => a === "--help" || a === "-h") || args[0] === "help";
}
