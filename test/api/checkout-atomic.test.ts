/**
 * A subscribe checkout's completion and its subscription are one transaction (hosted-checkout.ts
 * finish): when writing the subscription fails (here a trigger refuses the insert, as a database
 * lost mid-way would), the checkout stays open, no card is saved, and nothing is charged; the
 * customer's second click then completes it with its subscription, invoiced once. Before, the
 * checkout completed first and a failure after it left a completed checkout with no subscription,
 * which no retry could repair (found by the HA harness when the database's writer was killed).
 */
import test from "ava";
import { STORES, withDatabase } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";

const usd = (value: string) => ({ currency_code: "USD", value });

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a subscription that cannot be written leaves its checkout open and nothing saved; the retry completes both`, async (t) => {
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
}
