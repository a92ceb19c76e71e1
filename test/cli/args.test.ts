/**
 * The CLI's command line, in process and without a database (a unit test): what it refuses (an
 * unknown command or flag, an extra argument, a flag without its value or given twice) with a
 * message naming it, the usage and exit code 2, before anything opens; `--help` on every command
 * and group with exit 0; `--json` taken by every command; `npm run keys` the same as
 * `npm run billing -- keys`.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { groupsOf } from "../../src/cli/args.js";
import { parseArgs, run, usage } from "../../src/cli/billing.js";
import { COMMANDS } from "../../src/cli/run.js";

/** `billing <args>` in this process: its exit code and what it wrote. */
async function cli(args: string[], env: Record<string, string | undefined> = {}) {
  let stdout = "";
  let stderr = "";
  const code = await run(args, { out: (l) => (stdout += `${l}\n`), err: (l) => (stderr += `${l}\n`) }, env);
  return { code, stdout, stderr };
}

const refused: [string[], string][] = [
  [["keys"], "unknown command: billing keys"],
  [["keys", "rotate"], "unknown command: billing keys rotate"],
  [["keys", "env"], "unknown command: billing keys env"],
  [["keys", "env", "delete", "acme"], "unknown command: billing keys env delete"],
  [["keys", "create", "--env", "acme", "--secret"], "unknown flag --secret for billing keys create (it takes --json, --env, --publishable)"],
  [["keys", "create", "--envv", "acme"], "unknown flag --envv for billing keys create"],
  [["keys", "create", "acme"], 'unexpected argument "acme" for billing keys create'],
  [["keys", "create", "--env"], "--env needs a value"],
  [["keys", "create", "--env", "--publishable"], "--env needs a value"],
  [["keys", "create", "--env", "a", "--env", "b"], "--env is given twice"],
  [["keys", "create", "--env", "a", "--publishable=yes"], "--publishable takes no value"],
  [["keys", "env", "create"], "billing keys env create needs <name>"],
  [["keys", "env", "create", "acme", "extra"], 'unexpected argument "extra" for billing keys env create'],
  [["keys", "env", "create", "acme", "--mod", "live"], "unknown flag --mod for billing keys env create (it takes --json, --mode)"],
  [["keys", "env", "list", "--all"], "unknown flag --all for billing keys env list (it takes --json)"],
  [["keys", "list", "--env", "acme", "now"], 'unexpected argument "now" for billing keys list'],
  [["keys", "revoke"], "billing keys revoke needs <key_id>"],
  [["keys", "revoke", "key_1", "key_2"], 'unexpected argument "key_2" for billing keys revoke'],
  [["keys", "revoke", "key_1", "-f"], "unknown flag -f for billing keys revoke (it takes --json)"],
];

for (const [args, message] of refused) {
  test(`billing ${args.join(" ")}: refused`, (t) => {
    const parsed = parseArgs(args);
    t.true("error" in parsed && parsed.error.startsWith(message), JSON.stringify(parsed));
  });
}

test("what parseArgs reads from a good command line", (t) => {
  t.deepEqual(parseArgs(["keys", "env", "set-limits", "acme", "--api-rps=50", "--ingest-rps", "default"]), {
    command: "keys env set-limits",
    positionals: ["acme"],
    flags: new Map([
      ["--api-rps", "50"],
      ["--ingest-rps", "default"],
    ]),
  });
  t.deepEqual(parseArgs(["keys", "create", "--publishable", "--env", "acme", "--json"]), {
    command: "keys create",
    positionals: [],
    flags: new Map([
      ["--publishable", ""],
      ["--env", "acme"],
      ["--json", ""],
    ]),
  });
});

test("a refused command line: the message, the usage of its command or group, exit 2, nothing on stdout, no database opened", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "cli-args-"));
  try {
    const file = join(dir, "billing.db");
    const env = { DATABASE_URL: `sqlite:${file}` };
    for (const [args, message] of [refused[4], refused[6]] as [string[], string][]) {
      const r = await cli(args, env);
      t.is(r.code, 2, r.stderr);
      t.true(r.stderr.startsWith(message), r.stderr);
      t.regex(r.stderr, /\nusage: billing \[--env-file PATH\] keys create --env <name> \[--publishable\] \[--json\]\n/);
      t.is(r.stdout, "");
    }
    const group = await cli(["keys", "env", "frob"], env);
    t.is(group.code, 2);
    t.regex(group.stderr, /^unknown command: billing keys env frob\nusage: billing \[--env-file PATH\] keys env <command> \[--json\]\n {2}keys env create/);
    const bad = await cli(["keys", "env", "set-limits", "acme", "--api-rps", "fast"], env);
    t.is(bad.code, 2, "a bad value is a usage error, refused before the database opens");
    t.regex(bad.stderr, /--api-rps must be an integer from 0 \(unlimited\) to 1000000, or default\nusage: billing \[--env-file PATH\] keys env set-limits/);
    const grace = await cli(["keys", "env", "set-invoice-grace", "acme", "forever"], env);
    t.is(grace.code, 2);
    t.regex(grace.stderr, /<seconds> must be an integer/);
    t.false(existsSync(file), "the database was not opened");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("--help, -h and help: the usage of every command and group, exit 0, before any configuration is read", async (t) => {
  const env = { ENV_FILE: "/nonexistent/billing.env" };
  const full = await cli(["--help"], env);
  t.is(full.code, 0, full.stderr);
  t.regex(full.stdout, /^usage: billing \[--env-file PATH\] <command> \[--json\]\n {2}migrate status/);
  for (const words of Object.keys(COMMANDS)) t.true(full.stdout.includes(`\n  ${words}`), words);
  t.deepEqual(await cli(["help"], env), full);
  t.deepEqual(await cli(["-h"], env), full);
  for (const topic of [...Object.keys(COMMANDS), ...groupsOf(Object.keys(COMMANDS))]) {
    const words = topic.split(" ");
    for (const args of [
      [...words, "--help"],
      ["--help", ...words],
      [...words, "-h"],
      ["help", ...words],
    ]) {
      const r = await cli(args, env);
      t.is(r.code, 0, `${args.join(" ")}: ${r.stderr}`);
      t.is(r.stdout, `${usage(topic)}\n`, args.join(" "));
      t.true(r.stdout.startsWith(`usage: billing [--env-file PATH] ${topic} `), r.stdout);
      t.is(r.stderr, "");
    }
  }
  const sub = await cli(["keys", "create", "--env", "acme", "--help"], env);
  t.is(sub.stdout, "usage: billing [--env-file PATH] keys create --env <name> [--publishable] [--json]\n  a new secret (or publishable) key of the environment, printed once\n");
  const unknown = await cli(["frob", "--help"], env);
  t.is(unknown.code, 2);
  t.regex(unknown.stderr, /^unknown command: billing frob\nusage: billing/);
});

test("every command takes --json", (t) => {
  for (const [words, command] of Object.entries(COMMANDS)) {
    const args = [...words.split(" "), ...command.positionals.map((p) => `${p}-value`), "--json"];
    const parsed = parseArgs(args);
    t.false("error" in parsed, `${words}: ${JSON.stringify(parsed)}`);
    if (!("error" in parsed)) t.true(parsed.flags.has("--json"), words);
  }
});

test("npm run keys is npm run billing -- keys, and both run the compiled CLI", (t) => {
  const { scripts } = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { scripts: Record<string, string> };
  t.is(scripts.billing, "node dist/cli/billing.js");
  t.is(scripts.keys, `${scripts.billing} keys`);
  t.is(scripts.prebilling, "npm run build");
  t.is(scripts.prekeys, scripts.prebilling);
});
