/**
 * Dunning with several servers on one MariaDB (DESIGN §16): two servers' dunning (each its own
 * wiring, its own test provider, as two processes would have them) run the retries due at the
 * same instant; each due invoice gets exactly one attempt — claimed under its row lock, SKIP
 * LOCKED passing over the one the other server holds — one `invoice.payment_failed` per attempt,
 * and the next attempt planned once. The scenario is set up through the test server's API.
 */
import { createDatabase } from "../../src/db/datasource.js";
import { buildServices } from "../../src/wiring/services.js";
import type { Json } from "../helpers/subjects-api.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { mysqlOnly } from "../helpers/mysql-only.js";
import { type TestServer, startTestServer } from "../helpers/server.js";

const usd = (value: string) => ({ currency_code: "USD", value });

mysqlOnly("mysql: two servers retrying the same due invoices at once make one attempt each", async (t) => {
  const server: TestServer = await startTestServer("mysql");
  try {
    const subjects: { s: Scenario; invoiceId: string }[] = [];
    const first = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await first.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: usd("4900") } }] });
    // Five subjects on one clock, each with a renewal whose first attempt failed (next: +3 days).
    for (let n = 0; n < 5; n++) {
      const s = n === 0 ? first : new Scenario(server);
      if (n > 0) {
        s.key = first.key;
        s.clockId = first.clockId;
        s.subjectId = (await s.call("POST", "/subjects", { name: `Customer ${n}`, test_clock_id: first.clockId })).id;
      }
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 }, create_checkout_session: "always" }, CARD_OK);
      const r = await s.raw("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: "https://app.example/" });
      const res = await fetch(`${server.url}${new URL(r.body.url).pathname}/card`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ card_number: "4000 0000 0000 0341" }).toString(),
        redirect: "manual",
      });
      await res.body?.cancel();
      subjects.push({ s, invoiceId: "" });
    }
    await first.advance("2026-02-15T00:00:00Z");
    for (const x of subjects) {
      const inv = (await x.s.invoices()).at(-1) as Json;
      x.invoiceId = inv.id;
      t.like(await x.s.call("GET", `/invoices/${inv.id}`), { attempt_count: 1, next_payment_attempt: "2026-02-18T00:00:00Z" });
    }
    // Two more servers over the same database, each with its own dunning.
    const dbs = await Promise.all([0, 1].map(() => createDatabase(server.db.url, { poolSize: 4 })));
    try {
      for (const db of dbs) await db.dataSource.initialize();
      const [a, b] = dbs.map(
        (db) =>
          buildServices(
            db,
            () => "http://localhost",
            () => new Date(),
          ).dunning,
      );
      const due = new Date("2026-02-18T00:00:00Z");
      const [na, nb] = await Promise.all([a?.runDue(due, first.clockId), b?.runDue(due, first.clockId)]);
      t.is((na ?? 0) + (nb ?? 0), subjects.length, "one attempt per invoice between the two servers");
      const events = (await first.call("GET", "/events?types=invoice.payment_failed&limit=100")).events as Json[];
      for (const x of subjects) {
        t.like(await x.s.call("GET", `/invoices/${x.invoiceId}`), { status: "open", attempt_count: 2, next_payment_attempt: "2026-02-20T00:00:00Z" });
        t.deepEqual(
          events.filter((e) => e.data.id === x.invoiceId).map((e) => e.data.attempt_count),
          [1, 2],
        );
      }
    } finally {
      for (const db of dbs) if (db.dataSource.isInitialized) await db.dataSource.destroy();
    }
  } finally {
    await server.stop();
  }
});
