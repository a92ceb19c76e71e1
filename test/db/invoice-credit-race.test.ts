/**
 * DESIGN §14: two finalizations can never spend the same credit. On MariaDB, ten drafts of one
 * subject finalize at once from eight servers (each its own connection pool, every server trying
 * every draft) against one grant that covers only part of them: the grant gives exactly what it
 * has, each invoice's credits and amount due add up to its total, and the ledger matches.
 */
import type { Invoice } from "../../src/billing/subscriptions/types.js";
import { createDatabase } from "../../src/db/datasource.js";
import { buildServices } from "../../src/wiring/services.js";
import { seats, simple, usd } from "../helpers/catalog-bodies.js";
import { mysqlOnly } from "../helpers/mysql-only.js";
import { Scenario } from "../helpers/scenario.js";
import { startTestServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const SUBSCRIPTIONS = 10;
const SERVERS = 8;

mysqlOnly("mysql: ten drafts of one subject finalized at once by eight servers spend one grant exactly once", async (t) => {
  const server = await startTestServer("mysql");
  try {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z", { invoiceGraceSeconds: 3600 });
    const m = await s.metric();
    const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [simple(m, usd(1))] });
    // The first subscription's checkout puts a card on file; the others start at once.
    await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
    for (let i = 1; i < SUBSCRIPTIONS; i++) await s.call("POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
    // 3,500 of credit for ten invoices of 1,000 each (the next period's seat; no usage).
    const grant = (await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: { currency_code: "USD", value: "3500" }, category: "promotional" })).credit_grant.id;
    await s.advance("2026-02-15T00:00:00Z");
    const drafts = (await s.invoices()).filter((i) => i.status === "draft");
    t.is(drafts.length, SUBSCRIPTIONS);

    // The clock passes the grace period behind the API's back: only the servers below finalize.
    const runners = await Promise.all(Array.from({ length: SERVERS }, () => createDatabase(server.db.url, { poolSize: 4 })));
    // Their pools ended however the test ends (an open pool keeps the worker, and the run, alive).
    t.teardown(() => Promise.all(runners.map((r) => r.dataSource.destroy().catch(() => undefined))));
    await Promise.all(runners.map((db) => db.dataSource.initialize()));
    const to = new Date("2026-02-15T02:00:00Z");
    await runners[0]?.dataSource.query("UPDATE test_clocks SET frozen_time = ? WHERE id = ?", ["2026-02-15 02:00:00.000", s.clockId]);
    const engines = runners.map(
      (db) =>
        buildServices(
          db,
          () => "http://localhost",
          () => to,
        ).engine,
    );
    // The drafts as the engine reads them, by the token of their hosted URL.
    const found = await Promise.all(drafts.map(async (d) => (await engines[0]?.stores.invoices.byToken(new URL(d.hosted_url).pathname.split("/").at(-1) as string)) as Invoice));
    const results = await Promise.all(engines.flatMap((e) => found.map((d) => e.drafts.finalizeDraft(d, to).catch((err: unknown) => err))));
    t.deepEqual(
      results.filter((r) => r instanceof Error),
      [],
    );
    t.is(results.filter((r) => r !== undefined).length, SUBSCRIPTIONS, "each draft finalized once");

    const after = (await s.invoices()).slice(-SUBSCRIPTIONS);
    const applied = after.map((i) => (i.credits_applied as Json[]).reduce((acc, c) => acc + Number(c.amount.value), 0));
    // 3,500 over invoices of 1,000: three paid in full, one 500, the others none; 3,500 in all.
    t.is(
      applied.reduce((a, b) => a + b, 0),
      3500,
    );
    t.deepEqual(
      [...applied].sort((a, b) => b - a),
      [1000, 1000, 1000, 500, 0, 0, 0, 0, 0, 0],
    );
    for (const i of after) t.is(Number(i.amount_due.value) + (i.credits_applied as Json[]).reduce((acc, c) => acc + Number(c.amount.value), 0), Number(i.total_amount.value));
    const g = await s.call("GET", `/credit-grants/${grant}`);
    t.deepEqual([g.status, g.remaining_amount.value], ["depleted", "0"]);
    const ledger = (await s.call("GET", `/subjects/${s.subjectId}/credit-ledger?limit=100`)).entries as Json[];
    t.deepEqual(ledger.filter((e) => e.entry_type === "application").length, 4);
    t.is(
      ledger.reduce((acc, e) => acc + Number(e.amount.value), 0),
      0,
    );
  } finally {
    await server.stop();
  }
});
