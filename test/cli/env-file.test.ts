/**
 * The CLIs and the server read the same env file (`--env-file PATH`): a key the keys CLI makes
 * with the server's file works on a server started with that file; the CLIs say which database
 * they write to; a file that disagrees with the environment, or no database named at all where
 * none exists, is refused before anything is written.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import test from "ava";
import { describeDatabase } from "../../src/env-file.js";
import { rest } from "../helpers/clients.js";
import { STORES, createTestDatabase } from "../helpers/db.js";

const exec = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "..", "..");
/** tsx by its path: a CLI run from another directory must still find it. */
const TSX = import.meta.resolve("tsx");

/** The environment of this test run without any setting that names a database. */
function bareEnv(): Record<string, string | undefined> {
  const env = { ...process.env };
  delete env.DATABASE_URL;
  delete env.ENV_FILE;
  return env;
}

async function cli(program: "keys" | "billing", args: string[], env = bareEnv(), cwd = ROOT) {
  try {
    const r = await exec(process.execPath, ["--import", TSX, join(ROOT, `src/cli/${program}.ts`), ...args], { env, cwd });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

async function startServer(envFile: string): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts", "--env-file", envFile], { cwd: ROOT, env: bareEnv(), stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  const port = await new Promise<number>((ok, fail) => {
    child.stderr?.on("data", (c: Buffer) => {
      log += c.toString();
      const m = /"msg":"listening","port":(\d+)/.exec(log);
      if (m) ok(Number(m[1]));
    });
    child.on("exit", () => fail(new Error(`server exited early: ${log}`)));
  });
  return { url: `http://127.0.0.1:${port}`, child };
}

for (const store of STORES) {
  test(`${store}: a key made with --env-file works on a server started with the same file`, async (t) => {
    const tdb = await createTestDatabase(store);
    const dir = mkdtempSync(join(tmpdir(), "env-file-"));
    const envFile = join(dir, "billing.env");
    writeFileSync(envFile, `# the server's settings\nDATABASE_URL=${tdb.url}\nPORT=0\nLOG_LEVEL="info"\n`);
    let child: ChildProcess | undefined;
    try {
      // The operator CLI reads the file for its own commands (and migrates only when asked).
      const migrated = await cli("billing", ["migrate", "up", "--env-file", envFile]);
      t.is(migrated.code, 0, migrated.stderr);
      t.true(migrated.stderr.includes(`DATABASE_URL from ${envFile}`));
      const env = await cli("keys", ["--env-file", envFile, "env", "create", "acme"]);
      t.is(env.code, 0, env.stderr);
      t.true(env.stderr.includes(`database: ${describeDatabase(tdb.url)} (DATABASE_URL from ${envFile})`), env.stderr);
      const made = await cli("keys", ["create", "--env", "acme", `--env-file=${envFile}`]);
      t.is(made.code, 0, made.stderr);
      t.true(made.stderr.includes(`DATABASE_URL from ${envFile}`));
      const key = made.stdout.trim().split("\n")[1] ?? "";
      t.regex(key, /^sk_test_/);

      // The same file, given before `keys`.
      t.regex((await cli("billing", ["--env-file", envFile, "keys", "list"])).stdout, /\tacme\t.*active/);

      const server = await startServer(envFile);
      child = server.child;
      t.is((await rest(server.url, "POST", "/subjects", key, { name: "from the CLI's key" })).status, 200);
    } finally {
      child?.kill("SIGTERM");
      await tdb.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test(`${store}: an env file that disagrees with DATABASE_URL in the environment is refused, nothing written`, async (t) => {
    const a = await createTestDatabase(store);
    const b = await createTestDatabase(store);
    const dir = mkdtempSync(join(tmpdir(), "env-file-"));
    const envFile = join(dir, "billing.env");
    writeFileSync(envFile, `DATABASE_URL=${a.url}\n`);
    try {
      t.is((await cli("billing", ["migrate", "up"], { ...bareEnv(), DATABASE_URL: a.url })).code, 0);
      t.is((await cli("keys", ["env", "create", "acme"], { ...bareEnv(), DATABASE_URL: a.url })).code, 0);
      const refused = await cli("keys", ["create", "--env", "acme", "--env-file", envFile], { ...bareEnv(), DATABASE_URL: b.url });
      t.is(refused.code, 2);
      t.regex(refused.stderr, /DATABASE_URL is set both in the environment and in the env file .*billing\.env, to different values/);
      const billing = await cli("billing", ["--env-file", envFile, "migrate", "up"], { ...bareEnv(), DATABASE_URL: b.url });
      t.is(billing.code, 2);
      t.regex(billing.stderr, /set both in the environment and in the env file/);
      // The same value in both is no conflict.
      t.is((await cli("keys", ["list", "--env-file", envFile], { ...bareEnv(), DATABASE_URL: a.url })).code, 0);
      t.notRegex((await cli("keys", ["list"], { ...bareEnv(), DATABASE_URL: a.url })).stdout, /acme\t/, "no key was made");
    } finally {
      await a.drop();
      await b.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test("no --env-file, ENV_FILE or DATABASE_URL, and no default database here: refused, no database created", async (t) => {
  const cwd = mkdtempSync(join(tmpdir(), "cli-cwd-"));
  try {
    for (const [program, args] of [
      ["keys", ["env", "create", "acme"]],
      ["keys", ["list"]],
      ["billing", ["migrate", "up"]],
      ["billing", ["keys", "create", "--env", "acme"]],
    ] as const) {
      const r = await cli(program, [...args], bareEnv(), cwd);
      t.is(r.code, 2, `${program} ${args.join(" ")}`);
      t.true(r.stderr.includes(`the default database ${join(cwd, "data", "billing.db")} does not exist`), r.stderr);
      t.regex(r.stderr, /--env-file PATH/);
    }
    t.false(existsSync(join(cwd, "data")), "no database file was made");
    const unreadable = await cli("keys", ["list"], { ...bareEnv(), ENV_FILE: join(cwd, "missing.env") }, cwd);
    t.is(unreadable.code, 2);
    t.regex(unreadable.stderr, /the env file .*missing\.env cannot be read \(ENOENT\)/);
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
});
