/**
 * A cancel (or change, or pause) of a subscription whose period ended before the scheduler closed
 * it first closes that cycle (SubscriptionChanges.caughtUp), then makes its own change. The close
 * is the scheduler's work, made the same whoever triggers it: it does not mark the call's
 * Idempotency-Key (DESIGN §12). So a cancel that fails after the close (here a trigger refuses the
 * subscription's move to `cancelled`, as a failover at that moment would) is run again by a retry
 * with the same key, rather than answered IDEMPOTENCY_OUTCOME_LOST while the subscription stays
 * active and billed. The cycle is closed once. Both stores; each test on its own server (a
 * trigger refuses the write for every call on it).
 *
 * A test clock's advance is the scheduler's work throughout: advanced again to the same time, it
 * runs what is left. An advance that failed after moving the clock and closing the cycle (a trigger
 * refuses its last write, the clock set `ready`) is run again by a retry with its key.
 */
import test from "ava";
import { STORES, withDatabase } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { startTestServer } from "../helpers/server.js";

const refuseCancel = (store: string) =>
  store === "mysql"
    ? "CREATE TRIGGER refuse_cancel BEFORE UPDATE ON subscriptions FOR EACH ROW BEGIN IF NEW.status = 'cancelled' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused'; END IF; END"
    : "CREATE TRIGGER refuse_cancel BEFORE UPDATE ON subscriptions WHEN NEW.status = 'cancelled' BEGIN SELECT RAISE(ABORT, 'refused'); END";

async function cancel(s: Scenario, id: string, idempotencyKey: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${s.server.url}/subscriptions/${id}/cancel`, {
    method: "POST",
    headers: { "x-api-key": s.key, "content-type": "application/json", "idempotency-key": idempotencyKey },
    body: "{}",
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const refuseReady = (store: string) =>
  store === "mysql"
    ? "CREATE TRIGGER refuse_ready BEFORE UPDATE ON test_clocks FOR EACH ROW BEGIN IF NEW.status = 'ready' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused'; END IF; END"
    : "CREATE TRIGGER refuse_ready BEFORE UPDATE ON test_clocks WHEN NEW.status = 'ready' BEGIN SELECT RAISE(ABORT, 'refused'); END";

async function advance(s: Scenario, to: string, idempotencyKey: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${s.server.url}/test-clocks/${s.clockId}/advance`, {
    method: "POST",
    headers: { "x-api-key": s.key, "content-type": "application/json", "idempotency-key": idempotencyKey },
    body: JSON.stringify({ frozen_time: to }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

for (const store of STORES) {
  test(`${store}: a clock advance that failed after moving the clock and closing the cycle finishes on a retry with the same key`, async (t) => {
    const server = await startTestServer(store, { SCHEDULER_INTERVAL_MS: "0" });
    try {
      const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
      const card = await s.card({ fixed_rates: [{ code: "base", name: "Base", price: { amount: { currency_code: "USD", value: "10.00" } } }] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { base: 1 } });
      const before = (await s.invoices()).length;
      await withDatabase(server.db.url, (db) => db.dataSource.query(refuseReady(store)));
      let first: { status: number; body: Record<string, unknown> };
      try {
        first = await advance(s, "2026-02-10T00:00:00Z", "advance-cut-short");
      } finally {
        await withDatabase(server.db.url, (db) => db.dataSource.query("DROP TRIGGER refuse_ready"));
      }
      t.true(first.status >= 500, `the advance failed: ${first.status} ${JSON.stringify(first.body)}`);
      t.like(await s.call("GET", `/test-clocks/${s.clockId}`), { frozen_time: "2026-02-10T00:00:00Z", status: "advancing" });
      t.is((await s.invoices()).length, before + 1, "January's cycle was closed before the advance failed");

      const retry = await advance(s, "2026-02-10T00:00:00Z", "advance-cut-short");
      t.is(retry.status, 200, JSON.stringify(retry.body));
      t.like(retry.body, { frozen_time: "2026-02-10T00:00:00Z", status: "ready" });
      t.is((await s.invoices()).length, before + 1, "the cycle closed once");
      t.deepEqual(await advance(s, "2026-02-10T00:00:00Z", "advance-cut-short"), retry, "the retry's answer is stored");
    } finally {
      await server.stop();
    }
  });

  test(`${store}: a cancel that failed after closing the ended cycle runs again on a retry with the same key`, async (t) => {
    const server = await startTestServer(store, { SCHEDULER_INTERVAL_MS: "0" });
    try {
      const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
      const card = await s.card({ fixed_rates: [{ code: "base", name: "Base", price: { amount: { currency_code: "USD", value: "10.00" } } }] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { base: 1 } });
      const [sub] = await s.subscriptions();
      const id = sub?.id as string;
      const before = (await s.invoices()).length;
      // The clock is past the end of January's cycle, which nothing closed yet (an advance whose
      // server died after moving the clock; the scheduler is off here).
      await withDatabase(server.db.url, (db) => db.dataSource.query("UPDATE test_clocks SET frozen_time = ?, status = 'advancing' WHERE id = ?", ["2026-02-10 00:00:00.000", s.clockId]));
      await withDatabase(server.db.url, (db) => db.dataSource.query(refuseCancel(store)));
      let first: { status: number; body: Record<string, unknown> };
      try {
        first = await cancel(s, id, "cancel-after-catch-up");
      } finally {
        await withDatabase(server.db.url, (db) => db.dataSource.query("DROP TRIGGER refuse_cancel"));
      }
      t.true(first.status >= 500, `the cancel failed: ${first.status} ${JSON.stringify(first.body)}`);
      t.is((await s.invoices()).length, before + 1, "January's cycle was closed by the cancel's catch-up");
      t.is((await s.subscriptions())[0]?.status, "active", "not cancelled yet");

      const retry = await cancel(s, id, "cancel-after-catch-up");
      t.is(retry.status, 200, JSON.stringify(retry.body));
      t.is(retry.body.status, "cancelled");
      t.is((await s.subscriptions())[0]?.status, "cancelled");
      t.true((await s.invoices()).length <= before + 2, "January's cycle closed once, plus at most the cancel's final invoice");
      const replay = await cancel(s, id, "cancel-after-catch-up");
      t.deepEqual(replay, retry, "the retry's answer is stored: a third call gets it again");
    } finally {
      await server.stop();
    }
  });
}
