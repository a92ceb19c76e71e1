/**
 * The build `npm start` runs: `npm run build`'s compiler run (tsconfig.build.json) compiles src
 * into dist/ without an error, and plain node (no TypeScript loader) runs what it made: the server
 * answers its health check, its OpenAPI document and its docs page (files it reads from the
 * repository), and the CLI answers `--help` and `status --json`.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import test from "ava";

const exec = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "..");

function startCompiled(databaseUrl: string): { child: ChildProcess; port: Promise<number> } {
  const env: Record<string, string | undefined> = { ...process.env, DATABASE_URL: databaseUrl, PORT: "0", LOG_LEVEL: "info", SCHEDULER_INTERVAL_MS: "0" };
  delete env.ENV_FILE;
  delete env.NODE_OPTIONS;
  const child = spawn(process.execPath, ["--max-old-space-size=192", "dist/main.js"], { cwd: ROOT, env, stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  const port = new Promise<number>((ok, fail) => {
    child.stderr?.on("data", (c: Buffer) => {
      log += c.toString();
      const m = /"msg":"listening","port":(\d+)/.exec(log);
      if (m) ok(Number(m[1]));
    });
    child.on("exit", (code) => fail(new Error(`the compiled server exited (${code}): ${log}`)));
  });
  return { child, port };
}

test("npm run build compiles src into dist/, and node runs the compiled server and CLI without a TypeScript loader", async (t) => {
  const { scripts } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> };
  t.is(scripts.build, "tsc -p tsconfig.build.json");
  t.is(scripts.start, "node --max-old-space-size=192 dist/main.js");
  t.is(scripts.prestart, "npm run build");
  const built = await exec(process.execPath, [join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.build.json"], { cwd: ROOT }).catch((e: { code?: number; stdout?: string }) => e);
  t.is("code" in built ? built.code : 0, 0, String(built.stdout ?? ""));

  const dir = mkdtempSync(join(tmpdir(), "build-"));
  const url = `sqlite:${join(dir, "billing.db")}`;
  const { child, port } = startCompiled(url);
  try {
    const base = `http://127.0.0.1:${await port}`;
    t.is((await fetch(`${base}/healthz`)).status, 200);
    const doc = await fetch(`${base}/openapi.json`);
    t.is(doc.status, 200);
    t.is(((await doc.json()) as { openapi?: string }).openapi?.slice(0, 2), "3.");
    t.is((await fetch(`${base}/docs`)).status, 200);

    const env = { ...process.env, DATABASE_URL: url };
    const help = await exec(process.execPath, ["dist/cli/keys.js", "--help"], { cwd: ROOT, env });
    t.regex(help.stdout, /^usage: billing \[--env-file PATH\] keys <command> \[--json\]\n/);
    const status = await exec(process.execPath, ["dist/cli/billing.js", "status", "--json"], { cwd: ROOT, env });
    t.like(JSON.parse(status.stdout), { database: { kind: "sqlite", reachable: true }, migrations: { pending: 0 } });
  } finally {
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
    rmSync(dir, { recursive: true, force: true });
  }
});
