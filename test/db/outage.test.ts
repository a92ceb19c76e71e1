/**
 * A database outage, simulated with a TCP proxy between the server and MariaDB (the shared
 * server itself is never stopped): while the proxy holds every byte (a frozen server) /readyz
 * answers 503 rather than hanging (and /healthz, liveness, stays 200); once the proxy is gone (connections cut, nothing listening)
 * every protocol answers `unavailable` (503) without the driver's words, never `internal`.
 */
import net from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";
import { SubjectService } from "../../src/gen/billing/v1/subject_service_pb.js";
import { rest, reasonOf, rpcClient } from "../helpers/clients.js";
import { createTestDatabase } from "../helpers/db.js";
import { Proxy } from "../helpers/db-proxy.js";
import { seedKeys, startAppOn } from "../helpers/server.js";
import { mysqlOnly } from "../helpers/mysql-only.js";

mysqlOnly("mysql: a frozen database is a bounded 503 on /readyz; a database that is gone is 503 unavailable on REST, Connect and gRPC", async (t) => {
  const db = await createTestDatabase("mysql");
  const seeded = await seedKeys(db.url);
  const direct = new URL(db.url);
  const proxy = new Proxy({ host: direct.hostname, port: Number(direct.port || 3306) });
  await proxy.listen();
  const viaProxy = new URL(db.url);
  viaProxy.hostname = "127.0.0.1";
  viaProxy.port = String(proxy.port);
  // Keys are looked up on every call, so that the lookup itself meets the outage.
  const app = await startAppOn(viaProxy.toString(), { API_KEY_CACHE_MS: "0", SCHEDULER_INTERVAL_MS: "0" });
  const key = seeded.keys.a;
  try {
    t.is((await rest(app.url, "GET", "/readyz")).status, 200);
    t.is((await rest(app.url, "POST", "/subjects", key, { name: "Ada" })).status, 200);

    // Frozen: connections are accepted, nothing comes back. Several checks at once share one.
    proxy.freeze();
    const frozen = await Promise.all([0, 1, 2].map(() => rest(app.url, "GET", "/readyz")));
    t.deepEqual(
      frozen.map((r) => r.status),
      [503, 503, 503],
    );
    t.deepEqual(frozen[0]?.body, { status: "not ready", checks: { database: "unavailable", migrations: "ok", scheduler: "off" } });
    t.is((await rest(app.url, "GET", "/readyz")).status, 503, "a second round is bounded too");
    t.is((await rest(app.url, "GET", "/healthz")).status, 200, "liveness does not look at the database");
    proxy.thaw();
    t.is((await rest(app.url, "GET", "/readyz")).status, 200, "ready again once the database answers");
    t.is((await rest(app.url, "GET", "/subjects", key)).status, 200);

    // Gone: every connection is cut and nothing listens any more.
    await proxy.shut();
    for (const [method, path, body] of [
      ["GET", "/subjects", undefined],
      ["POST", "/subjects", { name: "Grace" }],
    ] as const) {
      const r = await rest(app.url, method, path, key, body);
      t.is(r.status, 503, `${method} ${path}: ${JSON.stringify(r.body)}`);
      t.is(r.body.code, "unavailable");
      t.is(r.body.message, "the database is unavailable; try again later");
      t.is(reasonOf(r.body), "DATABASE_UNAVAILABLE");
      t.notRegex(JSON.stringify(r.body), /ECONNREFUSED|127\.0\.0\.1|PROTOCOL|mysql/i);
    }
    for (const protocol of ["connect", "grpc", "grpcweb"] as const) {
      const err = await t.throwsAsync(rpcClient(SubjectService, app.url, protocol, key).listSubjects({ limit: 5 }));
      t.true(err instanceof ConnectError, protocol);
      t.is((err as ConnectError).code, Code.Unavailable, `${protocol}: ${err?.message}`);
      t.is((err as ConnectError).rawMessage, "the database is unavailable; try again later");
    }
    // Connect's own HTTP mapping: 503.
    const connect = await fetch(`${app.url}/billing.v1.SubjectService/ListSubjects`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": key },
      body: "{}",
    });
    t.is(connect.status, 503);
    t.is(((await connect.json()) as { code: string }).code, "unavailable");
    t.is((await rest(app.url, "GET", "/readyz")).status, 503);
  } finally {
    await app.stop();
    await seeded.close();
    await db.drop();
  }
});

mysqlOnly("mysql: a server pointed at a port where nothing listens does not start, and says why", async (t) => {
  // A port that was free a moment ago: nothing listens there.
  const probe = net.createServer();
  await new Promise<void>((r) => probe.listen(0, "127.0.0.1", () => r()));
  const port = (probe.address() as net.AddressInfo).port;
  await new Promise<void>((r) => probe.close(() => r()));
  const err = await t.throwsAsync(startAppOn(`mysql://root@127.0.0.1:${port}/nothing`));
  t.regex(String((err as { code?: string })?.code ?? err?.message), /ECONNREFUSED/);
});
