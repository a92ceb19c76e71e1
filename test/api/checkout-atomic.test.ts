/**
 * A subscribe checkout's completion and its subscription are one transaction (hosted-checkout.ts
 * finish): when writing the subscription fails (here a trigger refuses the insert, as a database
 * lost mid-way would), the checkout stays open, no card is saved, and nothing is charged; the
 * customer's second click then completes it with its subscription, invoiced once. Before, the
 * checkout completed first and a failure after it left a completed checkout with no subscription,
 * which no retry could repair (found by the HA harness when the database's writer was killed).
 * The same for a change checkout's change of rate card and a timeline checkout's start
 * (checkout-effect-crash.test.ts kills the server there).
 */
import test from "ava";
import { STORES, withDatabase } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";

const usd = (value: string) => ({ currency_code: "USD", value });
const callbacks = { checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" } };

/** Runs `f` while a trigger refuses `event` (INSERT or UPDATE) on subscriptions, as a database lost mid-way would. */
async function refusing<T>(url: string, store: string, event: "INSERT" | "UPDATE", f: () => Promise<T>): Promise<T> {
  const trigger =
    store === "mysql"
      ? `CREATE TRIGGER refuse_subscriptions BEFORE ${event} ON subscriptions FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused'`
      : `CREATE TRIGGER refuse_subscriptions BEFORE ${event} ON subscriptions BEGIN SELECT RAISE(ABORT, 'refused'); END`;
  await withDatabase(url, (db) => db.dataSource.query(trigger));
  try {
    return await f();
  } finally {
    await withDatabase(url, (db) => db.dataSource.query("DROP TRIGGER refuse_subscriptions"));
  }
}

/** The subject's saved cards, and the one on the subject. */
async function savedCards(url: string, subjectId: string) {
  return withDatabase(url, async (db) => ({
    onSubject: ((await db.dataSource.query("SELECT payment_method_id AS pm FROM subjects WHERE id = ?", [subjectId])) as { pm: string | null }[])[0]?.pm,
    methods: ((await db.dataSource.query("SELECT id FROM payment_methods WHERE subject_id = ?", [subjectId])) as unknown[]).length,
  }));
}

for (const store of STORES) {
  // One at a time: a test's trigger refuses every test's writes on the server's database.
  const server = useServer(store);

  test.serial(`${store}: a subscription that cannot be written leaves its checkout open and nothing saved; the retry completes both`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: usd("4900") } }] });
    const r = await s.call("POST", "/subscriptions", {
      subject_id: s.subjectId,
      rate_card_id: card,
      fixed_rate_quantities: { seats: 1 },
      create_checkout_session: "always",
      checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" },
    });
    const url = r.result.action.checkout_url as string;
    const trigger =
      store === "mysql"
        ? "CREATE TRIGGER refuse_subscriptions BEFORE INSERT ON subscriptions FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused'"
        : "CREATE TRIGGER refuse_subscriptions BEFORE INSERT ON subscriptions BEGIN SELECT RAISE(ABORT, 'refused'); END";
    await withDatabase(server.db.url, (db) => db.dataSource.query(trigger));
    try {
      const failed = await s.payCheckout(url, "4242 4242 4242 4242");
      t.true(failed.status >= 500, `the page answered ${failed.status}`);
    } finally {
      await withDatabase(server.db.url, (db) => db.dataSource.query("DROP TRIGGER refuse_subscriptions"));
    }
    const saved = await withDatabase(server.db.url, async (db) => ({
      onSubject: ((await db.dataSource.query("SELECT payment_method_id AS pm FROM subjects WHERE id = ?", [s.subjectId])) as { pm: string | null }[])[0]?.pm,
      methods: ((await db.dataSource.query("SELECT id FROM payment_methods WHERE subject_id = ?", [s.subjectId])) as unknown[]).length,
    }));
    t.deepEqual(saved, { onSubject: null, methods: 0 });
    t.deepEqual(await s.subscriptions(), []);
    const paid = await s.payCheckout(url, "4242 4242 4242 4242");
    t.is(paid.status, 303);
    t.is(paid.location, "https://app.example/ok");
    const subs = await s.subscriptions();
    t.is(subs.length, 1);
    const invoices = await s.invoices();
    t.deepEqual(
      invoices.map((i) => [i.status, i.total_amount.value]),
      [["paid", "4900"]],
    );
  });

  test.serial(`${store}: a change of rate card that cannot be written leaves its checkout open and nothing saved; the retry changes once`, async (t) => {
    const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
    const free = await s.card({ name: "Free", fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: usd("0") } }] });
    const pro = await s.card({ name: "Pro", fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: usd("3100") } }] });
    const sub = (await s.subscribe({ rate_card_id: free, fixed_rate_quantities: { seats: 1 } }, null)).subscription;
    await s.advance("2026-01-11T00:00:00Z");
    const r = await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: pro, upgrade_behavior: "prorate", ...callbacks });
    const url = r.result.action.checkout_url as string;
    const failed = await refusing(server.db.url, store, "UPDATE", () => s.payCheckout(url, "4242 4242 4242 4242"));
    t.true(failed.status >= 500, `the page answered ${failed.status}`);
    t.deepEqual(await savedCards(server.db.url, s.subjectId), { onSubject: null, methods: 0 });
    t.is((await s.call("GET", `/subscriptions/${sub.id}`)).rate_card_id, free);
    const paid = await s.payCheckout(url, "4242 4242 4242 4242");
    t.deepEqual([paid.status, paid.location], [303, "https://app.example/ok"]);
    t.is((await s.call("GET", `/subscriptions/${sub.id}`)).rate_card_id, pro);
    t.deepEqual(
      (await s.invoices()).map((i) => [i.status, i.total_amount.value]),
      [
        ["paid", "0"],
        ["paid", "2100"],
      ],
    );
  });

  test.serial(`${store}: a timeline start that cannot be written leaves its checkout open and nothing saved; the retry starts it once`, async (t) => {
    const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: usd("4900") } }] });
    const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: card });
    await s.call("POST", `/subscription-timelines/${tl.id}/items`, {
      items: [{ period: { start: "2026-01-01T00:00:00Z", end: null }, subscription_input: { rate_card_id: card, fixed_rate_quantities: { seats: 1 }, rate_price_multipliers: {} } }],
    });
    const url = (await s.call("POST", `/subscription-timelines/${tl.id}/start`, callbacks)).result.action.checkout_url as string;
    const failed = await refusing(server.db.url, store, "INSERT", () => s.payCheckout(url, "4242 4242 4242 4242"));
    t.true(failed.status >= 500, `the page answered ${failed.status}`);
    t.deepEqual(await savedCards(server.db.url, s.subjectId), { onSubject: null, methods: 0 });
    t.is((await s.call("GET", `/subscription-timelines/${tl.id}`)).status, "draft");
    const paid = await s.payCheckout(url, "4242 4242 4242 4242");
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
  });
}
