/**
 * Credit alerts and auto top-up (DESIGN §14) on both stores and test clocks: credit.balance_low
 * and credit.depleted once per crossing and again after a re-arm (read back from GET /events),
 * several crossings evaluated many times at once by several servers firing each once, and an auto
 * top-up bought once when a burst of usage crosses its threshold (several evaluations, one
 * purchase), and a conflict on the first write of an alert's row retried as one on its
 * transaction is (the crossing fires once). The scenario is set up through the API; credit is wired as a second server has it
 * (helpers/credit-realtime.ts).
 */
import test from "ava";
import { type AlertStore, CreditAlerts } from "../../src/billing/credits/alerts.js";
import type { AlertState } from "../../src/billing/credits/ports.js";
import { AbortedError } from "../../src/billing/errors.js";
import { checkoutWithCard, eventually } from "../helpers/credit-bodies.js";
import { type CreditWiring, wireCredits } from "../helpers/credit-realtime.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { flat, usageRate } from "../helpers/price-bodies.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { type TestServer, useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const JAN = "2026-01-15T00:00:00Z";
const JAN_20 = "2026-01-20T00:00:00Z";

async function usageCard(s: Scenario): Promise<string> {
  const m = await s.metric();
  return s.card({ usage_based_rates: [usageRate(m, flat(10))] });
}

/** The credit.* events of the environment, oldest first: [type, available credit]. */
async function alerts(s: Scenario): Promise<[string, string][]> {
  const r = await s.call("GET", "/events?types=credit.balance_low&types=credit.depleted&limit=100");
  return (r.events as Json[]).map((e) => [e.type, e.data?.available_credit?.value ?? e.data?.available ?? "?"]);
}

const types = async (s: Scenario) => (await alerts(s)).map(([type]) => type);

/**
 * A gate that lets transactions through in waves: each waits until none has come for 10 ms, then
 * all of them begin at once, as evaluators on many servers reaching a crossing at the same instant
 * do.
 */
function gate(): () => Promise<void> {
  const waiting: (() => void)[] = [];
  let timer: NodeJS.Timeout | undefined;
  const open = () => {
    for (const go of waiting.splice(0)) go();
  };
  return () =>
    new Promise<void>((go) => {
      waiting.push(go);
      clearTimeout(timer);
      timer = setTimeout(open, 10);
    });
}

/**
 * `w`'s alerts with each of their transactions let through `pass` first; `aborted` counts those
 * the database aborted (a deadlock or a lock wait timeout), which the evaluation may retry.
 */
function gatedAlerts(w: CreditWiring, pass: () => Promise<void>, aborted: { n: number }): CreditAlerts {
  const store: AlertStore = Object.assign(Object.create(w.store) as AlertStore, {
    transaction: async <T>(fn: Parameters<AlertStore["transaction"]>[0]) => {
      await pass();
      try {
        return (await w.store.transaction(fn)) as T;
      } catch (err) {
        if (err instanceof AbortedError) aborted.n++;
        throw err;
      }
    },
  });
  return new CreditAlerts(store, w.engine);
}

/** The credit.* event types of one subject, oldest first. */
async function subjectTypes(s: Scenario, subjectId: string): Promise<string[]> {
  const r = await s.call("GET", "/events?types=credit.balance_low&types=credit.depleted&limit=100");
  return (r.events as Json[]).filter((e) => e.data?.subject_id === subjectId).map((e) => e.type);
}

/**
 * `n` subjects of one environment (their alert rows side by side in the key), each with 2,000 of
 * credit and its low balance line at 1,000 on a usage card (10 a unit), each wired as a server.
 */
async function subjectsWithCredit(server: TestServer, n: number) {
  const first = await Scenario.start(server, JAN);
  const card = await usageCard(first);
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const s = i === 0 ? first : Object.assign(new Scenario(server), { key: first.key, clockId: first.clockId });
      if (i > 0) s.subjectId = (await s.call("POST", "/subjects", { name: `Customer ${i}`, test_clock_id: first.clockId })).id;
      await s.subscribe({ rate_card_id: card });
      const w = await wireCredits(s);
      await w.settings({ currency: "USD", lowBalanceThreshold: "1000", autoTopUp: null });
      await w.grant("2000");
      return { s, w, subjectId: s.subjectId };
    }),
  );
}

for (const store of STORES) {
  const server = useServer(store);

  test.serial(`${store}: credit.balance_low and credit.depleted fire once per crossing, and again after a grant re-arms them`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const w = await wireCredits(s);
    try {
      await s.subscribe({ rate_card_id: await usageCard(s) });
      await w.settings({ currency: "USD", lowBalanceThreshold: "3000", autoTopUp: null });
      await w.grant("5000");
      t.deepEqual(await types(s), [], "5,000 available: above both lines");
      // Available: 4,000 → 2,500 (below 3,000: balance_low) → 1,500 → −500 (depleted) → −1,500.
      const seen: string[][] = [];
      for (const n of ["100", "150", "100", "200", "100"]) {
        await w.use(JAN_20, n);
        seen.push(await types(s));
      }
      t.deepEqual(seen, [[], ["credit.balance_low"], ["credit.balance_low"], ["credit.balance_low", "credit.depleted"], ["credit.balance_low", "credit.depleted"]]);
      // Evaluating again (the scheduler's run) changes nothing.
      await w.advance("2026-01-21T00:00:00Z");
      t.is(await w.alerts.evaluate(w.caller.environmentId, s.subjectId, new Date("2026-01-21T00:00:00Z")), 0);
      t.deepEqual(await types(s), ["credit.balance_low", "credit.depleted"]);
      // A grant of 10,000: 8,500 available, both re-armed (no event); then 600 → 2,500 and 300 → −500.
      await w.grant("10000");
      t.deepEqual(await w.state(), ["15000", "8500"]);
      await w.use(JAN_20, "600");
      await w.use(JAN_20, "300");
      t.deepEqual(await types(s), ["credit.balance_low", "credit.depleted", "credit.balance_low", "credit.depleted"]);
    } finally {
      await w.close();
    }
  });

  test.serial(`${store}: servers evaluating the same crossings at once fire each once, and none of their writes deadlock`, async (t) => {
    // Each round, in a fresh environment: four subjects cross both lines at once, their alert rows
    // not written yet (the first writes of rows side by side in the key), and four servers each
    // evaluate each subject three times at once, their transactions started in waves; the API
    // server evaluates after the ingest besides.
    for (let round = 0; round < 2; round++) {
      const crossings = await subjectsWithCredit(server, 4);
      const ws = crossings.map((c) => c.w);
      try {
        // Usage alone (no watch): 2,000 − 2,500 = −500, below both lines, for all of them at once.
        await Promise.all(
          crossings.map(({ s, subjectId }) =>
            s.call("POST", "/usage-events/batch", { events: [{ idempotency_key: `use-${subjectId}`, subject_id: subjectId, event_name: "usage", timestamp: JAN_20, data: { n: "250" } }] }),
          ),
        );
        const at = new Date(JAN_20);
        const [pass, aborted] = [gate(), { n: 0 }];
        const evaluators = ws.flatMap((w) => [1, 2, 3].map(() => gatedAlerts(w, pass, aborted)));
        const fired = await Promise.all(crossings.flatMap(({ w: own, subjectId }) => evaluators.map((alerts) => alerts.evaluate(own.caller.environmentId, subjectId, at))));
        t.is(aborted.n, 0, `round ${round}: transactions the database aborted (deadlocks)`);
        // The API server (another one) evaluates after the same ingest: whoever fires, once each.
        t.true(fired.reduce((x, y) => x + y, 0) <= 2 * crossings.length, `round ${round}`);
        for (const { s, subjectId } of crossings) {
          const seen = await eventually(
            () => subjectTypes(s, subjectId),
            (x) => x.length >= 2,
          );
          t.deepEqual(seen.sort(), ["credit.balance_low", "credit.depleted"], `round ${round}`);
        }
        await new Promise((r) => setTimeout(r, 300));
        for (const { s, subjectId } of crossings) {
          t.deepEqual((await subjectTypes(s, subjectId)).sort(), ["credit.balance_low", "credit.depleted"], `round ${round}: nothing more once the server's own evaluation ran`);
        }
      } finally {
        for (const w of ws) await w.close();
      }
    }
  });

  test.serial(`${store}: auto top-up: a burst of usage across the threshold buys once; back above it, no second purchase`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const [a, b] = [await wireCredits(s), await wireCredits(s)];
    try {
      t.is(await checkoutWithCard(s, await usageCard(s), CARD_OK), 303, "subscribed through a checkout: a card on file");
      await a.settings({ currency: "USD", lowBalanceThreshold: null, autoTopUp: { threshold: "2000", amount: "10000", priority: 50 } });
      await a.grant("5000");
      // Five batches at once: 5 × 100 × 10 = 5,000 used, available 0 (below 2,000).
      await Promise.all(["100", "100", "100", "100", "100"].map((n) => s.events([[JAN_20, n]])));
      const at = new Date(JAN_20);
      await Promise.all([a, b, a, b, a, b].map((w) => w.alerts.evaluate(w.caller.environmentId, s.subjectId, at)));
      const grants = async () => (await a.store.list(a.caller.environmentId, { subjectId: s.subjectId }, { limit: 100, offset: 0 })).items.map((g) => [g.category, g.status, g.amount]);
      // The API server evaluates after the same ingest too: whichever server wins buys; wait for it.
      await eventually(grants, (g) => g.some(([category, status]) => category === "paid" && status === "active"));
      await new Promise((r) => setTimeout(r, 300));
      t.deepEqual(await grants(), [
        ["promotional", "active", "5000"],
        ["paid", "active", "10000"],
      ]);
      // 15,000 − 5,000 = 10,000 available; 100 more: 9,000, above the threshold: nothing bought.
      t.deepEqual(await a.state(), ["15000", "10000"]);
      await a.use(JAN_20, "100");
      await b.alerts.evaluate(b.caller.environmentId, s.subjectId, at);
      t.is((await grants()).length, 2);
      t.deepEqual(await a.state(), ["15000", "9000"]);
      // An evaluation that lost the top-up's row to another may have seen 0 available before the
      // purchase committed: credit.depleted at most once.
      t.true((await types(s)).filter((x) => x === "credit.depleted").length <= 1);
    } finally {
      await a.close();
      await b.close();
    }
  });

  test.serial(`${store}: auto top-up without a payment method on file buys nothing`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const w = await wireCredits(s);
    try {
      await s.subscribe({ rate_card_id: await usageCard(s) });
      await w.settings({ currency: "USD", lowBalanceThreshold: null, autoTopUp: { threshold: "2000", amount: "10000", priority: 50 } });
      await w.grant("1000");
      await w.use(JAN_20, "10");
      const list = (await w.store.list(w.caller.environmentId, { subjectId: s.subjectId }, { limit: 100, offset: 0 })).items;
      t.deepEqual(
        list.map((g) => g.category),
        ["promotional"],
      );
      t.deepEqual(await w.state(), ["1000", "900"]);
    } finally {
      await w.close();
    }
  });

  test.serial(`${store}: a conflict on the first write of an alert's row is retried as one on its transaction is: the crossing fires once`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const w = await wireCredits(s);
    try {
      await w.grant("5000");
      await w.settings({ currency: "USD", lowBalanceThreshold: "6000", autoTopUp: null });
      let writes = 0;
      const conflicting: AlertStore = Object.assign(Object.create(w.store) as AlertStore, {
        ensureAlertState: async (a: AlertState) => {
          if (writes++ === 0) throw new AbortedError("TRANSACTION_CONFLICT", "the write conflicted with another one (deadlock or lock wait timeout); try again");
          return w.store.ensureAlertState(a);
        },
      });
      t.is(await new CreditAlerts(conflicting, w.engine).evaluate(w.caller.environmentId, s.subjectId, new Date(JAN)), 1);
      t.is(writes, 2, "the first write conflicted, the second made it");
      t.deepEqual(await types(s), ["credit.balance_low"]);
    } finally {
      await w.close();
    }
  });

  // MariaDB's own deadlock (errno 1213) on that statement: the store reports it as the conflict retried above.
  if (store === "mysql")
    test.serial("mysql: a deadlock MariaDB reports on the first write of an alert's row is a conflict, retried: the crossing fires once", async (t) => {
      const s = await Scenario.start(server, JAN);
      const w = await wireCredits(s);
      try {
        await w.grant("5000");
        await w.settings({ currency: "USD", lowBalanceThreshold: "6000", autoTopUp: null });
        // The row's first write (INSERT … ON DUPLICATE KEY) fails once with a deadlock; the gate is a MEMORY table, not rolled back with it.
        await withDatabase(server.db.url, async (db) => {
          await db.dataSource.query("CREATE TABLE alert_gate (n INT) ENGINE=MEMORY");
          await db.dataSource.query("INSERT INTO alert_gate VALUES (0)");
          await db.dataSource.query(
            `CREATE TRIGGER alert_conflict BEFORE INSERT ON credit_alert_state FOR EACH ROW BEGIN IF NEW.subject_id = '${s.subjectId}' AND (SELECT n FROM alert_gate) = 0 THEN UPDATE alert_gate SET n = 1; SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'Deadlock found when trying to get lock'; END IF; END`,
          );
        });
        t.is(await w.alerts.evaluate(w.caller.environmentId, s.subjectId, new Date(JAN)), 1);
        t.deepEqual(await types(s), ["credit.balance_low"]);
        t.deepEqual(await withDatabase(server.db.url, (db) => db.dataSource.query("SELECT n FROM alert_gate")), [{ n: 1 }], "the deadlock happened");
      } finally {
        await w.close();
      }
    });
}
