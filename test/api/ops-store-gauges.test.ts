/**
 * The gauges /metrics reads from the store, on both stores: the scheduler's lag is the age of
 * the oldest cycle due on real time (set-aside subscriptions waiting for their retry and test
 * clock subscriptions left out), failing subscriptions are the active ones set aside, invoices
 * are counted by status; webhook deliveries pending (an event not yet fanned out counts once per
 * endpoint that will take it), their lag and failing endpoints are counted.
 */
import test from "ava";
import { dbTime } from "../../src/db/raw.js";
import { ok } from "../helpers/clients.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { sample, scrape } from "../helpers/ops.js";
import { useServer } from "../helpers/server.js";

for (const store of STORES) {
  // Neither the scheduler nor the webhook worker runs here, so the rows stay as the test leaves them.
  const server = useServer(store, { SCHEDULER_INTERVAL_MS: "0", WEBHOOK_DELIVERY_INTERVAL_MS: "0" });

  test(`${store}: scheduler lag, failing subscriptions and invoices by status, read on scrape`, async (t) => {
    const key = await server.freshKey();
    const call = (method: string, path: string, body?: unknown) => ok(server, key, method, path, body);
    const card = await call("POST", "/rate-cards", { name: "Free", billing_interval: "monthly", fixed_rates: [{ code: "base", name: "Base", price: { amount: { currency_code: "USD", value: 0 } } }] });
    const subscribe = async () => {
      const subject = await call("POST", "/subjects", { name: "Gauged" });
      const r = await call("POST", "/subscriptions", {
        subject_id: subject.id,
        rate_card_id: card.id,
        fixed_rate_quantities: { base: 1 },
        checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/no" },
      });
      return r.result.subscription.id as string;
    };
    const [late, later, setAside] = [await subscribe(), await subscribe(), await subscribe()];
    const before = await scrape(server.url);
    t.is(sample(before, "billing_scheduler_lag_seconds"), 0, "nothing is due yet");
    t.is(sample(before, "billing_subscriptions_failing"), 0);
    t.is(sample(before, "billing_invoices", { status: "paid" }), 3, "each free subscription's first invoice, paid at once");

    // Two cycles overdue by 10 and 5 days (the server's scheduler is off), one set aside until tomorrow.
    const now = Date.now();
    const day = 86_400_000;
    await withDatabase(server.db.url, async (db) => {
      await db.dataSource.query("UPDATE subscriptions SET period_end = ? WHERE id = ?", [dbTime(new Date(now - 10 * day)), late]);
      await db.dataSource.query("UPDATE subscriptions SET period_end = ? WHERE id = ?", [dbTime(new Date(now - 5 * day)), later]);
      await db.dataSource.query("UPDATE subscriptions SET period_end = ?, billing_error = ?, billing_attempts = 1, billing_failed_at = ?, billing_retry_at = ? WHERE id = ?", [
        dbTime(new Date(now - 30 * day)),
        "failed",
        dbTime(new Date(now)),
        dbTime(new Date(now + day)),
        setAside,
      ]);
    });
    await new Promise((r) => setTimeout(r, 1_100)); // scrapes within a second share one read
    const after = await scrape(server.url);
    const lag = sample(after, "billing_scheduler_lag_seconds");
    t.true(lag >= 10 * 86_400 && lag < 10 * 86_400 + 60, `lag ${lag}: the oldest due cycle not set aside`);
    t.is(sample(after, "billing_subscriptions_failing"), 1);
    t.is(sample(after, "billing_store_scrape_success"), 1);
    t.is(sample(after, "billing_webhook_deliveries_pending"), 0, "no endpoint yet: nothing to deliver");
    t.is(sample(after, "billing_webhook_lag_seconds"), 0);

    // In an environment of its own: an endpoint, then one change: one delivery pending (nobody
    // fans the event out nor delivers it here); the event and the endpoint made two minutes and an
    // hour ago; then the endpoint is marked failing.
    const hookKey = await server.freshKey();
    const endpoint = await ok(server, hookKey, "POST", "/webhook-endpoints", { url: "https://hooks.example.com/billing" });
    await ok(server, hookKey, "POST", "/subjects", { name: "Watched" });
    await withDatabase(server.db.url, async (db) => {
      const env = (await db.dataSource.query("SELECT environment_id FROM webhook_endpoints WHERE id = ?", [endpoint.id]))[0].environment_id;
      t.is(Number((await db.dataSource.query("SELECT COUNT(*) AS n FROM events WHERE environment_id = ?", [env]))[0].n), 1, "the one change's event");
      await db.dataSource.query("UPDATE events SET created_at = ? WHERE environment_id = ?", [dbTime(new Date(Date.now() - 120_000)), env]);
      await db.dataSource.query("UPDATE webhook_endpoints SET created_at = ?, failing_since = ? WHERE id = ?", [dbTime(new Date(Date.now() - 3_600_000)), dbTime(new Date()), endpoint.id]);
    });
    await new Promise((r) => setTimeout(r, 1_100));
    const hooks = await scrape(server.url);
    t.is(sample(hooks, "billing_webhook_deliveries_pending"), 1);
    const hookLag = sample(hooks, "billing_webhook_lag_seconds");
    t.true(hookLag >= 120 && hookLag < 180, `webhook lag ${hookLag}: the oldest pending delivery's event`);
    t.is(sample(hooks, "billing_webhook_endpoints_failing"), 1);
  });
}
