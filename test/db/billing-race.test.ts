/**
 * Two schedulers (two servers, each with its own connection pool) close the same due cycles at
 * once on MariaDB: every subscription gets exactly one invoice per period.
 */
import { buildServices } from "../../src/wiring/services.js";
import { createDatabase } from "../../src/db/datasource.js";
import { Scenario } from "../helpers/scenario.js";
import { startTestServer } from "../helpers/server.js";
import { mysqlOnly } from "../helpers/mysql-only.js";

mysqlOnly("mysql: two runners racing over 40 due subscriptions bill each period exactly once", async (t) => {
  const server = await startTestServer("mysql");
  try {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { amount: { currency_code: "USD", value: 0 } } }] });
    for (let i = 0; i < 40; i++) await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, null);

    // Move the clock behind the API's back, so that only the two runners below close the cycles.
    const runners = await Promise.all([0, 1].map(() => createDatabase(server.db.url, { poolSize: 8 })));
    await Promise.all(runners.map((db) => db.dataSource.initialize()));
    const to = new Date("2026-03-15T00:00:00Z");
    await runners[0]?.dataSource.query("UPDATE test_clocks SET frozen_time = ? WHERE id = ?", ["2026-03-15 00:00:00.000", s.clockId]);
    const engines = runners.map(
      (db) =>
        buildServices(
          db,
          () => "http://localhost",
          () => to,
        ).engine,
    );
    const closed = await Promise.all(engines.map((e) => e.closeDue(to, s.clockId, 8)));
    t.is(closed[0] + closed[1], 80, `each of the 40 subscriptions closes two cycles (runners closed ${closed.join(" and ")})`);

    const db = runners[0] as NonNullable<(typeof runners)[0]>;
    const dupes = await db.dataSource.query("SELECT subscription_id, period_key, COUNT(*) AS n FROM invoices GROUP BY subscription_id, period_key HAVING COUNT(*) > 1");
    t.deepEqual(dupes, []);
    const perSub = await db.dataSource.query("SELECT subscription_id, COUNT(*) AS n FROM invoices GROUP BY subscription_id");
    t.is(perSub.length, 40);
    t.true(
      perSub.every((r: { n: unknown }) => Number(r.n) === 3),
      "cycle 0, 1 and 2",
    );
    const subs = await db.dataSource.query("SELECT cycle_index, period_start FROM subscriptions");
    t.true(subs.every((r: { cycle_index: number }) => Number(r.cycle_index) === 2));
    // Running again finds nothing due.
    t.is(await engines[1]?.closeDue(to, s.clockId), 0);
    await Promise.all(runners.map((r) => r.dataSource.destroy()));
  } finally {
    await server.stop();
  }
});
