/**
 * A first charge cut short before its plan committed (DESIGN §16; found by the HA harness: the
 * database frozen under a settle): the invoice is open, never attempted, with no attempt planned,
 * and its subject has a card on file. Dunning's next run after two minutes on the invoice's clock
 * plans it and makes it, with the charge's key for attempt 1 (a charge the provider had already
 * made is answered with that charge). An invoice of a subject with no card is left alone.
 */
import test from "ava";
import { STORES, withDatabase } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const usd = (value: string) => ({ currency_code: "USD", value });

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: an open invoice whose first charge was never planned is charged by dunning two minutes on`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: usd("4900") } }] });
    await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 }, create_checkout_session: "always" }, CARD_OK);
    await s.advance("2026-02-15T00:00:00Z");
    const renewal = (await s.invoices()).at(-1) as Json;
    t.like(await s.call("GET", `/invoices/${renewal.id}`), { status: "paid", attempt_count: 1 });
    // As a settle cut short leaves it: finalized and open, no attempt made or planned.
    await withDatabase(server.db.url, (db) =>
      db.dataSource.query("UPDATE invoices SET status = 'open', attempt_count = 0, next_payment_attempt = NULL, payment_state = NULL WHERE id = ?", [renewal.id]),
    );
    await s.advance("2026-02-15T00:01:00Z");
    t.like(await s.call("GET", `/invoices/${renewal.id}`), { status: "open", attempt_count: 0 }, "left to a settle still running for two minutes");
    await s.advance("2026-02-15T00:02:00Z");
    t.like(await s.call("GET", `/invoices/${renewal.id}`), { status: "paid", attempt_count: 1, next_payment_attempt: null });
  });

  test(`${store}: an open invoice of a subject without a card is not charged by it`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: usd("4900") } }] });
    await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 }, create_checkout_session: "always" }, CARD_OK);
    await s.advance("2026-02-15T00:00:00Z");
    const renewal = (await s.invoices()).at(-1) as Json;
    await withDatabase(server.db.url, async (db) => {
      await db.dataSource.query("UPDATE invoices SET status = 'open', attempt_count = 0, next_payment_attempt = NULL, payment_state = NULL WHERE id = ?", [renewal.id]);
      await db.dataSource.query("UPDATE subjects SET payment_method_id = NULL WHERE id = ?", [s.subjectId]);
    });
    await s.advance("2026-02-16T00:00:00Z");
    t.like(await s.call("GET", `/invoices/${renewal.id}`), { status: "open", attempt_count: 0, next_payment_attempt: null });
    t.deepEqual(((await s.call("GET", "/events?types=invoice.payment_failed&limit=10")).events as Json[]).length, 0);
  });
}
