/**
 * The keys CLI refuses what it does not know (an unknown command or flag, an extra argument, a
 * flag without its value or given twice) with a message naming it, the usage, and exit code 2,
 * before it touches the database. The parsing is checked in process; the command itself once per
 * kind of outcome.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import test from "ava";
import { parseArgs } from "../../src/cli/keys.js";

const run = promisify(execFile);

async function keys(args: string[], databaseUrl: string): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(process.execPath, ["--import", "tsx", "src/cli/keys.ts", ...args], { env: { ...process.env, DATABASE_URL: databaseUrl } });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { code: err.code ?? -1, stdout: err.stdout ?? "", stderr: err.stderr ?? "" };
  }
}

const refused: [string[], string][] = [
  [[], "no command given"],
  [["rotate"], "unknown command: keys rotate"],
  [["env"], "unknown command: keys env"],
  [["env", "delete", "acme"], "unknown command: keys env delete"],
  [["create", "--env", "acme", "--secret"], "unknown flag --secret for keys create (it takes --env, --publishable)"],
  [["create", "--envv", "acme"], "unknown flag --envv for keys create"],
  [["create", "acme"], 'unexpected argument "acme" for keys create'],
  [["create", "--env"], "--env needs a value"],
  [["create", "--env", "--publishable"], "--env needs a value"],
  [["create", "--env", "a", "--env", "b"], "--env is given twice"],
  [["create", "--env", "a", "--publishable=yes"], "--publishable takes no value"],
  [["env", "create"], "keys env create needs <name>"],
  [["env", "create", "acme", "extra"], 'unexpected argument "extra" for keys env create'],
  [["env", "create", "acme", "--mod", "live"], "unknown flag --mod for keys env create (it takes --mode)"],
  [["env", "list", "--all"], "unknown flag --all for keys env list (it takes no flags)"],
  [["list", "--env", "acme", "now"], 'unexpected argument "now" for keys list'],
  [["revoke"], "keys revoke needs <key_id>"],
  [["revoke", "key_1", "key_2"], 'unexpected argument "key_2" for keys revoke'],
  [["revoke", "key_1", "-f"], "unknown flag -f for keys revoke (it takes no flags)"],
];

for (const [args, message] of refused) {
  test(`keys ${args.join(" ") || "(nothing)"}: refused`, (t) => {
    const parsed = parseArgs(args);
    t.true("error" in parsed && parsed.error.startsWith(message), JSON.stringify(parsed));
  });
}

test("what parseArgs reads from a good command line", (t) => {
  t.deepEqual(parseArgs(["env", "set-limits", "acme", "--api-rps=50", "--ingest-rps", "default"]), {
    command: "env set-limits",
    positionals: ["acme"],
    flags: new Map([
      ["--api-rps", "50"],
      ["--ingest-rps", "default"],
    ]),
  });
  t.deepEqual(parseArgs(["create", "--publishable", "--env", "acme"]), {
    command: "create",
    positionals: [],
    flags: new Map([
      ["--publishable", ""],
      ["--env", "acme"],
    ]),
  });
});

test("the command refuses with the message, the usage and exit code 2, before it opens the database", async (t) => {
  for (const [args, message] of [refused[4], refused[6]] as [string[], string][]) {
    const dir = mkdtempSync(join(tmpdir(), "keys-args-"));
    try {
      const file = join(dir, "billing.db");
      const r = await keys(args, `sqlite:${file}`);
      t.is(r.code, 2, r.stderr);
      t.true(r.stderr.startsWith(message), r.stderr);
      t.regex(r.stderr, /usage: keys \[--env-file PATH\] <command>\n {2}keys env create/);
      t.is(r.stdout, "");
      t.false(existsSync(file), "the database was not opened");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
});

test("keys --help prints the usage and exits 0", async (t) => {
  const r = await keys(["--help"], "sqlite:/nonexistent/dir/billing.db");
  t.is(r.code, 0, r.stderr);
  t.regex(r.stdout, /^usage: keys \[--env-file PATH\] <command>\n {2}keys env create <name>/);
});

test("known flags in either form, --flag value and --flag=value, still work", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "keys-args-"));
  try {
    const url = `sqlite:${join(dir, "billing.db")}`;
    t.regex((await keys(["env", "create", "acme", "--mode=live"], url)).stdout, /^env_\w+\tacme\tlive\n$/);
    const made = await keys(["create", "--publishable", "--env", "acme"], url);
    t.is(made.code, 0, made.stderr);
    t.regex(made.stdout.split("\n")[1] ?? "", /^pk_live_/);
    t.regex((await keys(["list", "--env=acme"], url)).stdout, /\tpublishable\tacme\t/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
