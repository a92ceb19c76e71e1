/**
 * A long test-clock advance (a century of monthly cycles) must not hold the server: on the
 * embedded store every query runs synchronously, and a loop of them used to keep the event loop
 * from answering anything else, even /ping, until the advance was done. The work now lets the
 * event loop turn between steps (src/billing/yielding.ts). Asserted by order, not by time: a
 * /ping and a subject read sent after the advance started are answered before it finishes.
 * (Bounding how long each step may hold the loop, and measuring it, is issue 12's.)
 */
import test from "ava";
import { rest } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { startTestServer } from "../helpers/server.js";

for (const store of STORES) {
  // The hazard is the embedded store's synchronous queries; MariaDB's are asynchronous, so a
  // decade is enough there (a century of cycles takes it half a minute).
  const years = store === "sqlite" ? 100 : 10;
  test(`${store}: other requests are answered while a clock advance closes ${years} years of monthly cycles`, async (t) => {
    const server = await startTestServer(store, { SCHEDULER_INTERVAL_MS: "0" });
    try {
      const s = await Scenario.start(server, "2000-01-01T00:00:00Z");
      const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { amount: { currency_code: "USD", value: 0 } } }] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, null);
      const order: string[] = [];
      const until = `${2000 + years}-01-01T00:00:00Z`;
      const advance = s.advance(until).then(() => order.push("advance"));
      // Once the advance is under way (its first invoices are written), ask for other things.
      for (let i = 0; i < 200 && (await s.invoices()).length < 2; i++) await new Promise((r) => setTimeout(r, 25));
      const others = Promise.all([
        fetch(`${server.url}/ping`).then((r) => order.push(`ping ${r.status}`)),
        rest(server.url, "GET", `/subjects/${s.subjectId}`, s.key).then((r) => order.push(`subject ${r.status}`)),
      ]);
      await Promise.all([advance, others]);
      t.deepEqual(order.slice(-1), ["advance"], `answered in this order: ${order.join(", ")}`);
      t.deepEqual(order.slice(0, 2).sort(), ["ping 200", "subject 200"]);
      const [sub] = await s.subscriptions();
      t.is(sub?.current_period.start, until, "every cycle up to the new time was closed");
    } finally {
      await server.stop();
    }
  });
}
