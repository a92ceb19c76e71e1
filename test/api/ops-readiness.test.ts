/**
 * Readiness (GET /readyz and grpc.health.v1.Health) against a database that stops and comes back,
 * through the TCP proxy of test/helpers/db-proxy.ts (the shared MariaDB is never touched): 200
 * while it answers, 503 naming the database once it is gone (while /healthz, liveness, stays
 * 200), and 200 again once it is back. The checks themselves (migrations, a stuck scheduler) are
 * tested on their own in test/unit/ops-health.test.ts.
 */
import { rest } from "../helpers/clients.js";
import { createTestDatabase } from "../helpers/db.js";
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
