/**
 * clients/python/README.md, run as written: its `sh` blocks (protoc 3.21 with grpc_python_plugin,
 * the billing.v1 stubs, then grpc.health.v1 generated as grpc_health/v1 so that it does not shadow
 * the installed grpc package) in a temporary directory that links proto/ and third_party/, then
 * its `python` block saved as create_subject.py and run by its last `sh` line with Debian's Python
 * (GRPCIO_PYTHON) against a real server. The subject it made is read back over REST.
 * protoc and grpc_python_plugin come from protobuf-compiler and protobuf-compiler-grpc, which
 * scripts/test-prerequisites.sh installs (test/preflight.ts names them when missing).
 */
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import test from "ava";
import { STORES } from "../helpers/db.js";
import { useServers } from "../helpers/server.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const HOWTO = readFileSync(path.join(ROOT, "clients/python/README.md"), "utf8");
const PYTHON = process.env.GRPCIO_PYTHON || "/usr/bin/python3";
const STORE = STORES.includes("sqlite") ? "sqlite" : STORES[0];
const server = useServers([STORE]);

/** The fenced blocks of the how-to in `lang`, in order. */
const blocks = (lang: string) => [...HOWTO.matchAll(new RegExp(`^\`\`\`${lang}\\n([\\s\\S]*?)^\`\`\`$`, "gm"))].map((m) => m[1]);

function bash(script: string, cwd: string, env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile("/bin/bash", ["-euo", "pipefail", "-c", script], { cwd, env: { ...process.env, ...env }, timeout: 120_000 }, (error, stdout, stderr) =>
      error ? reject(new Error(`${script}\n${error.message}\n${stderr}`)) : resolve(stdout),
    ),
  );
}

const missing = ["/usr/bin/protoc", "/usr/bin/grpc_python_plugin"].filter((f) => !existsSync(f));

test("the how-to has the generate, health and run commands and one script", (t) => {
  const sh = blocks("sh");
  t.is(sh.length, 3, "generate, health workaround, run");
  t.regex(sh[0], /grpc_python_plugin/);
  t.notRegex(sh[0], /grpc\/health/, "the billing stubs leave grpc.health.v1 out");
  t.regex(sh[1], /grpc_health\/v1/);
  t.is(blocks("python").length, 1);
});

test("the how-to's commands generate stubs, and its script creates and reads a subject over grpcio", async (t) => {
  if (missing.length > 0) {
    t.fail(`${missing.join(" and ")} missing: apt-get install protobuf-compiler protobuf-compiler-grpc (scripts/test-prerequisites.sh does so as root)`);
    return;
  }
  const dir = await mkdtemp(path.join(tmpdir(), "python-howto-"));
  try {
    await symlink(path.join(ROOT, "proto"), path.join(dir, "proto"));
    await symlink(path.join(ROOT, "third_party"), path.join(dir, "third_party"));
    // `python3` in the run line is GRPCIO_PYTHON (Debian's, with grpcio), whatever else is on PATH.
    await mkdir(path.join(dir, "bin"));
    await symlink(PYTHON, path.join(dir, "bin/python3"));
    const [generate, health, run] = blocks("sh");
    await bash(generate, dir, {});
    await bash(health, dir, {});
    t.true(existsSync(path.join(dir, "gen/billing/v1/subject_service_pb2_grpc.py")));
    t.true(existsSync(path.join(dir, "gen/grpc_health/v1/health_pb2_grpc.py")));
    t.false(existsSync(path.join(dir, "gen/grpc")), "no top-level grpc package of our own");
    await writeFile(path.join(dir, "create_subject.py"), blocks("python")[0]);

    const s = server(STORE);
    const externalId = `py-howto-${Math.random().toString(36).slice(2)}`;
    // The run line as written, with this server's address and key in place of the placeholders.
    const line = run.replace("localhost:8080", new URL(s.url).host).replace("sk_test_...", s.keys.a);
    const out = await bash(line, dir, { PATH: `${path.join(dir, "bin")}:${process.env.PATH}`, EXTERNAL_ID: externalId });
    const seen = JSON.parse(out);
    t.regex(seen.created.id, /^subj_/);
    t.deepEqual(seen.created, { id: seen.created.id, external_id: externalId, name: "Ada Lovelace", metadata: { plan: "pro" } });
    t.deepEqual(seen.got, { id: seen.created.id, name: "Ada Lovelace", has_email: false });
    t.is(seen.refused.code, "INVALID_ARGUMENT");
    t.regex(seen.refused.message, /email/);
    t.deepEqual(seen.refused.fields, ["email"]);
    t.is(seen.health, "SERVING");

    const rest = await fetch(`${s.url}/subjects/${seen.created.id}`, { headers: { "X-API-Key": s.keys.a } });
    t.like(await rest.json(), { id: seen.created.id, external_id: externalId, name: "Ada Lovelace", metadata: { plan: "pro" } });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
