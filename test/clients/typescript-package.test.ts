/**
 * clients/typescript as another service gets it: built with the root's TypeScript, packed with
 * `npm pack`, the tarball installed into a scratch project in a temporary directory (its own
 * dependencies from the npm registry or cache), then a plain-`node` script there calls the real
 * server over REST (openapi-fetch), Connect and gRPC-Web (connect-web, over fetch) and Connect and
 * gRPC (connect-node): it creates a subject on each and reads every one back on another protocol.
 * A TypeScript file of the scratch project is typechecked against the package's .d.ts only (no
 * access to the sources), with a wrong REST body and a wrong RPC field that must be refused.
 * One server (SQLite when the run includes it): the package's calls do not depend on the store.
 */
import { execFile } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import test from "ava";
import { services } from "../../clients/typescript/src/services.js";
import { STORES } from "../helpers/db.js";
import { useServers } from "../helpers/server.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const PKG = path.join(ROOT, "clients/typescript");
const TSC = path.join(ROOT, "node_modules/typescript/bin/tsc");
const STORE = STORES.includes("sqlite") ? "sqlite" : STORES[0];
const server = useServers([STORE]);

function sh(cmd: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(cmd, args, { cwd, env: { ...process.env, ...env }, timeout: 300_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) =>
      error ? reject(new Error(`${cmd} ${args.join(" ")} (in ${cwd}): ${error.message}\n${stdout}\n${stderr}`)) : resolve(stdout),
    ),
  );
}

let dir = "";
let scratch = "";

test.before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "ts-client-"));
  await sh(process.execPath, [TSC, "-p", "tsconfig.json"], PKG);
  const packed = JSON.parse(await sh("npm", ["pack", "--json", "--pack-destination", dir], PKG)) as { filename: string; files: { path: string }[] }[];
  scratch = path.join(dir, "scratch");
  await mkdir(scratch);
  await writeFile(
    path.join(scratch, "package.json"),
    JSON.stringify({ name: "scratch", private: true, type: "module", dependencies: { "@usage-billing/client": `file:../${packed[0].filename}` } }, null, 2),
  );
  // The tarball's own dependencies come from the registry (or npm's cache); the root's node_modules is not on the path.
  await sh("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts"], scratch);
});

test.after.always(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

test("the package's version is the root package's, and it ships built JS and .d.ts, not sources", async (t) => {
  const root = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8"));
  const pkg = JSON.parse(readFileSync(path.join(scratch, "node_modules/@usage-billing/client/package.json"), "utf8"));
  t.is(pkg.version, root.version);
  t.is(pkg.type, "module");
  // Exact pins, the same as the root's.
  for (const name of ["@bufbuild/protobuf", "@connectrpc/connect", "@connectrpc/connect-node"]) t.is(pkg.dependencies[name], root.dependencies[name], name);
  for (const name of ["@connectrpc/connect-web", "openapi-fetch"]) t.is(pkg.dependencies[name], root.devDependencies[name], name);
  const installed = readdirSync(path.join(scratch, "node_modules/@usage-billing/client/dist"));
  t.true(installed.includes("index.js") && installed.includes("index.d.ts") && installed.includes("node.js"), installed.join(", "));
  t.false(readdirSync(path.join(scratch, "node_modules/@usage-billing/client")).includes("src"));
});

test("every billing.v1 service of the contract has its client", (t) => {
  const declared = readdirSync(path.join(ROOT, "proto/billing/v1"))
    .filter((f) => f.endsWith("_service.proto"))
    .flatMap((f) => [...readFileSync(path.join(ROOT, "proto/billing/v1", f), "utf8").matchAll(/^service (\w+) \{/gm)].map((m) => `billing.v1.${m[1]}`))
    .sort();
  t.deepEqual(
    Object.values(services)
      .map((s) => s.typeName)
      .sort(),
    declared,
  );
});

const SCRIPT = `
import { createBillingClient as webClient, createRestClient } from "@usage-billing/client";
import { createBillingClient } from "@usage-billing/client/node";

const [url, key, tag] = process.argv.slice(2);
const rest = createRestClient(url, key);
const seen = {};

const made = await rest.POST("/subjects", { body: { external_id: tag + "-rest", name: "Rest Client", metadata: { via: "rest" } } });
seen.rest = { status: made.response.status, created: made.data, error: made.error };

const clients = {
  connect: createBillingClient(url, key, { protocol: "connect" }),
  grpc: createBillingClient(url, key, { protocol: "grpc" }),
  grpcWeb: createBillingClient(url, key, { protocol: "grpc-web", httpVersion: "1.1" }),
  webConnect: webClient(url, key),
  webGrpcWeb: webClient(url, key, { protocol: "grpc-web" }),
};
for (const [name, client] of Object.entries(clients)) {
  const { subject } = await client.subjects.createSubject({ externalId: tag + "-" + name, name: name, email: name.toLowerCase() + "@example.com" });
  seen[name] = { id: subject.id, externalId: subject.externalId, email: subject.email };
}

// Each subject read back on another protocol: REST reads the RPC-made ones, gRPC the REST one.
seen.readBack = {};
for (const name of Object.keys(clients)) {
  const got = await rest.GET("/subjects/{subject_id}", { params: { path: { subject_id: seen[name].id } } });
  seen.readBack[name] = got.data;
}
const { subject } = await clients.grpc.subjects.getSubject({ subjectId: seen.rest.created.id });
seen.readBack.rest = { id: subject.id, externalId: subject.externalId, name: subject.name, metadata: subject.metadata, createdAtMs: Number(subject.createdAt.seconds) * 1000 + Math.floor(subject.createdAt.nanos / 1e6) };

// A refused call: the error's code as Connect names it, and REST's error body.
try {
  await clients.grpc.subjects.getSubject({ subjectId: "subj_missing" });
} catch (e) {
  seen.grpcMissing = { code: e.code, name: e.name };
}
const missing = await rest.GET("/subjects/{subject_id}", { params: { path: { subject_id: "subj_missing" } } });
seen.restMissing = { status: missing.response.status, error: missing.error };

const wrongKey = createBillingClient(url, "sk_test_wrong", { protocol: "grpc" });
try {
  await wrongKey.subjects.listSubjects({});
} catch (e) {
  seen.grpcWrongKey = { code: e.code };
}
process.stdout.write(JSON.stringify(seen));
`;

test("a plain node script in the scratch project calls the server over REST, Connect, gRPC-Web and gRPC", async (t) => {
  await writeFile(path.join(scratch, "call.mjs"), SCRIPT);
  const tag = `pkg-${Math.random().toString(36).slice(2)}`;
  const s = server(STORE);
  const seen = JSON.parse(await sh(process.execPath, ["call.mjs", s.url, s.keys.a, tag], scratch));
  t.is(seen.rest.status, 200, JSON.stringify(seen.rest));
  t.like(seen.rest.created, { external_id: `${tag}-rest`, name: "Rest Client", metadata: { via: "rest" } });
  t.regex(seen.rest.created.id, /^subj_/);
  const ids = new Set<string>([seen.rest.created.id]);
  for (const name of ["connect", "grpc", "grpcWeb", "webConnect", "webGrpcWeb"]) {
    t.regex(seen[name].id, /^subj_/, name);
    t.is(seen[name].externalId, `${tag}-${name}`, name);
    t.like(seen.readBack[name], { id: seen[name].id, external_id: `${tag}-${name}`, name, email: `${name.toLowerCase()}@example.com` }, name);
    ids.add(seen[name].id);
  }
  t.is(ids.size, 6, "six distinct subjects");
  t.deepEqual(seen.readBack.rest, { id: seen.rest.created.id, externalId: `${tag}-rest`, name: "Rest Client", metadata: { via: "rest" }, createdAtMs: Date.parse(seen.rest.created.created_at) });
  // Code.NotFound is 5 and Code.Unauthenticated 16 in connect-es.
  t.deepEqual(seen.grpcMissing, { code: 5, name: "ConnectError" });
  t.is(seen.restMissing.status, 404);
  t.like(seen.restMissing.error, { code: "not_found" });
  t.deepEqual(seen.grpcWrongKey, { code: 16 });
});

const TYPED = `
import { createBillingClient as webClient, createRestClient, type Subject, type components } from "@usage-billing/client";
import { createBillingClient, type BillingClient } from "@usage-billing/client/node";

export async function typed(url: string, key: string): Promise<string> {
  const rest = createRestClient(url, key);
  const made = await rest.POST("/subjects", { body: { external_id: "x", metadata: { a: "b" } } });
  const subject: components["schemas"]["Subject"] | undefined = made.data;
  const id: string = subject?.id ?? "";
  // @ts-expect-error: metadata values are strings
  await rest.POST("/subjects", { body: { metadata: { a: 1 } } });
  // @ts-expect-error: no such path
  await rest.GET("/subject/{subject_id}", { params: { path: { subject_id: id } } });
  const client: BillingClient = createBillingClient(url, key, { protocol: "grpc" });
  const got: Subject | undefined = (await client.subjects.getSubject({ subjectId: id })).subject;
  // @ts-expect-error: the field is subjectId
  await client.subjects.getSubject({ subject_id: id });
  // @ts-expect-error: gRPC needs HTTP/2, so the browser client does not offer it
  webClient(url, key, { protocol: "grpc" });
  return got?.name ?? "";
}
`;

test("a TypeScript file in the scratch project typechecks against the package's .d.ts (and wrong calls do not)", async (t) => {
  await writeFile(path.join(scratch, "typed.ts"), TYPED);
  await writeFile(
    path.join(scratch, "tsconfig.json"),
    JSON.stringify({ compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true, noEmit: true, types: [], lib: ["ES2022", "DOM"] }, files: ["typed.ts"] }),
  );
  await t.notThrowsAsync(sh(process.execPath, [TSC, "-p", "tsconfig.json"], scratch));
  // The same file with the expectations removed must fail: the types are real, not `any`.
  await writeFile(path.join(scratch, "typed.ts"), TYPED.replaceAll("// @ts-expect-error", "//"));
  const error = await t.throwsAsync(sh(process.execPath, [TSC, "-p", "tsconfig.json"], scratch));
  t.is([...(error?.message ?? "").matchAll(/typed\.ts\(\d+,\d+\): error/g)].length, 4, error?.message);
});
