/**
 * The server as Python's grpcio sees it (gRPC's C core: its own HTTP/2, HPACK and flow control,
 * not Node's): test/grpcio/client.py, with the project's messages built from `buf build`'s
 * FileDescriptorSet of proto/ and third_party/. Unary calls, error messages read back exactly
 * (colons, `%`, non-ASCII), error details decoded from grpc-status-details-bin, gzip both ways and
 * a compressed body bounded after decompression, deadlines, the grpc.health.v1 service, an
 * unknown method, and client-streaming ingest past the flow-control windows, exactly once.
 * Python is Debian's (/usr/bin/python3 with python3-grpcio and python3-protobuf, which .ci/run
 * installs); GRPCIO_PYTHON names another interpreter.
 */
import { execFile, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import test from "ava";
import { type App, startApp } from "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import { createLogger } from "../../src/log.js";
import { ok } from "../helpers/clients.js";
import { STORES, createTestDatabase } from "../helpers/db.js";
import { sample, scrape } from "../helpers/ops.js";
import { type TestServer, seedKeys, useServers } from "../helpers/server.js";

const GRPCIO_PYTHON = process.env.GRPCIO_PYTHON || "/usr/bin/python3";
const CLIENT = path.resolve(import.meta.dirname, "../grpcio/client.py");
const BUF = "node_modules/.bin/buf";

// biome-ignore lint: what the Python client saw, as JSON
type Seen = Record<string, any>;

let dir = "";
let descriptors = "";
const server = useServers();

/** Runs one case of the Python client against `server`: what it printed, parsed. */
function python(server: TestServer, kase: string, input: Record<string, unknown> = {}): Promise<Seen> {
  return new Promise((resolve, reject) => {
    const child = spawn(GRPCIO_PYTHON, [CLIENT, kase], { stdio: ["pipe", "pipe", "pipe"], timeout: 120_000 });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) return reject(new Error(`client.py ${kase} exited ${code}: ${err}`));
      try {
        resolve(JSON.parse(out));
      } catch {
        reject(new Error(`client.py ${kase} printed no JSON: ${out} ${err}`));
      }
    });
    child.stdin.end(JSON.stringify({ target: server.url.replace(/^http:\/\//, ""), descriptors, key: server.keys.a, ...input }));
  });
}

test.before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "grpcio-"));
  descriptors = path.join(dir, "billing.binpb");
  // The image of the contract, imports included: what any other language's tooling starts from.
  await new Promise<void>((resolve, reject) =>
    execFile(BUF, ["build", "-o", descriptors], { timeout: 60_000 }, (error, _stdout, stderr) => (error ? reject(new Error(`buf build: ${stderr}`)) : resolve())),
  );
});

test.after.always(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const unique = () => Math.random().toString(36).slice(2);

// One Python client at a time: each starts an interpreter and gRPC's C core, and the suite's
// other files share the machine's CPUs meanwhile.
for (const store of STORES) {
  test.serial(`${store}: grpcio unary calls create, read and update a subject (proto3 optional, FieldMask)`, async (t) => {
    const seen = await python(server(store), "unary", { external_id: `py-${unique()}` });
    t.regex(seen.created.ok?.subject?.id ?? "", /^subj_/, JSON.stringify(seen.created));
    t.like(seen.got.ok?.subject, { id: seen.created.ok.subject.id, name: "Ada Lovelace", email: "ada@example.com", metadata: { plan: "pro" } });
    const updated = seen.updated.ok?.subject;
    t.like(updated, { id: seen.created.ok.subject.id, name: "Ada King", email: "ada@example.com" }, JSON.stringify(seen.updated));
    t.is(updated.metadata, undefined, "cleared: an empty map is left out of proto JSON");
  });

  test.serial(`${store}: grpcio reads error messages exactly and decodes their details`, async (t) => {
    const odd = "zß☃ 100%: ok";
    const seen = await python(server(store), "errors", { odd_id: odd });
    t.like(seen.bad_email.error, { code: "INVALID_ARGUMENT", details: "email: must be a valid email address" });
    const status = seen.bad_email.error.status;
    t.like(status, { code: 3, message: "email: must be a valid email address" });
    t.deepEqual(
      status.details.map((d: { type: string }) => d.type),
      ["google.rpc.ErrorInfo", "google.rpc.BadRequest", "google.rpc.RequestInfo"],
    );
    t.deepEqual(status.details[0].value, { reason: "INVALID_FIELD", domain: "billing.v1" });
    t.deepEqual(status.details[1].value, { field_violations: [{ field: "email", description: "must be a valid email address" }] });
    t.regex(status.details[2].value.request_id, /^[0-9a-f-]{36}$/);
    t.like(seen.not_found.error, { code: "NOT_FOUND", details: `subject ${JSON.stringify(odd)} not found` });
    t.like(seen.no_key.error, { code: "UNAUTHENTICATED", details: "missing API key: send it in the X-API-Key header" });
    t.is(seen.bad_key.error?.code, "UNAUTHENTICATED");
  });

  test.serial(`${store}: grpcio gzip both ways; a compressed body is bounded after decompression and writes nothing`, async (t) => {
    const external = `pyzip-${unique()}`;
    const seen = await python(server(store), "gzip", { external_id: external });
    const big = Object.fromEntries([1, 2, 3, 4].map((i) => [`k${i}`, String(i).repeat(400)]));
    t.like(seen.created.ok?.subject, { name: "Zipped Grace", metadata: big }, JSON.stringify(seen.created).slice(0, 300));
    t.like(seen.got.ok?.subject, { name: "Zipped Grace", metadata: big });
    t.is(seen.huge.error?.code, "RESOURCE_EXHAUSTED", JSON.stringify(seen.huge).slice(0, 300));
    const list = await ok(server(store), server(store).keys.a, "GET", "/subjects?limit=100");
    t.false(JSON.stringify(list).includes("aaaaaaaaaa"), "nothing was written");
  });

  test.serial(`${store}: grpcio deadlines: a call within one answers, a stream past one ends DEADLINE_EXCEEDED`, async (t) => {
    const seen = await python(server(store), "deadline");
    t.truthy(seen.within.ok, JSON.stringify(seen.within));
    t.is(seen.watch.code, "DEADLINE_EXCEEDED", JSON.stringify(seen.watch));
    // Watch answers at once; on a loaded machine the deadline may pass before that first answer.
    t.true(
      seen.watch.messages.every((m: { status?: string }) => m.status === "SERVING"),
      JSON.stringify(seen.watch),
    );
  });

  test.serial(`${store}: grpcio grpc.health.v1: Check with no key, Watch's first answer, open until cancelled`, async (t) => {
    const services = ["", "billing.v1.SubjectService", "billing.v1.UsageEventService", "grpc.health.v1.Health", "billing.v1.NoSuchService"];
    const seen = await python(server(store), "health", { services });
    for (const s of services.slice(0, 4)) t.deepEqual(seen.check[s], { ok: { status: "SERVING" } }, s);
    t.is(seen.check["billing.v1.NoSuchService"].error?.code, "NOT_FOUND");
    t.deepEqual(seen.watch, {
      "": { first: { status: "SERVING" }, ended: "CANCELLED" },
      "billing.v1.NoSuchService": { first: { status: "SERVICE_UNKNOWN" }, ended: "CANCELLED" },
    });
  });

  test.serial(`${store}: grpcio calling a method the server does not have gets UNIMPLEMENTED`, async (t) => {
    const seen = await python(server(store), "unimplemented");
    t.like(seen.result.error, { code: "UNIMPLEMENTED", details: "unknown method /billing.v1.NoSuchService/DoIt: this server has no such gRPC service or method" });
  });

  test.serial(`${store}: grpcio client-streaming ingest: every event once, past the flow-control windows, gzip included`, async (t) => {
    const key = await server(store).freshKey();
    const s = { ...server(store), keys: { ...server(store).keys, a: key } };
    const subject = await ok(s, key, "POST", "/subjects", { external_id: `py-${unique()}` });
    const metric = await ok(s, key, "POST", "/pricing-metrics", { event_name: "api", name: "API", unit: "call", aggregation: { aggregation_type: "sum", value_field: "n" } });
    const seen = await python(s, "stream", { subject_id: subject.id });
    // int32 counts: proto JSON numbers. Zero counts are left out of proto JSON.
    t.like(seen.first, { received: 300, accepted: 298, duplicate: 1, rejected: 1 });
    t.deepEqual(
      seen.first.rejections.map((r: { index?: number }) => r.index ?? 0),
      [150],
    );
    t.like(seen.second, { received: 5000, accepted: 4701, duplicate: 298, rejected: 1 }, JSON.stringify(seen.second).slice(0, 300));
    const summary = await ok(s, key, "POST", `/pricing-metrics/${metric.id}/summary`, {
      subject_id: subject.id,
      period: { start: "2000-01-01T00:00:00Z", end: "2100-01-01T00:00:00Z" },
    });
    t.is(summary[0].value, "2499.5", "4,999 events of 0.5, each once");
  });
}

// A usage stream grpcio gives up on (its cancel(), its deadline) is written and counted as what it
// was, canceled or deadline_exceeded at info, never ok, and leaves no warning, error or stack in
// the server's log. One server whose every log line (debug included) is kept; counting does not
// depend on the store.
test.serial("sqlite: grpcio giving up on a usage stream (cancel, deadline) is logged at info as canceled / deadline_exceeded, with no error or stack", async (t) => {
  const db = await createTestDatabase("sqlite");
  const seeded = await seedKeys(db.url);
  const lines: Record<string, unknown>[] = [];
  let app: App | undefined;
  try {
    app = await startApp(
      loadConfig({ DATABASE_URL: db.url, PORT: "0", LOG_LEVEL: "debug", SCHEDULER_INTERVAL_MS: "0" }),
      createLogger("debug", (l) => lines.push(JSON.parse(l))),
    );
    const s = { store: "sqlite", url: app.url, keys: seeded.keys } as unknown as TestServer;
    const procedure = "billing.v1.UsageEventService/StreamUsageEvents";
    const accessLines = () => lines.filter((l) => l.msg === "request" && l.procedure === procedure);
    for (const [giveUp, code, grpcCode] of [
      ["cancel", "canceled", "CANCELLED"],
      ["deadline", "deadline_exceeded", "DEADLINE_EXCEEDED"],
    ] as const) {
      const subject = await ok(s, seeded.keys.a, "POST", "/subjects", { external_id: `py-${giveUp}-${unique()}` });
      const before = accessLines().length;
      const seen = await python(s, "abandon", { subject_id: subject.id, give_up: giveUp });
      t.is(seen.code, grpcCode, giveUp);
      // The stream's close is seen a moment after the client's.
      for (let i = 0; i < 50 && accessLines().length === before; i++) await new Promise((r) => setTimeout(r, 100));
      const written = accessLines().slice(before);
      t.is(written.length, 1, `${giveUp}: one access line`);
      t.like(written[0], { level: "info", protocol: "grpc", code }, giveUp);
    }
    const metrics = await scrape(app.url);
    for (const code of ["canceled", "deadline_exceeded"]) t.is(sample(metrics, "billing_requests_total", { protocol: "grpc", procedure, code }), 1, code);
    t.is(sample(metrics, "billing_requests_total", { protocol: "grpc", procedure, code: "ok" }), 0);
    const loud = lines.filter((l) => l.level === "warn" || l.level === "error");
    t.deepEqual(loud, [], "no warning or error line");
    t.false(/"stack"|\n\s+at /.test(JSON.stringify(lines)), "no stack trace in any line");
  } finally {
    await app?.stop();
    await seeded.close();
    await db.drop();
  }
});
