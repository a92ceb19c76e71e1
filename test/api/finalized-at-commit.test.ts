/**
 * An invoice's `finalized_at` is stamped in the transaction that finalizes it, after its lock
 * waits, not when its lines were computed: the finance export selects by finalized_at, so an
 * invoice stamped before a wait and committed after an export up to that instant had run would
 * be in no month's export. MariaDB: another transaction holds the environment's invoice number
 * sequence while a cycle close, a draft's finalization and a seat change's immediate invoice wait
 * for it; each invoice's finalized_at is no earlier than the moment that transaction let go.
 */
import test from "ava";
import mysql from "mysql2/promise";
import { simple, usd } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const mysqlOnly = STORES.includes("mysql") ? test : test.skip;
const server = STORES.includes("mysql") ? useServer("mysql") : undefined;

/** Runs `finalizing` while another connection holds the environment's invoice sequence for a second; resolves to the instant it let go. */
async function heldSequence(url: string, invoiceId: string, finalizing: () => Promise<unknown>): Promise<Date> {
  const conn = await mysql.createConnection(url);
  try {
    const [rows] = (await conn.query("SELECT environment_id FROM invoices WHERE id = ?", [invoiceId])) as unknown as [{ environment_id: string }[]];
    await conn.query("START TRANSACTION");
    await conn.query("SELECT last_number FROM invoice_sequences WHERE environment_id = ? AND kind = 'invoice' FOR UPDATE", [rows[0]?.environment_id]);
    const done = finalizing();
    await new Promise((r) => setTimeout(r, 1_500));
    const released = new Date();
    await conn.query("COMMIT");
    await done;
    return released;
  } finally {
    await conn.end();
  }
}

mysqlOnly("mysql: a cycle close that waited on the invoice sequence stamps finalized_at after the wait", async (t) => {
  if (!server) return t.fail();
  const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
  const card = await s.card({ fixed_rates: [{ code: "base", name: "Base", price: { price_type: "flat", amount: { currency_code: "USD", value: "4900" } } }] });
  await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { base: 1 }, create_checkout_session: "always" }, CARD_OK);
  const [first] = (await s.invoices()) as [Json];
  const released = await heldSequence(server.db.url, first.id, () => s.call("POST", `/test-clocks/${s.clockId}/advance`, { frozen_time: "2026-02-15T00:00:00Z" }));
  const renewal = ((await s.invoices()) as Json[]).find((i) => i.period_start === "2026-02-15T00:00:00Z");
  t.truthy(renewal?.number, "the renewal is finalized and numbered");
  t.true(new Date(renewal?.finalized_at).getTime() >= released.getTime(), `finalized_at ${renewal?.finalized_at} is not before ${released.toISOString()}`);
});

mysqlOnly("mysql: a draft finalized while the invoice sequence is held stamps finalized_at after the wait", async (t) => {
  if (!server) return t.fail();
  const s = await Scenario.start(server, "2026-01-15T00:00:00Z", { invoiceGraceSeconds: 3600 });
  // Usage makes the renewal a draft for the grace period.
  const card = await s.card({
    fixed_rates: [{ code: "base", name: "Base", price: { price_type: "flat", amount: { currency_code: "USD", value: "4900" } } }],
    usage_based_rates: [simple(await s.metric(), usd(100), 0, "api", "API calls")],
  });
  await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { base: 1 }, create_checkout_session: "always" }, CARD_OK);
  await s.events([["2026-01-20T00:00:00Z", "3"]]);
  await s.call("POST", `/test-clocks/${s.clockId}/advance`, { frozen_time: "2026-02-15T00:00:00Z" });
  const invoices = (await s.invoices()) as Json[];
  const draft = invoices.find((i) => i.status === "draft");
  const numbered = invoices.find((i) => i.number);
  if (!draft || !numbered) return t.fail(`a draft and a numbered invoice: ${invoices.map((i) => i.status).join(", ")}`);
  const released = await heldSequence(server.db.url, numbered.id, () => s.call("POST", `/invoices/${draft.id}/finalize`, {}));
  const final = await s.call("GET", `/invoices/${draft.id}`);
  t.is(final.status === "draft", false);
  t.true(new Date(final.finalized_at).getTime() >= released.getTime(), `finalized_at ${final.finalized_at} is not before ${released.toISOString()}`);
});

mysqlOnly("mysql: a seat increase's immediate invoice that waited on the invoice sequence stamps finalized_at after the wait", async (t) => {
  if (!server) return t.fail();
  const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
  const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: { currency_code: "USD", value: "3100" } } }] });
  await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 }, create_checkout_session: "always" }, CARD_OK);
  const [first] = (await s.invoices()) as [Json];
  await s.call("POST", `/test-clocks/${s.clockId}/advance`, { frozen_time: "2026-01-17T00:00:00Z" });
  // 1 → 2 seats on day 16 of 31: 3100 × 15/31 = 1500.00 charged at once, numbered in the transaction of the change.
  const released = await heldSequence(server.db.url, first.id, () => s.call("PATCH", `/subscriptions/${first.subscription_id}`, { fixed_rate_quantities: { seats: 2 } }));
  const charge = ((await s.invoices()) as Json[]).find((i) => i.id !== first.id);
  t.is(charge?.total_amount.value, "1500");
  t.truthy(charge?.number, "the change's invoice is numbered");
  t.true(new Date(charge?.finalized_at).getTime() >= released.getTime(), `finalized_at ${charge?.finalized_at} is not before ${released.toISOString()}`);
});
