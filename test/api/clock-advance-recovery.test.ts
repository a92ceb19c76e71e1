/**
 * A test clock advance cut short is finished (Stripe's test clock status): the advance commits the
 * clock's new time with the status `advancing`, and sets `ready` once everything due by that time
 * has run. A server that dies between the two leaves the clock `advancing`; the scheduler of any
 * server finishes it once its lease ran out (12 scheduler intervals here, 60 s at most), and an
 * advance to the clock's current time finishes it too. Either way each cycle closes once.
 * On MariaDB the real thing: the advance held inside its run by a lock this test takes on the
 * invoices table, the server killed there (SIGKILL). On both stores the state such a death leaves
 * is also written straight into the database (the advance's first commit alone).
 */
import test from "ava";
import mysql from "mysql2/promise";
import { STORES, withDatabase } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { type ChildServer, type TestServer, childServer, startTestServer } from "../helpers/server.js";

const mysqlSerial = STORES.includes("mysql") ? test.serial : test.skip;
const START = "2026-01-01T00:00:00Z";
const TO = "2026-02-15T00:00:00Z";

/** `npm start`'s process (src/main.ts) on the test server's database, its scheduler every `schedulerIntervalMs`. */
const child = (server: TestServer, schedulerIntervalMs: string) => childServer(server, { SCHEDULER_INTERVAL_MS: schedulerIntervalMs }, "ignore");

/** A clock at START with one subject subscribed to a monthly card (its first cycle ends Feb 1). */
async function subscribed(server: TestServer): Promise<Scenario> {
  const s = await Scenario.start(server, START);
  const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { amount: { currency_code: "USD", value: 0 } } }] });
  await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, null);
  return s;
}

/** What a server that died right after the advance's first commit leaves: the clock at `to`, advancing since a while. */
async function cutShort(server: TestServer, clockId: string, to: string): Promise<void> {
  const at = to.replace("T", " ").replace("Z", ".000");
  await withDatabase(server.db.url, (db) =>
    db.dataSource.query("UPDATE test_clocks SET frozen_time = ?, status = 'advancing', advance_started_at = '2026-01-01 00:00:00.000' WHERE id = ?", [at, clockId]),
  );
}

async function clockStatus(s: Scenario): Promise<{ frozen_time: string; status: string }> {
  const c = await s.call("GET", `/test-clocks/${s.clockId}`);
  return { frozen_time: c.frozen_time, status: c.status };
}

async function untilReady(s: Scenario): Promise<void> {
  const until = Date.now() + 120_000;
  while ((await clockStatus(s)).status !== "ready") {
    if (Date.now() > until) throw new Error("the clock never became ready");
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The first cycle closed once: one invoice more than at the start, the subscription in its second cycle. */
async function closedOnce(t: import("ava").ExecutionContext, s: Scenario, before: number): Promise<void> {
  t.is((await s.invoices()).length, before + 1, "one invoice for the period");
  const [sub] = await s.subscriptions();
  t.is(sub?.current_period.start, "2026-02-01T00:00:00Z");
}

for (const store of STORES) {
  test(`${store}: an advance ends ready; one cut short is advancing, and advancing again to the same time finishes it`, async (t) => {
    const server = await startTestServer(store, { SCHEDULER_INTERVAL_MS: "0" });
    try {
      const s = await subscribed(server);
      t.deepEqual(await clockStatus(s), { frozen_time: START, status: "ready" }, "a new clock is ready");
      await s.advance("2026-01-10T00:00:00Z");
      t.deepEqual(await clockStatus(s), { frozen_time: "2026-01-10T00:00:00Z", status: "ready" });
      const before = (await s.invoices()).length;

      await cutShort(server, s.clockId, TO);
      t.deepEqual(await clockStatus(s), { frozen_time: TO, status: "advancing" });
      t.is((await s.invoices()).length, before, "nothing ran yet");
      // A plain retry (no Idempotency-Key) of the advance to the same time.
      t.like(await s.call("POST", `/test-clocks/${s.clockId}/advance`, { frozen_time: TO }), { frozen_time: TO, status: "ready" });
      await closedOnce(t, s, before);
      await s.advance(TO);
      t.is((await s.invoices()).length, before + 1, "again: nothing more");
    } finally {
      await server.stop();
    }
  });

  test(`${store}: the scheduler finishes an advance cut short once its lease ran out`, async (t) => {
    t.timeout(180_000);
    const server = await startTestServer(store, { SCHEDULER_INTERVAL_MS: "0" });
    let second: ChildServer | undefined;
    try {
      const s = await subscribed(server);
      const before = (await s.invoices()).length;
      await cutShort(server, s.clockId, TO);
      second = await child(server, "100");
      await untilReady(s);
      t.deepEqual(await clockStatus(s), { frozen_time: TO, status: "ready" });
      await closedOnce(t, s, before);
    } finally {
      second?.proc.kill("SIGKILL");
      await second?.exited;
      await server.stop();
    }
  });
}

mysqlSerial("mysql: a server killed inside an advance's run; another server's scheduler finishes it, closing the cycle once", async (t) => {
  t.timeout(240_000);
  const server = await startTestServer("mysql", { SCHEDULER_INTERVAL_MS: "0" });
  let second: ChildServer | undefined;
  try {
    const s = await subscribed(server);
    const before = (await s.invoices()).length;
    const lock = await mysql.createConnection(server.db.url);
    const dying = await child(server, "0");
    try {
      // The invoices table held: the advance moves the clock, then its run waits to write the invoice.
      await lock.query("LOCK TABLES invoices WRITE");
      const advancing = fetch(`${dying.url}/test-clocks/${s.clockId}/advance`, {
        method: "POST",
        headers: { "x-api-key": s.key, "content-type": "application/json" },
        body: JSON.stringify({ frozen_time: TO }),
      }).catch(() => undefined);
      const until = Date.now() + 120_000;
      while ((await clockStatus(s)).status !== "advancing") {
        if (Date.now() > until) throw new Error("the advance never moved the clock");
        await new Promise((r) => setTimeout(r, 50));
      }
      // Let the run reach the lock, then kill the server there.
      await new Promise((r) => setTimeout(r, 500));
      dying.proc.kill("SIGKILL");
      t.is(await dying.exited, "SIGKILL");
      await advancing;
    } finally {
      await lock.query("UNLOCK TABLES").catch(() => undefined);
      await lock.end();
      if (dying.proc.exitCode === null && dying.proc.signalCode === null) dying.proc.kill("SIGKILL");
    }
    t.deepEqual(await clockStatus(s), { frozen_time: TO, status: "advancing" }, "what the crash left");
    t.is((await s.invoices()).length, before, "the cycle not closed");

    second = await child(server, "100");
    await untilReady(s);
    await closedOnce(t, s, before);
  } finally {
    second?.proc.kill("SIGKILL");
    await second?.exited;
    await server.stop();
  }
});
