/**
 * A cancellation through the API racing a change checkout's completion (hosted-checkout.ts finish
 * writes the change of rate card in the completion's transaction; changes.ts cancel). Both lock
 * the subscription's row: the completion after the checkout's row, the card and the subject, the
 * cancel first. Whichever locks it second waits for the other's commit, then finds the row moved:
 * - the completion holds the row (held here by a trigger on its update of the subscription): the
 *   cancel waits, then cancels the subscription as the change left it; the change stands, charged
 *   once. Before, the cancel's locking read waited until its statement time limit (5 s by
 *   default) ran out, which ends a wait as an outage (the connection destroyed): it answered 503
 *   UNAVAILABLE, never retried. The read now waits at most half the limit for a row another
 *   transaction holds (Sql.lockWaitBounded); the lock wait timeout is a lost race, retried from
 *   a fresh read while the completion finishes;
 * - the cancel holds the row: the completion waits, finds the subscription cancelled and leaves
 *   the checkout open (the stale page): no card saved, nothing charged.
 * The cancel goes to a server of its own with a short statement time limit (3 s: its locking read
 * waits 1 s at a time), the checkout to the test server (60 s, so that its wait at the trigger
 * never runs out). MariaDB only: on SQLite one process runs one transaction at a time, and the two
 * never wait for each other inside the database.
 */
import test from "ava";
import mysql from "mysql2/promise";
import { STORES, withDatabase } from "../helpers/db.js";
import { rest } from "../helpers/clients.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { type TestServer, childServer, startTestServer } from "../helpers/server.js";

/** MariaDB only, one at a time (each holds its server's rows); reported as skipped without MariaDB. */
const mysqlSerial = STORES.includes("mysql") ? test.serial : test.skip;
const usd = (value: string) => ({ currency_code: "USD", value });
const callbacks = { checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" } };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A subscription on a free card with a change checkout to Pro open (no card on file): 3100 a month, 21 of January's 31 days left. */
async function changeCheckout(server: TestServer) {
  const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
  const free = await s.card({ name: "Free", fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: usd("0") } }] });
  const pro = await s.card({ name: "Pro", fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: usd("3100") } }] });
  const sub = (await s.subscribe({ rate_card_id: free, fixed_rate_quantities: { seats: 1 } }, null)).subscription;
  await s.advance("2026-01-11T00:00:00Z");
  const r = await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: pro, upgrade_behavior: "prorate", ...callbacks });
  return { s, subId: sub.id as string, free, pro, url: r.result.action.checkout_url as string };
}

/**
 * A gate on the subscriptions' updates that `when` selects: such an update waits for the gate's
 * row, which the returned connection holds until `open()`; the trigger and the table go at `close()`.
 */
async function gate(server: TestServer, when: string) {
  const lock = await mysql.createConnection(server.db.url);
  await lock.query("CREATE TABLE race_gate (id INT PRIMARY KEY, n INT NOT NULL)");
  await lock.query("INSERT INTO race_gate VALUES (1, 0)");
  await lock.query(`CREATE TRIGGER race_gate BEFORE UPDATE ON subscriptions FOR EACH ROW BEGIN IF ${when} THEN UPDATE race_gate SET n = n + 1 WHERE id = 1; END IF; END`);
  await lock.beginTransaction();
  await lock.query("SELECT n FROM race_gate WHERE id = 1 FOR UPDATE");
  return {
    lock,
    open: () => lock.rollback(),
    async close() {
      await lock.rollback().catch(() => undefined);
      await lock.query("DROP TRIGGER IF EXISTS race_gate");
      await lock.query("DROP TABLE IF EXISTS race_gate");
      await lock.end();
    },
  };
}

/** The statements of other connections that `like` matches, each as its connection and query id. */
async function running(lock: mysql.Connection, ...like: string[]): Promise<string[]> {
  const [rows] = await lock.query(
    `SELECT ID AS id, QUERY_ID AS q FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND DB = DATABASE() ${like.map(() => "AND INFO LIKE ?").join(" ")}`,
    like,
  );
  return (rows as { id: number; q: number }[]).map((r) => `${r.id}:${r.q}`);
}

/** Waits until `ready` says so; fails if `answered` settles first (the call it waits on answered without waiting). */
async function until(what: string, ready: () => Promise<boolean>, answered: () => string | undefined): Promise<void> {
  const giveUp = Date.now() + 120_000;
  while (!(await ready())) {
    const a = answered();
    if (a !== undefined) throw new Error(`${what}: it answered first (${a})`);
    if (Date.now() > giveUp) throw new Error(`${what}: never`);
    await sleep(25);
  }
}

/** `p` with what it answered once settled (for until). */
function watched<T>(p: Promise<T>, show: (v: T) => string): { p: Promise<T>; answered: () => string | undefined } {
  let out: string | undefined;
  p.then(
    (v) => {
      out = show(v);
    },
    (err: unknown) => {
      out = String(err);
    },
  );
  return { p, answered: () => out };
}

async function savedCards(server: TestServer, subjectId: string): Promise<number> {
  const rows = await withDatabase(server.db.url, (db) => db.dataSource.query("SELECT id FROM payment_methods WHERE subject_id = ?", [subjectId]));
  return (rows as unknown[]).length;
}

mysqlSerial("mysql: a cancel sent while a change checkout's completion holds the subscription waits for it, then cancels the subscription as changed; the change is charged once", async (t) => {
  t.timeout(180_000);
  const server = await startTestServer("mysql", { SCHEDULER_INTERVAL_MS: "0" });
  const canceller = await childServer(server, { DATABASE_STATEMENT_TIMEOUT_MS: "3000" }, "ignore");
  try {
    const { s, subId, pro, url } = await changeCheckout(server);
    // The completion's change of rate card waits at the gate: it holds the subscription's row (and the checkout's, the card, the subject).
    const g = await gate(server, "NEW.rate_card_id <> OLD.rate_card_id");
    try {
      const paying = watched(s.payCheckout(url, CARD_OK), (p) => `${p.status}`);
      await until("the completion waits at the gate", async () => (await running(g.lock, "UPDATE race_gate%")).length > 0, paying.answered);
      const cancelling = watched(rest(canceller.url, "POST", `/subscriptions/${subId}/cancel`, s.key, {}), (r) => `${r.status} ${JSON.stringify(r.body)}`);
      // The cancel's locking read of the row waits; the gate stays shut until that wait has ended
      // and the cancel waits again (a retry: another statement) or has answered.
      const reads = () => running(g.lock, "%FOR UPDATE%", `%${subId}%`);
      const first = new Set<string>();
      await until(
        "the cancel waits for the subscription",
        async () => {
          for (const r of await reads()) first.add(r);
          return first.size > 0;
        },
        cancelling.answered,
      );
      const giveUp = Date.now() + 120_000;
      while (cancelling.answered() === undefined && !(await reads()).some((r) => !first.has(r))) {
        if (Date.now() > giveUp) throw new Error("the cancel neither answered nor tried again");
        await sleep(25);
      }
      await g.open();
      const paid = await paying.p;
      t.deepEqual([paid.status, paid.location], [303, "https://app.example/ok"], "the change checkout completed");
      const cancelled = await cancelling.p;
      t.is(cancelled.status, 200, JSON.stringify(cancelled.body));
      t.like(cancelled.body, { id: subId, status: "cancelled", rate_card_id: pro });
    } finally {
      await g.close();
    }
    t.like(await s.call("GET", `/subscriptions/${subId}`), { status: "cancelled", rate_card_id: pro });
    // The first invoice (free) and the change's: 3100 for the 21 of 31 days left, charged once to the card saved once.
    t.deepEqual(
      (await s.invoices()).map((i) => [i.status, i.total_amount.value]),
      [
        ["paid", "0"],
        ["paid", "2100"],
      ],
    );
    t.is(await savedCards(server, s.subjectId), 1);
  } finally {
    canceller.proc.kill("SIGKILL");
    await canceller.exited;
    await server.stop();
  }
});

mysqlSerial("mysql: a change checkout completed while a cancel holds the subscription finds it cancelled: the stale page, no card saved, nothing charged", async (t) => {
  t.timeout(180_000);
  const server = await startTestServer("mysql", { SCHEDULER_INTERVAL_MS: "0" });
  try {
    const { s, subId, free, url } = await changeCheckout(server);
    // The cancel waits at the gate holding the subscription's row.
    const g = await gate(server, "NEW.status = 'cancelled'");
    try {
      const cancelling = watched(s.raw("POST", `/subscriptions/${subId}/cancel`, {}), (r) => `${r.status} ${JSON.stringify(r.body)}`);
      await until("the cancel waits at the gate", async () => (await running(g.lock, "UPDATE race_gate%")).length > 0, cancelling.answered);
      const paying = watched(s.payCheckout(url, CARD_OK), (p) => `${p.status}`);
      await until("the completion waits for the subscription", async () => (await running(g.lock, "%FOR UPDATE%", `%${subId}%`)).length > 0, paying.answered);
      await g.open();
      const cancelled = await cancelling.p;
      t.is(cancelled.status, 200, JSON.stringify(cancelled.body));
      t.like(cancelled.body, { status: "cancelled", rate_card_id: free });
      const page = await paying.p;
      t.is(page.status, 410, "the stale page");
    } finally {
      await g.close();
    }
    t.like(await s.call("GET", `/subscriptions/${subId}`), { status: "cancelled", rate_card_id: free });
    t.is(await savedCards(server, s.subjectId), 0, "no card saved");
    t.deepEqual(
      (await s.invoices()).map((i) => [i.status, i.total_amount.value]),
      [["paid", "0"]],
      "the change was never invoiced nor charged",
    );
    const [row] = await withDatabase(server.db.url, (db) => db.dataSource.query("SELECT status FROM checkout_sessions WHERE token = ?", [new URL(url).pathname.split("/").pop()]));
    t.is(row?.status, "open", "the checkout stays open");
  } finally {
    await server.stop();
  }
});
