/**
 * A late event committed while a run decides which finalized windows to look at again is billed
 * (MariaDB): the run reads the counts it keeps before the counts it compares with the last run's,
 * so an event committed between the two reads is either seen by the comparison (its window is
 * measured now) or left out of the kept counts (looked at again next run). Reading them the other
 * way round kept a count that held the event while its window was never measured: billed never.
 * The interleaving is made by a runner whose usage reads commit a late event right after the
 * comparison's count for January returns.
 */
import type { UsageMeter } from "../../src/billing/subscriptions/invoice-building.js";
import { createDatabase } from "../../src/db/datasource.js";
import { buildServices } from "../../src/wiring/services.js";
import { mysqlOnly } from "../helpers/mysql-only.js";
import { Scenario } from "../helpers/scenario.js";
import { startTestServer } from "../helpers/server.js";

mysqlOnly("mysql: a late event committed between a run's count reads is billed on a later run, once", async (t) => {
  const server = await startTestServer("mysql");
  const runner = await createDatabase(server.db.url, { poolSize: 4 });
  t.teardown(async () => {
    await runner.dataSource.destroy().catch(() => {});
    await server.stop();
  });
  const s = await Scenario.start(server, "2026-01-15T00:00:00Z", { invoiceGraceSeconds: 3600 });
  const m = await s.metric();
  const card = await s.card({
    usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: m, included_units: 0, price: { amount: { currency_code: "USD", value: "1" } } }],
  });
  const sub = (await s.subscribe({ rate_card_id: card })).subscription.id;
  let seq = 0;
  const send = (timestamp: string, n: string) =>
    s.call("POST", "/usage-events/batch", { events: [{ idempotency_key: `k${seq++}`, subject_id: s.subjectId, event_name: "usage", timestamp, data: { n } }] });
  await send("2026-01-20T00:00:00Z", "1");
  // January's window is finalized (Feb 15 + grace), then first checked at the March close.
  await s.advance("2026-02-15T02:00:00Z");
  await s.advance("2026-03-15T02:00:00Z");

  // The April close, by a runner whose comparison count of January lets a late January event commit just after it.
  await runner.dataSource.initialize();
  const april = new Date("2026-04-15T01:00:00Z");
  await runner.dataSource.query("UPDATE test_clocks SET frozen_time = ? WHERE id = ?", ["2026-04-15 01:00:00.000", s.clockId]);
  const engine = buildServices(
    runner,
    () => "http://localhost",
    () => april,
  ).engine;
  const usage = (engine.lateUsage as unknown as { usage: UsageMeter }).usage;
  const measure = usage.measure.bind(usage);
  let injected = false;
  usage.measure = async (metric, subjectId, from, to, dims) => {
    const out = await measure(metric, subjectId, from, to, dims);
    if (!injected && metric.aggregation.type === "count" && from.toISOString() === "2026-01-15T00:00:00.000Z" && to.toISOString() === "2026-02-15T00:00:00.000Z") {
      injected = true;
      await send("2026-01-21T00:00:00Z", "5");
    }
    return out;
  };
  await engine.closeDue(april, s.clockId);
  await engine.finalizeDue(april, s.clockId);
  t.true(injected, "the late event was sent between the run's count reads");

  // The May close (and any later one) bills it: 5 units of January, once.
  await s.advance("2026-06-15T02:00:00Z");
  const rows = (await runner.dataSource.query(
    "SELECT SUM(l.quantity) AS q, COUNT(*) AS n FROM invoice_lines l JOIN invoices i ON i.id = l.invoice_id WHERE l.kind = 'adjustment' AND i.subscription_id = ?",
    [sub],
  )) as { q: string | null; n: number }[];
  t.deepEqual([Number(rows[0]?.q ?? 0), Number(rows[0]?.n)], [5, 1], "January's late 5 units billed once");
});
