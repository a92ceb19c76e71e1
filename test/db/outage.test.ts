/**
 * A database outage, simulated with a TCP proxy between the server and MariaDB (the shared
 * server itself is never stopped): while the proxy holds every byte (a frozen server) /readyz
 * answers 503 rather than hanging (and /healthz, liveness, stays 200); once the proxy is gone (connections cut, nothing listening)
 * every protocol answers `unavailable` (503) without the driver's words, never `internal`.
 */
import net from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";
import test from "ava";
import { createDatabase } from "../../src/db/datasource.js";
import { SubjectService } from "../../src/gen/billing/v1/subject_service_pb.js";
import { ok, rest, reasonOf, rpcClient } from "../helpers/clients.js";
import { createTestDatabase } from "../helpers/db.js";
import { Proxy, proxied } from "../helpers/db-proxy.js";
import type { Json } from "../helpers/subjects-api.js";
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

/** The statements' time limit the frozen-database tests run with (DATABASE_STATEMENT_TIMEOUT_MS). */
const LIMIT_MS = 1_000;
/**
 * How long a test keeps the database frozen at most: far beyond the limit, so that an answer that
 * arrives while still frozen came from the limit, never from the end of the freeze.
 */
const FREEZE_MS = 30_000;

const usageEvent = (subject: string, key: string) => ({
  idempotency_key: key,
  subject_id: subject,
  event_name: "api",
  data: { n: 1 },
  timestamp: "2026-03-01T10:00:00Z",
});

mysqlOnly(
  "mysql: with the database frozen, reads, writes and ingest answer 503 unavailable while it is still frozen; once it answers again, the same calls succeed and retried events count once",
  async (t) => {
    const db = await createTestDatabase("mysql");
    const seeded = await seedKeys(db.url);
    const { proxy, url } = await proxied(db.url);
    const app = await startAppOn(url, { DATABASE_STATEMENT_TIMEOUT_MS: String(LIMIT_MS), SCHEDULER_INTERVAL_MS: "0" });
    const key = seeded.keys.a;
    const target = { url: app.url };
    let thawGuard: NodeJS.Timeout | undefined;
    try {
      const subject = await ok(target, key, "POST", "/subjects", { external_id: "frozen-1" });
      const metric = await ok(target, key, "POST", "/pricing-metrics", { event_name: "api", name: "API", unit: "call", dimensions: [], aggregation: { aggregation_type: "count" } });
      await ok(target, key, "POST", "/usage-events", usageEvent(subject.id, "before"));
      const batch = { events: Array.from({ length: 20 }, (_, i) => usageEvent(subject.id, `during-${i}`)) };
      const calls: [string, () => Promise<{ status: number; body: Json }>][] = [
        ["read", () => rest(app.url, "GET", `/subjects/${subject.id}`, key)],
        ["write", () => rest(app.url, "POST", "/subjects", key, { external_id: "frozen-2" })],
        ["ingest", () => rest(app.url, "POST", "/usage-events", key, usageEvent(subject.id, "during-single"))],
        ["batch", () => rest(app.url, "POST", "/usage-events/batch", key, batch)],
      ];

      // Frozen: connections are accepted and nothing comes back (the pool's connections stay open).
      proxy.freeze();
      let frozen = true;
      thawGuard = setTimeout(() => {
        frozen = false;
        proxy.thaw();
      }, FREEZE_MS);
      const answered = await Promise.all(
        calls.map(async ([name, call]) => {
          const r = await call();
          return { name, status: r.status, code: r.body?.code, reason: reasonOf(r.body), whileFrozen: frozen };
        }),
      );
      const grpc = await rpcClient(SubjectService, app.url, "grpc", key)
        .getSubject({ subjectId: subject.id })
        .then(
          () => "ok",
          (err: unknown) => (err instanceof ConnectError ? Code[err.code] : String(err)),
        );
      const grpcWhileFrozen = frozen;
      t.deepEqual(
        answered,
        calls.map(([name]) => ({ name, status: 503, code: "unavailable", reason: "DATABASE_UNAVAILABLE", whileFrozen: true })),
      );
      t.is(grpc, "Unavailable");
      t.true(grpcWhileFrozen, "gRPC answered while the database was still frozen");

      // Thawed: the same server serves again (the connections that were stuck are not reused).
      clearTimeout(thawGuard);
      proxy.thaw();
      t.is((await rest(app.url, "GET", `/subjects/${subject.id}`, key)).status, 200);
      // The write answered 503 may still have been applied (its statement had left before the
      // freeze and the database ran it once it could): the same call then finds it. A 503 never
      // says "not done"; an idempotency key makes the retry safe.
      const sameWrite = await rest(app.url, "POST", "/subjects", key, { external_id: "frozen-2" });
      t.true(sameWrite.status === 200 || (sameWrite.status === 409 && sameWrite.body.code === "already_exists"), JSON.stringify(sameWrite.body));
      t.is((await rest(app.url, "POST", "/subjects", key, { external_id: "frozen-3" })).status, 200);
      // The events sent during the freeze, sent again with the same keys: each accepted (its first
      // write was rolled back) or duplicate (it had committed), never lost, never counted twice.
      const single = await ok(target, key, "POST", "/usage-events", usageEvent(subject.id, "during-single"));
      t.true(["accepted", "duplicate"].includes(single.status), single.status);
      const again = await ok(target, key, "POST", "/usage-events/batch", batch);
      t.deepEqual(
        again.results.filter((r: Json) => !["accepted", "duplicate"].includes(r.status)),
        [],
      );
      const summary = await ok(target, key, "POST", `/pricing-metrics/${metric.id}/summary`, {
        subject_id: subject.id,
        period: { start: "2000-01-01T00:00:00Z", end: "2100-01-01T00:00:00Z" },
      });
      t.is(summary[0].value, String(1 + 1 + batch.events.length), "the event before, the single one and the batch, each once");
    } finally {
      clearTimeout(thawGuard);
      proxy.thaw();
      await app.stop();
      await proxy.shut();
      await seeded.close();
      await db.drop();
    }
  },
);

test("sqlite: a database file locked by another connection for longer than the limit answers writes 503 unavailable, then serves again once it is free", async (t) => {
  const db = await createTestDatabase("sqlite");
  const seeded = await seedKeys(db.url);
  const app = await startAppOn(db.url, { DATABASE_STATEMENT_TIMEOUT_MS: String(LIMIT_MS), SCHEDULER_INTERVAL_MS: "0" });
  const key = seeded.keys.a;
  // Another connection to the same file (as a second process would be) holds its write lock.
  const other = await createDatabase(db.url, { poolSize: 1 });
  await other.dataSource.initialize();
  let locked = false;
  try {
    await other.dataSource.query("BEGIN IMMEDIATE");
    locked = true;
    const r = await rest(app.url, "POST", "/subjects", key, { external_id: "locked" });
    t.is(r.status, 503, JSON.stringify(r.body));
    t.is(r.body.code, "unavailable");
    t.is(reasonOf(r.body), "DATABASE_UNAVAILABLE");
    await other.dataSource.query("ROLLBACK");
    locked = false;
    t.is((await rest(app.url, "POST", "/subjects", key, { external_id: "locked" })).status, 200);
  } finally {
    if (locked) await other.dataSource.query("ROLLBACK");
    await other.close();
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
