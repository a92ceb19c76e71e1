/**
 * A change or timeline checkout is crash-safe (hosted-checkout.ts finish): the change of rate
 * card, or the timeline's start, is written in the same transaction that completes the checkout
 * and saves the card. A server killed (SIGKILL) while the customer's payment waits there — held
 * by a row lock this test takes on the subscription (or timeline), so the kill lands in that
 * window — leaves the checkout open and nothing saved; the customer's second click (on another
 * server on the same database) completes it with its change, applied and charged once. Before,
 * the checkout completed first and the change ran after its commit: the kill left a completed
 * checkout, a saved card and the subscription never changed, with nothing to retry it. MariaDB
 * only: the window is held by InnoDB's row lock (SQLite's whole-file lock would stop the checkout too).
 */
import test from "ava";
import mysql from "mysql2/promise";
import { STORES, withDatabase } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { TEST_STATEMENT_TIMEOUT_MS, type TestServer, childServer, startTestServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

/** MariaDB only, one at a time (each kills a server of its own); reported as skipped without MariaDB. */
const mysqlSerial = STORES.includes("mysql") ? test.serial : test.skip;
const usd = (value: string) => ({ currency_code: "USD", value });
const callbacks = { checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" } };

/**
 * Whether a statement of the child server waits for the row with this id the test holds: its
 * locking read is in the database's process list (it cannot end while the row is held).
 */
async function waitingFor(lock: mysql.Connection, id: string): Promise<boolean> {
  const [rows] = await lock.query("SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND DB = DATABASE() AND INFO LIKE '%FOR UPDATE%' AND INFO LIKE ?", [`%${id}%`]);
  return Number((rows as { n: number }[])[0]?.n) > 0;
}

/**
 * Posts the checkout's form with a good card to the server at `base` while `lock` holds the row
 * with this id; resolves once the payment waits for that row, with its answer (status and text) to come.
 */
async function payWhileHeld(base: string, checkoutUrl: string, lock: mysql.Connection, id: string): Promise<Promise<string>> {
  const paying = fetch(`${base}${new URL(checkoutUrl).pathname}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ card_number: CARD_OK }).toString(),
    redirect: "manual",
  }).then(
    async (res) => `${res.status} ${(await res.text()).replace(/<style>.*<\/style>/s, "").replace(/<[^>]+>/g, " ")}`,
    () => "no answer",
  );
  let answered: string | undefined;
  void paying.then((a) => {
    answered = a;
  });
  const until = Date.now() + 120_000;
  while (!(await waitingFor(lock, id))) {
    if (answered !== undefined || Date.now() > until) throw new Error(`the payment never waited for the held row (it answered: ${answered})`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return paying;
}

/**
 * Pays the checkout on a server of its own while the row `sql` selects is held FOR UPDATE, kills
 * that server (SIGKILL) once its payment waits for the row, then lets the row go.
 */
async function payAndKill(server: TestServer, checkoutUrl: string, sql: string, id: string): Promise<void> {
  const lock = await mysql.createConnection(server.db.url);
  // Its statements wait for the held row as long as the tests' do (a loaded machine can be slow to see the wait).
  const dying = await childServer(server, { DATABASE_STATEMENT_TIMEOUT_MS: String(TEST_STATEMENT_TIMEOUT_MS) }, "ignore");
  try {
    await lock.beginTransaction();
    await lock.query(sql, [id]);
    const paying = await payWhileHeld(dying.url, checkoutUrl, lock, id);
    dying.proc.kill("SIGKILL");
    if ((await dying.exited) !== "SIGKILL") throw new Error("the child server was not killed");
    await paying;
  } finally {
    await lock.rollback().catch(() => undefined);
    await lock.end();
    if (dying.proc.exitCode === null && dying.proc.signalCode === null) dying.proc.kill("SIGKILL");
  }
}

/** The subject's saved cards, and the one on the subject. */
async function savedCards(server: TestServer, subjectId: string): Promise<{ onSubject: string | null; methods: number }> {
  return withDatabase(server.db.url, async (db) => ({
    onSubject: ((await db.dataSource.query("SELECT payment_method_id AS pm FROM subjects WHERE id = ?", [subjectId])) as { pm: string | null }[])[0]?.pm ?? null,
    methods: ((await db.dataSource.query("SELECT id FROM payment_methods WHERE subject_id = ?", [subjectId])) as unknown[]).length,
  }));
}

/**
 * The environment's events of `type`, once there is one: the killed transaction took an event's
 * seq, and the feed reads past that gap only once the events after it are old enough (feed.ts).
 */
async function eventsOf(s: Scenario, type: string): Promise<Json[]> {
  const until = Date.now() + 60_000;
  for (;;) {
    const events = (await s.call("GET", `/events?types=${type}&limit=100`)).events as Json[];
    if (events.length > 0 || Date.now() > until) return events;
    await new Promise((r) => setTimeout(r, 250));
  }
}

mysqlSerial("mysql: killed while a change checkout's change waits: the checkout stays open, nothing saved; the retry changes the rate card once, charged once", async (t) => {
  t.timeout(180_000);
  const server = await startTestServer("mysql");
  try {
    const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
    const free = await s.card({ name: "Free", fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: usd("0") } }] });
    const pro = await s.card({ name: "Pro", fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: usd("3100") } }] });
    const started = await s.subscribe({ rate_card_id: free, fixed_rate_quantities: { seats: 1 } }, null);
    const sub = started.subscription as Json;
    await s.advance("2026-01-11T00:00:00Z");
    const r = await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: pro, upgrade_behavior: "prorate", ...callbacks });
    t.is(r.result.type, "requires_action");
    const url = r.result.action.checkout_url as string;

    await payAndKill(server, url, "SELECT id FROM subscriptions WHERE id = ? FOR UPDATE", sub.id);
    // What the crash left: nothing; the checkout can still be paid.
    t.deepEqual(await savedCards(server, s.subjectId), { onSubject: null, methods: 0 });
    t.is((await s.call("GET", `/subscriptions/${sub.id}`)).rate_card_id, free);

    const paid = await s.payCheckout(url, CARD_OK);
    t.deepEqual([paid.status, paid.location], [303, "https://app.example/ok"]);
    t.is((await s.call("GET", `/subscriptions/${sub.id}`)).rate_card_id, pro);
    t.is((await s.payCheckout(url, CARD_OK)).status, 410, "paid once: no longer available");
    t.deepEqual(
      (await eventsOf(s, "subscription.rate_card_changed")).map((e) => [e.data.id, e.data.rate_card_id]),
      [[sub.id, pro]],
      "changed once",
    );
    // The upgrade: 3100 for the 21 of January's 31 days left, charged to the card saved once.
    t.deepEqual(
      (await s.invoices()).map((i) => [i.status, i.total_amount.value]),
      [
        ["paid", "0"],
        ["paid", "2100"],
      ],
    );
    t.is((await savedCards(server, s.subjectId)).methods, 1);
  } finally {
    await server.stop();
  }
});

mysqlSerial("mysql: killed while a timeline checkout's start waits: the checkout stays open, nothing saved; the retry starts the timeline once", async (t) => {
  t.timeout(180_000);
  const server = await startTestServer("mysql");
  try {
    const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: usd("4900") } }] });
    const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: card });
    await s.call("POST", `/subscription-timelines/${tl.id}/items`, {
      items: [{ period: { start: "2026-01-01T00:00:00Z", end: null }, subscription_input: { rate_card_id: card, fixed_rate_quantities: { seats: 1 }, rate_price_multipliers: {} } }],
    });
    const r = await s.call("POST", `/subscription-timelines/${tl.id}/start`, callbacks);
    t.is(r.result.result_type, "requires_action");
    const url = r.result.action.checkout_url as string;

    await payAndKill(server, url, "SELECT id FROM subscription_timelines WHERE id = ? FOR UPDATE", tl.id);
    t.deepEqual(await savedCards(server, s.subjectId), { onSubject: null, methods: 0 });
    t.is((await s.call("GET", `/subscription-timelines/${tl.id}`)).status, "draft");
    t.deepEqual(await s.subscriptions(), []);

    const paid = await s.payCheckout(url, CARD_OK);
    t.deepEqual([paid.status, paid.location], [303, "https://app.example/ok"]);
    const active = await s.call("GET", `/subscription-timelines/${tl.id}`);
    t.is(active.status, "active");
    t.deepEqual(
      (await s.subscriptions()).map((x) => x.id),
      [active.subscription_id],
    );
    t.deepEqual(
      (await s.invoices()).map((i) => [i.status, i.total_amount.value]),
      [["paid", "4900"]],
    );
  } finally {
    await server.stop();
  }
});
