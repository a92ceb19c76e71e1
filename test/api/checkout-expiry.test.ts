/**
 * Open checkouts past their expiry are ended by the scheduler on real time (checkout-expiry.ts),
 * on MariaDB and SQLite: a credit purchase whose customer never came back to its checkout ends as
 * a declined one does (its invoice void, its grant failed), rather than staying an open invoice
 * for good; a checkout still within its 24 hours is left alone. The sweep is the real-time
 * scheduler's run, by services built on the test server's database at a later time.
 */
import test from "ava";
import { createDatabase } from "../../src/db/datasource.js";
import { buildServices } from "../../src/wiring/services.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const HOUR = 3_600_000;

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a credit checkout past its expiry is ended by the scheduler: the purchase's invoice void, its grant failed`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    // A subject on real time (no test clock): its checkout expires 24 hours after it opened.
    const subject = (await s.call("POST", "/subjects", { name: "Real time" })).id;
    const r = await s.call("POST", "/credit-grants", {
      subject_id: subject,
      amount: { currency_code: "USD", value: "700" },
      category: "paid",
      checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" },
    });
    t.is(r.credit_grant.status, "pending_payment");
    t.truthy(r.checkout_url);
    const invoices = async () => ((await s.call("GET", `/invoices?subject_id=${subject}&limit=10`)).invoices as Json[]).map((i) => i.status);
    t.deepEqual(await invoices(), ["open"]);

    const db = await createDatabase(server.db.url, { poolSize: 2 });
    t.teardown(() => db.dataSource.destroy());
    await db.dataSource.initialize();
    const runAt = async (at: Date) =>
      buildServices(
        db,
        () => server.url,
        () => at,
      ).scheduler.runDue(at, null);

    // An hour on: still within its 24 hours, nothing ends.
    await runAt(new Date(Date.now() + HOUR));
    t.like(await s.call("GET", `/credit-grants/${r.credit_grant.id}`), { status: "pending_payment" });
    t.deepEqual(await invoices(), ["open"]);

    // A day and an hour on: the checkout expired; the purchase ends, once.
    const later = new Date(Date.now() + 25 * HOUR);
    await runAt(later);
    await runAt(later);
    t.like(await s.call("GET", `/credit-grants/${r.credit_grant.id}`), { status: "failed" });
    t.deepEqual(await invoices(), ["void"]);
    const page = await fetch(r.checkout_url);
    t.not(page.status, 200, "the expired checkout cannot be completed");
  });
}
