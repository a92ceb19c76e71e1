/**
 * Cancellations and rate-card changes racing cycle closes on MariaDB. Fifty subscriptions on a
 * test clock have a cycle due; while a second runner (its own engine and connection pool) and
 * clock advances close those cycles, the API cancels (now, or at the end of the cycle) or changes
 * the rate card of every one of them. Every call ends in success or `aborted` (409: retryable),
 * never a 400 or a 500; and nothing is billed twice: each subscription's invoiced usage is
 * exactly its subject's ingested usage, and each fixed charge appears once per cycle.
 */
import { buildServices } from "../../src/wiring/services.js";
import { createDatabase } from "../../src/db/datasource.js";
import { rest } from "../helpers/clients.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { startTestServer } from "../helpers/server.js";
import { mysqlOnly } from "../helpers/mysql-only.js";

const usd = (value: number) => ({ amount: { currency_code: "USD", value } });
const N = 50;
/** Units per subject: one event in each place, powers of two so a usage billed twice or never shows. */
const EVENTS: [string, number][] = [
  ["2026-01-20T00:00:00Z", 1], // first cycle: billed by the close at Feb 15
  ["2026-02-14T23:59:59Z", 2],
  ["2026-02-16T00:00:00Z", 4], // second cycle, before the calls: billed by the final/change invoice or the close at Mar 15
  ["2026-02-19T12:00:00Z", 8],
];
const USED = EVENTS.reduce((n, [, u]) => n + u, 0);

type Op = "cancel_now" | "cancel_at_end" | "change";

mysqlOnly("mysql: 50 cancels and rate-card changes racing cycle closes end in success or aborted, and bill every period once", async (t) => {
  const server = await startTestServer("mysql", { SCHEDULER_INTERVAL_MS: "0" });
  try {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const metric = await s.metric();
    const usage = { usage_based_rate_type: "simple", code: "calls", name: "Calls", pricing_metric_id: metric, included_units: 0, price: usd(1) };
    const cardA = await s.card({ name: "Basic", fixed_rates: [{ code: "seats", name: "Seats", price: usd(10) }], usage_based_rates: [usage] });
    const cardB = await s.card({ name: "Pro", fixed_rates: [{ code: "seats", name: "Seats Pro", price: usd(20) }], usage_based_rates: [usage] });

    // One subject per subscription (usage is per subject), each with a card on file.
    const subs: { id: string; subject: string; op: Op }[] = [];
    for (let i = 0; i < N; i++) {
      const subject = (await s.call("POST", "/subjects", { name: `Customer ${i}`, test_clock_id: s.clockId })).id;
      const r = await s.subscribe({ subject_id: subject, rate_card_id: cardA, fixed_rate_quantities: { seats: 1 } }, null);
      if (r.result_type !== "success") t.is((await s.payCheckout(r.action.checkout_url, CARD_OK)).status, 303);
      const sub = (await s.call("GET", `/subscriptions?subject_id=${subject}&limit=1`)).subscriptions[0];
      subs.push({ id: sub.id, subject, op: (["cancel_now", "cancel_at_end", "change"] as const)[i % 3] as Op });
      const events = EVENTS.map(([timestamp, n], k) => ({ idempotency_key: `${subject}-${k}`, subject_id: subject, event_name: "usage", timestamp, data: { n } }));
      t.is((await s.call("POST", "/usage-events/batch", { events })).rejected, 0);
    }

    // The clock moves past the cycle end behind the API's back: every cycle is due, none closed.
    const runner = await createDatabase(server.db.url, { poolSize: 8 });
    await runner.dataSource.initialize();
    const raceAt = new Date("2026-02-20T00:00:00Z");
    await runner.dataSource.query("UPDATE test_clocks SET frozen_time = ? WHERE id = ?", ["2026-02-20 00:00:00.000", s.clockId]);
    const engine = buildServices(
      runner,
      () => "http://localhost",
      () => raceAt,
    ).engine;

    const calls = subs.map(async (sub, i) => {
      await new Promise((r) => setTimeout(r, (i * 7) % 40));
      const path = sub.op === "change" ? `/subscriptions/${sub.id}/change-rate-card` : `/subscriptions/${sub.id}/cancel`;
      const body = sub.op === "change" ? { rate_card_id: cardB, upgrade_behavior: "prorate" } : sub.op === "cancel_at_end" ? { cancel_at_end_of_cycle: true } : undefined;
      const r = await rest(server.url, "POST", path, s.key, body);
      return { ...sub, status: r.status, body: r.body };
    });
    const closers = [
      engine.closeDue(raceAt, s.clockId, 8),
      (async () => {
        await new Promise((r) => setTimeout(r, 15));
        return engine.closeDue(raceAt, s.clockId, 2);
      })(),
      s.call("POST", `/test-clocks/${s.clockId}/advance`, { frozen_time: raceAt.toISOString() }),
    ];
    const results = await Promise.all(calls);
    await Promise.all(closers);
    await runner.dataSource.destroy();

    const unexpected = results.filter((r) => r.status !== 200 && !(r.status === 409 && r.body.code === "aborted"));
    t.deepEqual(unexpected, [], "every call succeeds or is aborted (409)");
    const aborted = results.filter((r) => r.status === 409).length;
    t.log(`${N - aborted} succeeded, ${aborted} aborted`);
    // Lost races are retried inside the service: without that, about a third of these calls are
    // aborted (measured with one attempt); with it, a call gives up only after losing eight times.
    t.true(aborted <= 2, `${aborted} of ${N} calls aborted`);
    // An aborted call changed nothing: its subscription is as it was, active on card A, not flagged.
    // (A cancellation once committed and was then answered 409, because settling its final
    // invoice afterwards lost a deadlock; settling no longer fails the call that committed.)
    for (const r of results.filter((x) => x.status === 409)) {
      t.like(await s.call("GET", `/subscriptions/${r.id}`), { status: "active", cancels_at_end_of_cycle: false, rate_card_id: cardA }, `${r.id} (${r.op}): aborted, unchanged`);
    }
    for (const r of results.filter((x) => x.status === 200)) {
      const sub = r.op === "change" ? r.body.result.subscription : r.body;
      if (r.op === "cancel_now") t.like(sub, { status: "cancelled", cancels_at_end_of_cycle: false });
      if (r.op === "cancel_at_end") t.like(sub, { status: "active", cancels_at_end_of_cycle: true });
      if (r.op === "change") t.is(sub.rate_card_id, cardB);
    }

    // Run everything on to the end: cycles close at Mar 15, then whatever is still active is cancelled now.
    await s.advance("2026-04-01T00:00:00Z");
    for (const sub of subs) {
      const current = await s.call("GET", `/subscriptions/${sub.id}`);
      if (current.status === "active") await s.call("POST", `/subscriptions/${sub.id}/cancel`);
    }

    const check = await createDatabase(server.db.url, { poolSize: 2 });
    await check.dataSource.initialize();
    try {
      // Every card was good: every invoice ended paid (a charge whose paid mark lost a deadlock was written again).
      const unpaid = await check.dataSource.query("SELECT subscription_id, period_key, status FROM invoices WHERE status <> 'paid'");
      t.deepEqual(unpaid, [], "every invoice is paid");
      const dupes = await check.dataSource.query("SELECT subscription_id, period_key FROM invoices GROUP BY subscription_id, period_key HAVING COUNT(*) > 1");
      t.deepEqual(dupes, []);
      const lines: { subscription_id: string; period_key: string; description: string; quantity: string }[] = await check.dataSource.query(
        "SELECT i.subscription_id, i.period_key, l.description, l.quantity FROM invoices i JOIN invoice_lines l ON l.invoice_id = i.id",
      );
      for (const r of results) {
        const mine = lines.filter((l) => l.subscription_id === r.id);
        const used = mine.filter((l) => l.description === "Calls").reduce((n, l) => n + Number(l.quantity), 0);
        t.is(used, USED, `${r.id} (${r.op}, ${r.status}): every unit billed exactly once`);
        const seats = mine
          .filter((l) => l.description === "Seats")
          .map((l) => l.period_key)
          .sort();
        const pro = mine
          .filter((l) => l.description === "Seats Pro")
          .map((l) => l.period_key)
          .sort();
        const done = r.status === 200;
        // Fixed charges in advance: cycle 0 and 1 for everyone; cycle 2 (Mar 15) on the card in force then, unless it was cancelled.
        const expectSeats = done && r.op !== "change" ? ["cycle:0", "cycle:1"] : done ? ["cycle:0", "cycle:1"] : ["cycle:0", "cycle:1", "cycle:2"];
        t.deepEqual(seats, expectSeats, `${r.id} (${r.op}, ${r.status}): Seats once per cycle`);
        t.deepEqual(pro, done && r.op === "change" ? ["cycle:2"] : [], `${r.id} (${r.op}, ${r.status}): Seats Pro once per cycle`);
        const final = (await check.dataSource.query("SELECT status, cancels_at_end_of_cycle FROM subscriptions WHERE id = ?", [r.id]))[0];
        t.is(final.status, "cancelled");
        if (done && r.op === "cancel_now") t.is(Number(final.cancels_at_end_of_cycle), 0, `${r.id}: cancelled now`);
        if (done && r.op === "cancel_at_end") t.is(Number(final.cancels_at_end_of_cycle), 1, `${r.id}: ended with its cycle`);
      }
    } finally {
      await check.dataSource.destroy();
    }
  } finally {
    await server.stop();
  }
});
