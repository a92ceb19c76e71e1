/**
 * Late usage billed exactly once under concurrency (MariaDB): two schedulers (two servers, each
 * with its own connection pool) run at once over 12 subscriptions whose finalized periods got late
 * events — at a cycle close (adjustment lines on the next invoice) and after the subscriptions
 * ended (final adjustment invoices). Each late unit is billed once: the recorded event counts on
 * the locked subscription row are the fence.
 */
import { buildServices } from "../../src/wiring/services.js";
import { createDatabase } from "../../src/db/datasource.js";
import { mysqlOnly } from "../helpers/mysql-only.js";
import { Scenario } from "../helpers/scenario.js";
import { startTestServer } from "../helpers/server.js";

const N = 12;

mysqlOnly("mysql: two runners racing over late usage of 12 subscriptions bill each late unit exactly once", async (t) => {
  const server = await startTestServer("mysql");
  try {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z", { invoiceGraceSeconds: 3600 });
    const m = await s.metric();
    const card = await s.card({
      usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: m, included_units: 0, price: { amount: { currency_code: "USD", value: "1" } } }],
    });
    const subjects: string[] = [];
    const subs: string[] = [];
    for (let i = 0; i < N; i++) {
      const subject = (await s.call("POST", "/subjects", { name: `c${i}`, test_clock_id: s.clockId })).id;
      subjects.push(subject);
      subs.push((await s.subscribe({ rate_card_id: card, subject_id: subject })).subscription.id);
    }
    let seq = 0;
    const send = async (timestamp: string, n: string) => {
      const events = subjects.map((subject_id) => ({ idempotency_key: `k${seq++}`, subject_id, event_name: "usage", timestamp, data: { n } }));
      await s.call("POST", "/usage-events/batch", { events });
    };
    await send("2026-01-20T00:00:00Z", "1");
    await s.advance("2026-02-15T02:00:00Z"); // January is invoiced and finalized
    await send("2026-01-21T00:00:00Z", "5"); // late for January

    const runners = await Promise.all([0, 1].map(() => createDatabase(server.db.url, { poolSize: 8 })));
    await Promise.all(runners.map((db) => db.dataSource.initialize()));
    const db = runners[0] as NonNullable<(typeof runners)[0]>;
    const moveClock = (to: string) => db.dataSource.query("UPDATE test_clocks SET frozen_time = ? WHERE id = ?", [to.replace("T", " ").replace("Z", ""), s.clockId]);
    const engines = (to: Date) =>
      runners.map(
        (r) =>
          buildServices(
            r,
            () => "http://localhost",
            () => to,
          ).engine,
      );

    // Both close February at once: each March invoice adjusts January by 5, once.
    const march = new Date("2026-03-15T01:00:00Z");
    await moveClock("2026-03-15T01:00:00.000Z");
    await Promise.all(engines(march).map(async (e) => [await e.closeDue(march, s.clockId), await e.finalizeDue(march, s.clockId)]));
    const adjusted = async () =>
      (await db.dataSource.query(
        "SELECT i.subscription_id AS sub, SUM(l.quantity) AS q, COUNT(*) AS n FROM invoice_lines l JOIN invoices i ON i.id = l.invoice_id WHERE l.kind = 'adjustment' GROUP BY i.subscription_id ORDER BY i.subscription_id",
      )) as { sub: string; q: string; n: number }[];
    const first = await adjusted();
    t.is(first.length, N);
    t.true(
      first.every((r) => Number(r.q) === 5 && Number(r.n) === 1),
      JSON.stringify(first),
    );

    // The subscriptions end; their final invoices finalize; then late events for their last period.
    for (const id of subs) await s.call("POST", `/subscriptions/${id}/cancel`, {});
    await s.advance("2026-03-15T03:00:00Z");
    await send("2026-03-15T00:30:00Z", "7");
    await Promise.all(engines(new Date("2026-03-15T03:00:00Z")).map((e) => e.billEndedLateUsage(s.clockId)));
    const second = await adjusted();
    t.true(
      second.every((r) => Number(r.q) === 12 && Number(r.n) === 2),
      JSON.stringify(second),
    );
    const finals = await db.dataSource.query("SELECT COUNT(*) AS n FROM invoices WHERE period_key LIKE 'adjustment:%'");
    t.is(Number(finals[0].n), N, "one final adjustment invoice per subscription");
    // Running again finds nothing new.
    t.is(await engines(new Date("2026-03-15T03:00:00Z"))[1]?.billEndedLateUsage(s.clockId), 0);
    await Promise.all(runners.map((r) => r.dataSource.destroy()));
  } finally {
    await server.stop();
  }
});
