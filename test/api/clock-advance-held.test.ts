/**
 * A test clock's advance while another transaction holds a subscription that falls due (MariaDB:
 * the cycle close skips a locked row, SKIP LOCKED): the advance runs again once the row is let go,
 * so it answers `ready` only with every cycle due by its time closed — never `ready` with a
 * renewal missing until the next advance.
 */
import test from "ava";
import mysql from "mysql2/promise";
import { STORES } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const mysqlOnly = STORES.includes("mysql") ? test : test.skip;
const server = STORES.includes("mysql") ? useServer("mysql") : undefined;

mysqlOnly("mysql: an advance waits for a subscription another transaction holds, then closes its cycle before it answers ready", async (t) => {
  if (!server) return t.fail();
  const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
  const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: { currency_code: "USD", value: "4900" } } }] });
  const { subscription } = await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 }, create_checkout_session: "always" }, CARD_OK);

  // Another transaction holds the subscription's row for a second after the advance begins.
  const conn = await mysql.createConnection(server.db.url);
  try {
    await conn.query("START TRANSACTION");
    await conn.query("SELECT id FROM subscriptions WHERE id = ? FOR UPDATE", [subscription.id]);
    const advanced = s.call("POST", `/test-clocks/${s.clockId}/advance`, { frozen_time: "2026-02-15T00:00:00Z" });
    await new Promise((r) => setTimeout(r, 1_000));
    await conn.query("COMMIT");
    const clock = await advanced;
    t.is(clock.status, "ready");
  } finally {
    await conn.end();
  }
  // Answered ready: the renewal is there, and the subscription is in its next period.
  const renewals = (await s.invoices()).filter((i: Json) => i.period_start === "2026-02-15T00:00:00Z");
  t.is(renewals.length, 1);
  t.like(await s.call("GET", `/subscriptions/${subscription.id}`), { current_period: { start: "2026-02-15T00:00:00Z" } });
});
