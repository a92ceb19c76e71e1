/**
 * Readiness (GET /readyz and grpc.health.v1.Health) against a database that stops and comes back,
 * through the TCP proxy of test/helpers/db-proxy.ts (the shared MariaDB is never touched): 200
 * while it answers, 503 naming the database once it is gone (while /healthz, liveness, stays
 * 200), and 200 again once it is back; and migrations not applied (RUN_MIGRATIONS=false) until
 * they are. A stuck scheduler is tested on its own in test/unit/ops-health.test.ts.
 */
import test from "ava";
import { rest } from "../helpers/clients.js";
import { STORES, createTestDatabase } from "../helpers/db.js";
import { proxied } from "../helpers/db-proxy.js";
import { mysqlOnly } from "../helpers/mysql-only.js";
import { grpcHealth, grpcUnary } from "../helpers/ops.js";
import { seedKeys, startAppOn, untilHealthy } from "../helpers/server.js";

mysqlOnly("mysql: /readyz and the gRPC health service flip to 503 / NOT_SERVING when the database stops and back when it returns", async (t) => {
  const db = await createTestDatabase("mysql");
  const seeded = await seedKeys(db.url);
  const { proxy, url } = await proxied(db.url);
  const app = await startAppOn(url, { SCHEDULER_INTERVAL_MS: "1000" });
  const health = grpcHealth(app.url);
  const status = async () => (await grpcUnary<{ status: string }>(health, "Check", { service: "" })).ok?.status;
  try {
    await untilHealthy(app.url);
    const up = await rest(app.url, "GET", "/readyz");
    t.is(up.status, 200);
    t.deepEqual(up.body, { status: "ready", checks: { database: "ok", migrations: "ok", scheduler: "ok" } });
    t.is(await status(), "SERVING");

    // The database stops: connections are cut and refused.
    const port = proxy.port;
    await proxy.shut();
    const down = await rest(app.url, "GET", "/readyz");
    t.is(down.status, 503);
    t.deepEqual(down.body, { status: "not ready", checks: { database: "unavailable", migrations: "ok", scheduler: "ok" } });
    t.is(await status(), "NOT_SERVING");
    t.is((await rest(app.url, "GET", "/healthz")).status, 200, "liveness does not look at the database");
    t.is((await rest(app.url, "GET", "/subjects", seeded.keys.a)).status, 503);

    // It comes back on the same address.
    await proxy.listen(port);
    await untilHealthy(app.url);
    t.is((await rest(app.url, "GET", "/readyz")).status, 200);
    t.is(await status(), "SERVING");
    t.is((await rest(app.url, "GET", "/subjects", seeded.keys.a)).status, 200);
  } finally {
    health.close();
    await app.stop();
    await proxy.shut();
    await seeded.close();
    await db.drop();
  }
});

test("with RUN_MIGRATIONS=false, /readyz is 503 naming the migrations until they are applied, then 200", async (t) => {
  const store = STORES.includes("sqlite") ? "sqlite" : (STORES[0] ?? "sqlite");
  const db = await createTestDatabase(store);
  const app = await startAppOn(db.url, { RUN_MIGRATIONS: "false", SCHEDULER_INTERVAL_MS: "0" });
  try {
    const pending = await rest(app.url, "GET", "/readyz");
    t.is(pending.status, 503);
    t.deepEqual(pending.body, { status: "not ready", checks: { database: "ok", migrations: "pending", scheduler: "off" } });
    t.is((await rest(app.url, "GET", "/healthz")).status, 200);
    // Applied from elsewhere (as the CLI or another server would).
    const seeded = await seedKeys(db.url);
    await seeded.close();
    const ready = await rest(app.url, "GET", "/readyz");
    t.is(ready.status, 200);
    t.deepEqual(ready.body, { status: "ready", checks: { database: "ok", migrations: "ok", scheduler: "off" } });
  } finally {
    await app.stop();
    await db.drop();
  }
});
