/**
 * Dunning's sweep for first charges that never got their plan (DunningStore.unplanned) never
 * lists a credit purchase awaiting its checkout, on MariaDB and SQLite: such a purchase is the
 * customer's decision, skipped by the sweep's charge, so an abandoned one (its subject's card saved
 * since) listed oldest first would take a place in every batch, and a batch of them would keep the
 * invoices the sweep is for from ever being charged.
 */
import test from "ava";
import { createDatabase } from "../../src/db/datasource.js";
import { SqlDunningStore } from "../../src/db/stores/dunning-store.js";
import { STORES } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const usd = (value: string) => ({ currency_code: "USD", value });

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a purchase awaiting its checkout is not an unplanned first charge, once its subject has a card`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const r = await s.call("POST", "/credit-grants", {
      subject_id: s.subjectId,
      amount: usd("700"),
      category: "paid",
      checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" },
    });
    t.is(r.credit_grant.status, "pending_payment");
    await s.saveCardInPortal(CARD_OK);
    const purchase = ((await s.invoices()) as Json[]).find((i) => i.status === "open");
    if (!purchase) return t.fail("the purchase's invoice is open");
    const db = await createDatabase(server.db.url, { poolSize: 1 });
    t.teardown(() => db.dataSource.destroy());
    await db.dataSource.initialize();
    const listed = await new SqlDunningStore(db.sql).unplanned(new Date("2100-01-01T00:00:00Z"), s.clockId, 1000);
    t.false(
      listed.some((d) => d.id === purchase.id),
      "the purchase is its checkout's to charge",
    );
    t.like(await s.call("GET", `/credit-grants/${r.credit_grant.id}`), { status: "pending_payment" });
  });
}
