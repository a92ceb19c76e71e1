/**
 * The README runs: its walk-through's shell examples (the `sh` blocks with `curl` or `buf curl`,
 * from the one that starts the service on) run in order in one shell against a fresh server on
 * SQLite, and every command succeeds — curl fails on an HTTP error status (--fail-with-body), a
 * shell error or a failed `buf curl` stops the script and names the command.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";
import test from "ava";
import { createTestDatabase } from "./helpers/db.js";
import { startAppOn } from "./helpers/server.js";

const run = promisify(execFile);

const README = readFileSync(new URL("../README.md", import.meta.url), "utf8");
const blocks = [...README.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1] as string);
const startAt = blocks.findIndex((b) => /^BILLING_BOOTSTRAP_API_KEY=\S+ npm start$/m.test(b));

test("the README's walk-through runs, step by step, against a fresh server", async (t) => {
  t.true(startAt >= 0, "the README has a block that starts the service with BILLING_BOOTSTRAP_API_KEY=… npm start");
  const start = blocks[startAt] as string;
  const key = /^BILLING_BOOTSTRAP_API_KEY=(\S+) npm start$/m.exec(start)?.[1] as string;
  t.regex(start, new RegExp(`^export K=${key}$`, "m"), "the walk-through's $K is the key the service starts with");
  const steps = blocks.slice(startAt + 1).filter((b) => /\bcurl\b/.test(b));
  t.true(steps.length >= 10, `${steps.length} walk-through blocks`);

  const db = await createTestDatabase("sqlite");
  const app = await startAppOn(db.url, { BILLING_BOOTSTRAP_API_KEY: key, SCHEDULER_INTERVAL_MS: "0" });
  try {
    // The service is started here (same key, on a free port, SCHEDULER off so the test decides
    // when cycles close); the rest of the start block is run as written.
    const script = [
      "set -eo pipefail",
      `trap 'echo "README step failed (exit $?): $BASH_COMMAND" >&2' ERR`,
      // Every curl of the walk-through must get a success status (hosted pages' 303 included).
      'curl() { command curl --fail-with-body "$@"; }',
      start.replace(/^BILLING_BOOTSTRAP_API_KEY=\S+ npm start$/m, ""),
      ...steps.map((b, i) => `${b}\necho "README step ${i + 1} done"`),
    ]
      .join("\n")
      .replaceAll("localhost:8080", `localhost:${app.port}`);
    const r = await run("bash", ["-c", script], {
      env: { ...process.env, DATABASE_URL: db.url, PATH: `${process.cwd()}/node_modules/.bin:${process.env.PATH}` },
      maxBuffer: 16 * 1024 * 1024,
    }).catch((e: { code?: number; stdout?: string; stderr?: string }) => e);
    const out = `${r.stdout ?? ""}\n${r.stderr ?? ""}`;
    t.is("code" in r ? r.code : 0, 0, out.slice(-4000));
    for (let i = 1; i <= steps.length; i++) t.true(String(r.stdout).includes(`README step ${i} done`), `step ${i} ran`);
  } finally {
    await app.stop();
    await db.drop();
  }
});
