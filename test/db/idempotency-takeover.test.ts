/**
 * A call whose Idempotency-Key another request took over (DESIGN §12: a retry may take over a key
 * whose holder changed nothing within its 5-minute lease) changes nothing when it resumes: the mark
 * it writes in its transaction finds the key no longer its own and rolls the transaction back, so
 * of the two only the one holding the key charges (MariaDB). The resumed call here is a seat
 * increase held on its subscription's row lock while the key's claim is handed to another token,
 * as a takeover does; before, it wrote its proration invoice and charged it anyway.
 */
import mysql from "mysql2/promise";
import { seats } from "../helpers/catalog-bodies.js";
import { mysqlOnly } from "../helpers/mysql-only.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { startTestServer } from "../helpers/server.js";

mysqlOnly("mysql: a call whose key was taken over while it waited changes nothing when it resumes", async (t) => {
  const server = await startTestServer("mysql");
  const holder = await mysql.createConnection(server.db.url);
  const other = await mysql.createConnection(server.db.url);
  t.teardown(async () => {
    await holder.end().catch(() => {});
    await other.end().catch(() => {});
    await server.stop();
  });
  const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
  const card = await s.card({ fixed_rates: [seats()] });
  const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, CARD_OK)).subscription.id;
  await s.advance("2026-01-17T00:00:00Z");
  const key = `takeover-${Date.now()}`;

  // The seat increase waits on its subscription's row, which another transaction holds.
  await holder.query("START TRANSACTION");
  await holder.query("SELECT id FROM subscriptions WHERE id = ? FOR UPDATE", [id]);
  const answer = fetch(`${server.url}/subscriptions/${id}`, {
    method: "PATCH",
    headers: { "x-api-key": s.key, "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify({ fixed_rate_quantities: { seats: 2 } }),
  }).then(async (r) => ({ status: r.status, body: (await r.json()) as { code?: string; details?: { debug?: { reason?: string } }[] } }));
  // Once it holds the key (claimed, nothing changed), the key is taken over, as a retry after the lease does.
  for (let i = 0; ; i++) {
    const [rows] = (await other.query("SELECT claim_token FROM idempotency_keys WHERE idem_key = ?", [key])) as unknown as [{ claim_token: string }[]];
    if (rows.length > 0) break;
    if (i > 500) return t.fail("the call never claimed its key");
    await new Promise((r) => setTimeout(r, 10));
  }
  await other.query("UPDATE idempotency_keys SET claim_token = 'taken-over' WHERE idem_key = ?", [key]);
  await new Promise((r) => setTimeout(r, 200));
  await holder.query("COMMIT");

  const { status, body } = await answer;
  t.is(status, 409, JSON.stringify(body));
  t.is(body.code, "aborted");
  t.is(body.details?.[0]?.debug?.reason, "IDEMPOTENCY_KEY_TAKEN_OVER");
  t.is((await s.invoices()).length, 1, "no proration invoice: only the first period's");
  t.deepEqual((await s.call("GET", `/subscriptions/${id}`)).fixed_rate_quantities, { seats: "1" });
});

mysqlOnly("mysql: a keyed subject creation (a pipelined transaction: its mark checked before the COMMIT) is written once and replayed", async (t) => {
  const server = await startTestServer("mysql");
  t.teardown(() => server.stop());
  const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
  const key = `subject-${Date.now()}`;
  const create = () =>
    fetch(`${server.url}/subjects`, {
      method: "POST",
      headers: { "x-api-key": s.key, "content-type": "application/json", "idempotency-key": key },
      body: JSON.stringify({ name: "Keyed", external_id: key }),
    }).then(async (r) => [r.status, await r.text(), r.headers.get("idempotent-replayed")]);
  const first = await create();
  t.is(first[0], 200, String(first[1]));
  t.deepEqual(await create(), [first[0], first[1], "true"], "the same answer, replayed");
});
