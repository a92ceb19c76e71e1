/**
 * clients/billing.binpb, the committed FileDescriptorSet for tools that do not use server
 * reflection: it is what `buf build` makes of the committed contract (CI checks the same after
 * `npm run generate`), and `buf curl --schema` with it (buf curl then does not ask the server for
 * reflection) creates and reads a subject over gRPC and over Connect.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import test from "ava";
import { STORES } from "../helpers/db.js";
import { useServers } from "../helpers/server.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const BUF = path.join(ROOT, "node_modules/.bin/buf");
const SCHEMA = path.join(ROOT, "clients/billing.binpb");
const STORE = STORES.includes("sqlite") ? "sqlite" : STORES[0];
const server = useServers([STORE]);

function buf(args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(BUF, args, { cwd: ROOT, timeout: 120_000 }, (error, stdout, stderr) => (error ? reject(new Error(`buf ${args.join(" ")}: ${stderr}`)) : resolve(stdout))),
  );
}

test("clients/billing.binpb is what buf build makes of the contract", async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), "binpb-"));
  try {
    await buf(["build", "-o", path.join(dir, "billing.binpb")]);
    t.true(readFileSync(path.join(dir, "billing.binpb")).equals(readFileSync(SCHEMA)), "stale: run npm run generate and commit clients/billing.binpb");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

const curl = (protocol: string[], url: string, key: string, method: string, body: unknown) =>
  buf(["curl", "--schema", SCHEMA, ...protocol, "-H", `X-API-Key: ${key}`, "-d", JSON.stringify(body), `${url}/billing.v1.SubjectService/${method}`]).then((out) => JSON.parse(out));

for (const [name, protocol] of [
  ["gRPC (HTTP/2 prior knowledge)", ["--protocol", "grpc", "--http2-prior-knowledge"]],
  ["Connect over HTTP/1.1", ["--protocol", "connect"]],
] as const) {
  test(`buf curl --schema clients/billing.binpb: ${name} creates and reads a subject`, async (t) => {
    const s = server(STORE);
    const externalId = `binpb-${Math.random().toString(36).slice(2)}`;
    const created = await curl([...protocol], s.url, s.keys.a, "CreateSubject", { external_id: externalId, name: "Schema File" });
    t.regex(created.subject?.id ?? "", /^subj_/, JSON.stringify(created));
    const got = await curl([...protocol], s.url, s.keys.a, "GetSubject", { subject_id: created.subject.id });
    t.like(got.subject, { id: created.subject.id, externalId, name: "Schema File" });
  });
}
