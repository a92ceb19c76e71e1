/**
 * The server as a whole: health without a key, gRPC reflection as `buf curl` uses it, and a
 * graceful stop on SIGTERM that finishes the request in flight, and what an unexpected failure
 * tells a caller.
 */
import { spawn } from "node:child_process";
import { promisify } from "node:util";
import { execFile } from "node:child_process";
import net from "node:net";
import test from "ava";
import { Code, ConnectError } from "@connectrpc/connect";
import { createDatabase } from "../../src/db/datasource.js";
import { SubjectService } from "../../src/gen/billing/v1/subject_service_pb.js";
import { rest, rpcClient } from "../helpers/clients.js";
import { STORES, createTestDatabase } from "../helpers/db.js";
import { seedKeys, startTestServer, useServer } from "../helpers/server.js";

const run = promisify(execFile);
const BUF = "node_modules/.bin/buf";

// What these tests check does not depend on the store: they run on one that TEST_STORES selects.
const STORE = STORES.includes("sqlite") ? "sqlite" : STORES[0];
const server = useServer(STORE);

test("GET /healthz answers without a key", async (t) => {
  const r = await rest(server.url, "GET", "/healthz");
  t.is(r.status, 200);
  t.deepEqual(r.body, { status: "ok" });
});

test("the no-op Ping needs no key over REST and gRPC", async (t) => {
  const r = await rest(server.url, "GET", "/ping");
  t.deepEqual([r.status, r.body], [200, { ok: true }]);
  const { stdout } = await run(BUF, ["curl", "--protocol", "grpc", "--http2-prior-knowledge", `${server.url}/billing.v1.HealthService/Ping`]);
  t.deepEqual(JSON.parse(stdout), { ok: true });
});

test("buf curl lists every method through server reflection and calls one over gRPC", async (t) => {
  const { stdout } = await run(BUF, ["curl", "--protocol", "grpc", "--http2-prior-knowledge", server.url, "--list-methods"]);
  const methods = stdout.trim().split("\n");
  for (const m of ["CreateSubject", "GetSubject", "UpdateSubject", "ListSubjects", "SearchSubjects", "DeleteSubject"]) {
    t.true(methods.includes(`billing.v1.SubjectService/${m}`), m);
  }
  for (const m of ["PricingMetricService/CreatePricingMetric", "RateCardService/CreateRateCard", "RateCardService/GetRateCard", "RateCatalogService/AddRates", "RateCatalogService/ListCatalogRates"]) {
    t.true(methods.includes(`billing.v1.${m}`), m);
  }
  const created = await run(BUF, [
    "curl",
    "--protocol",
    "grpc",
    "--http2-prior-knowledge",
    "-H",
    `X-API-Key: ${server.keys.a}`,
    "-d",
    '{"name":"Via buf","external_id":"buf-1"}',
    `${server.url}/billing.v1.SubjectService/CreateSubject`,
  ]);
  t.is(JSON.parse(created.stdout).subject.name, "Via buf");
  const got = await rest(server.url, "GET", "/subjects/buf-1", server.keys.a);
  t.is(got.body.name, "Via buf");
});

test("SIGTERM: stops accepting, finishes the request in flight, exits 0", async (t) => {
  const db = await createTestDatabase(STORE);
  const { keys, close } = await seedKeys(db.url);
  await close();
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    env: { ...process.env, DATABASE_URL: db.url, PORT: "0", LOG_LEVEL: "info" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  const port = await new Promise<number>((resolve, reject) => {
    child.stderr.on("data", (c: Buffer) => {
      log += c.toString();
      const m = /"msg":"listening","port":(\d+)/.exec(log);
      if (m) resolve(Number(m[1]));
    });
    child.on("exit", () => reject(new Error(`server exited early: ${log}`)));
  });

  // A request whose body is only half sent: it is in flight when the signal arrives.
  const body = JSON.stringify({ name: "In flight" });
  const sock = net.connect(port, "127.0.0.1");
  await new Promise((r) => sock.once("connect", r));
  let response = "";
  sock.on("data", (c) => (response += c.toString()));
  sock.write(`POST /subjects HTTP/1.1\r\nHost: x\r\nX-API-Key: ${keys.a}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`);
  await new Promise((r) => setTimeout(r, 200));
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  child.kill("SIGTERM");
  await new Promise((r) => setTimeout(r, 200));
  // New connections are refused while the old request is finishing.
  const refused = await new Promise<boolean>((r) => {
    const c = net.connect(port, "127.0.0.1");
    c.once("connect", () => {
      c.destroy();
      r(false);
    });
    c.once("error", () => r(true));
  });
  t.true(refused, "a new connection was accepted after SIGTERM");
  sock.write(body.slice(5));
  t.is(await exited, 0, log);
  t.regex(response, /^HTTP\/1\.1 200/);
  t.regex(response, /"name":"In flight"/);
  await db.drop();
});

for (const store of STORES) {
  test(`${store}: an unexpected failure is an internal error on REST and Connect, with nothing of its cause`, async (t) => {
    const s = await startTestServer(store);
    try {
      const created = await rest(s.url, "POST", "/subjects", s.keys.a, { name: "Ada" });
      t.is(created.status, 200);
      const id = (created.body as { id: string }).id;
      // The table the lookup reads goes away under the running server.
      const db = await createDatabase(s.db.url, { poolSize: 1 });
      await db.dataSource.initialize();
      await db.dataSource.query("ALTER TABLE subjects RENAME TO subjects_gone");
      await db.dataSource.destroy();

      const r = await rest(s.url, "GET", `/subjects/${id}`, s.keys.a);
      t.is(r.status, 500);
      // Nothing of the cause; only the request's id, which the log line with the cause carries too.
      t.deepEqual(r.body, {
        code: "internal",
        message: "internal error",
        details: [{ type: "google.rpc.RequestInfo", value: r.body.details[0]?.value, debug: { request_id: r.headers.get("x-request-id") } }],
      });

      const err = await t.throwsAsync(rpcClient(SubjectService, s.url, "connect", s.keys.a).getSubject({ subjectId: id }));
      t.is(err instanceof ConnectError && err.code, Code.Internal);
      t.is(err?.message, "[internal] internal error");
    } finally {
      await s.stop();
    }
  });
}
