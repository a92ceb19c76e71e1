/**
 * Dunning's last attempt is crash-safe (DESIGN §16): the attempt that fails last is committed
 * with the subscription's policy (cancel or pause) pending, and the policy runs after it. A
 * server killed (SIGKILL) between that commit and the policy — held there by a row lock this test
 * takes on the subscription, so the kill lands in that window — leaves the invoice open, its
 * three attempts counted, the subscription untouched; the next run of dunning (a clock advance on
 * another server on the same database) applies the policy and ends the invoice (uncollectible if
 * so configured), with no fourth charge and each event once. MariaDB only: the window is held by
 * InnoDB's row lock (SQLite's whole-file lock would stop the attempt too).
 */
import test from "ava";
import mysql from "mysql2/promise";
import { STORES, withDatabase } from "../helpers/db.js";
import { type PaymentDriver, testDriver } from "../helpers/payment-flows.js";
import type { Scenario } from "../helpers/scenario.js";
import { type TestServer, childServer, startTestServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

/** MariaDB only, one at a time (each kills a server of its own); reported as skipped without MariaDB. */
const mysqlSerial = STORES.includes("mysql") ? test.serial : test.skip;
const usd = (value: string) => ({ currency_code: "USD", value });
const eventsOf = async (s: Scenario, type: string, id: string) => ((await s.call("GET", `/events?types=${type}&limit=100`)).events as Json[]).filter((e) => e.data.id === id);

/** `npm start`'s process (src/main.ts) on the test server's database. */
const child = (server: TestServer) => childServer(server, {}, "ignore");

async function dunningRow(server: TestServer, invoiceId: string): Promise<{ attempt_count: number; status: string }> {
  const [row] = await withDatabase(server.db.url, (db) => db.dataSource.query("SELECT attempt_count, status FROM invoices WHERE id = ?", [invoiceId]));
  return { attempt_count: Number(row?.attempt_count), status: String(row?.status) };
}

for (const [policy, uncollectible, subscriptionStatus, event] of [
  ["cancel", true, "cancelled", "subscription.cancelled"],
  ["pause", false, "paused", "subscription.paused"],
] as const) {
  mysqlSerial(`mysql: killed between the last failed attempt and the policy (${policy}): the next run of dunning applies it, charging nothing more`, async (t) => {
    t.timeout(240_000);
    const server = await startTestServer("mysql");
    const d: PaymentDriver = testDriver(server);
    try {
      const s = await d.start(server);
      const rateCard = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: usd("4900") } }] });
      await d.subscribe(s, { rate_card_id: rateCard, fixed_rate_quantities: { seats: 1 } }, "visa");
      const [sub] = await s.subscriptions();
      await s.call("PATCH", "/payment-settings", { retry_schedule_days: [1, 2], set_retry_schedule: true, after_last_attempt: policy, mark_uncollectible: uncollectible });
      await d.replaceCard(s, "attach_then_fail");
      // Attempt 1 on Feb 15 (next Feb 16), attempt 2 on Feb 16 (next Feb 17: the last).
      await s.advance("2026-02-15T00:00:00Z");
      await s.advance("2026-02-16T12:00:00Z");
      const inv = await s.call("GET", `/invoices/${((await s.invoices()).at(-1) as Json).id}`);
      t.like(inv, { status: "open", attempt_count: 2, next_payment_attempt: "2026-02-17T00:00:00Z" });

      // The subscription's row held: the last attempt commits, the policy waits for the row; the server is killed there.
      const lock = await mysql.createConnection(server.db.url);
      const dying = await child(server);
      try {
        await lock.beginTransaction();
        await lock.query("SELECT id FROM subscriptions WHERE id = ? FOR UPDATE", [sub?.id]);
        const advancing = fetch(`${dying.url}/test-clocks/${s.clockId}/advance`, {
          method: "POST",
          headers: { "x-api-key": s.key, "content-type": "application/json" },
          body: JSON.stringify({ frozen_time: "2026-02-20T00:00:00Z" }),
        }).catch(() => undefined);
        const until = Date.now() + 120_000;
        while ((await dunningRow(server, inv.id)).attempt_count < 3) {
          if (Date.now() > until) throw new Error("the last attempt never committed");
          await new Promise((r) => setTimeout(r, 100));
        }
        dying.proc.kill("SIGKILL");
        t.is(await dying.exited, "SIGKILL");
        await advancing;
      } finally {
        await lock.rollback().catch(() => undefined);
        await lock.end();
        if (dying.proc.exitCode === null && dying.proc.signalCode === null) dying.proc.kill("SIGKILL");
      }
      // What the crash left: three attempts, the invoice open, the subscription untouched.
      t.deepEqual(await dunningRow(server, inv.id), { attempt_count: 3, status: "open" });
      t.is((await s.call("GET", `/subscriptions/${sub?.id}`)).status, "active");
      t.is((await eventsOf(s, "invoice.payment_failed", inv.id)).length, 3);

      // The next run of dunning (a clock advance on the other server): the policy applied, no fourth charge.
      await s.advance("2026-02-21T00:00:00Z");
      t.like(await s.call("GET", `/invoices/${inv.id}`), { status: uncollectible ? "uncollectible" : "open", attempt_count: 3, next_payment_attempt: null });
      t.is((await s.call("GET", `/subscriptions/${sub?.id}`)).status, subscriptionStatus);
      t.is((await eventsOf(s, event, sub?.id)).length, 1);
      t.deepEqual(
        (await eventsOf(s, "invoice.payment_failed", inv.id)).map((e) => [e.data.attempt_count, e.data.next_payment_attempt, e.data.status]),
        [
          [1, "2026-02-16T00:00:00Z", "open"],
          [2, "2026-02-17T00:00:00Z", "open"],
          [3, null, uncollectible ? "uncollectible" : "open"],
        ],
        "each failure announced once",
      );
      // Done: later runs change nothing.
      await s.advance("2026-02-25T00:00:00Z");
      t.like(await s.call("GET", `/invoices/${inv.id}`), { attempt_count: 3, next_payment_attempt: null });
      t.is((await eventsOf(s, event, sub?.id)).length, 1);
    } finally {
      await server.stop();
    }
  });
}
