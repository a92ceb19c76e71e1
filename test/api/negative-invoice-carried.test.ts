/**
 * An invoice that opens with a total below 0 and takes an amount carried from an earlier invoice
 * (below the provider's minimum charge, payments/carries.ts): the carried amount is owed on top of
 * the total, so the balance gets only what is left of the negative (credit-application.ts
 * grantNegativeTotal). Through the REST API on test clocks, on MariaDB and SQLite. A 30 debit is
 * written as payments/record.ts writes it when Stripe refuses 30 as too small. 1 seat at 1,000 and
 * API calls at 2 a unit at ×3; 1,000 units on Jan 8; lowered to ×1 on Jan 10 (4,000 billed at
 * once); those units withdrawn on Jan 12 and `used` units dated Jan 15 sent. Amounts in USD cents.
 */
import test from "ava";
import { seats } from "../helpers/catalog-bodies.js";
import { ledger } from "../helpers/credit-bodies.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { flat, patch, usageRate } from "../helpers/price-bodies.js";
import { Scenario } from "../helpers/scenario.js";
import { type TestServer, useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

async function withdrawnAndCarried(server: TestServer, used: string): Promise<Scenario> {
  const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
  const api = await s.metric();
  const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [usageRate(api, flat(2))] });
  const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 }, rate_price_multipliers: { api: "3" } })).subscription.id;
  await s.events([["2026-01-08T00:00:00Z", "1000"]]);
  await s.advance("2026-01-10T00:00:00Z");
  await patch(s, id, { rate_price_multipliers: { api: "1" } });
  await s.advance("2026-01-12T00:00:00Z");
  await s.events([["2026-01-08T00:00:00Z", "-1000"]]);
  await s.events([["2026-01-15T00:00:00Z", used]]);
  const first = (await s.invoices())[0] as Json;
  await withDatabase(server.db.url, async (db) => {
    const [row] = await db.dataSource.query("SELECT environment_id FROM invoices WHERE id = ?", [first.id]);
    await db.dataSource.query(
      "INSERT INTO carried_debits (source_invoice_id, environment_id, subject_id, currency, amount, source_number, applied_invoice_id, created_at, applied_at) VALUES (?, ?, ?, 'USD', '30', ?, NULL, ?, NULL)",
      [first.id, row.environment_id, s.subjectId, first.number, "2026-01-05 00:00:00.000"],
    );
  });
  await s.advance("2026-02-01T00:00:00Z");
  return s;
}

const feb = async (s: Scenario) => {
  const i = (await s.invoices()).at(-1) as Json;
  return [i.total_amount.value, i.amount_carried_in?.value ?? null, i.amount_due.value];
};

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: an invoice of −1,000 that takes 30 carried in grants 970`, async (t) => {
    const s = await withdrawnAndCarried(server, "1000");
    // Feb 1: 1 seat 1,000 + 1,000 × 2 × 1 = 2,000 − the lowering's 4,000 = −1,000; 30 carried in: −970, granted (was 1,000).
    t.deepEqual([await feb(s), await ledger(s)], [["-1000", "30", "0"], [["invoice_credit", "970"]]]);
  });

  test(`${store}: an invoice of −10 that takes 30 carried in is due 20 and grants nothing`, async (t) => {
    const s = await withdrawnAndCarried(server, "1495");
    // Feb 1: 1,000 + 1,495 × 2 = 3,990 − 4,000 = −10; 30 carried in: 20 due, nothing granted (10 was granted besides).
    t.deepEqual([await feb(s), (await ledger(s)).filter(([type]) => type === "invoice_credit")], [["-10", "30", "20"], []]);
  });
}
