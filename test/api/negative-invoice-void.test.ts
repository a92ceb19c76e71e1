/**
 * Voiding an invoice whose total below 0 granted the subject credit (credit-application.ts
 * grantNegativeTotal, ledger entry `invoice_credit`) takes that grant back. Such an invoice is paid
 * at once (0 due) when its settlement runs; one that settlement failed to mark paid stays open and
 * can be voided. A trigger on the invoices table refuses, while it is there, moving an invoice of a
 * negative total to paid, as a failed write would (settlement.ts: the invoice stays open). Through
 * the REST API on test clocks, on MariaDB and SQLite. 1 seat at 1,000 and API calls at 2 a unit at
 * ×3; 1,000 units on Jan 8; lowered to ×1 on Jan 10 (4,000 billed at once); those units withdrawn
 * on Jan 12 and `used` units dated Jan 15 sent. Amounts in USD cents. The failed settlements are
 * logged ("charging an invoice failed; it stays open", held open).
 */
import test from "ava";
import { seats } from "../helpers/catalog-bodies.js";
import { creditState, grants, ledger } from "../helpers/credit-bodies.js";
import { STORES, type Store, withDatabase } from "../helpers/db.js";
import { flat, patch, usageRate } from "../helpers/price-bodies.js";
import { reasonOf } from "../helpers/clients.js";
import { Scenario } from "../helpers/scenario.js";
import { type TestServer, useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const HOLD = "hold_negative_open";

/** While held, an invoice of a total below 0 cannot become paid: its settlement fails and it stays open. */
async function holdNegativeOpen(server: TestServer, store: Store, on: boolean): Promise<void> {
  await withDatabase(server.db.url, async (db) => {
    if (!on) return void (await db.dataSource.query(`DROP TRIGGER ${HOLD}`));
    await db.dataSource.query(
      store === "sqlite"
        ? `CREATE TRIGGER ${HOLD} BEFORE UPDATE OF status ON invoices WHEN NEW.status = 'paid' AND OLD.total LIKE '-%' BEGIN SELECT RAISE(ABORT, 'held open'); END`
        : `CREATE TRIGGER ${HOLD} BEFORE UPDATE ON invoices FOR EACH ROW BEGIN IF NEW.status = 'paid' AND OLD.total < 0 THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'held open'; END IF; END`,
    );
  });
}

/** Feb 1's invoice, of 1,000 seat + `used` × 2 − 4,000, finalized (its negative granted) and held open; the scenario and that invoice. */
async function heldOpen(server: TestServer, store: Store, used: string): Promise<{ s: Scenario; feb: Json }> {
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
  await holdNegativeOpen(server, store, true);
  await s.advance("2026-02-01T00:00:00Z");
  const feb = (await s.invoices()).at(-1) as Json;
  return { s, feb };
}

const shown = (i: Json) => [i.status, i.total_amount.value, i.amount_due.value];

for (const store of STORES) {
  const server = useServer(store);

  test.serial(`${store}: voiding an open invoice of −1,000 takes back the 1,000 its total granted`, async (t) => {
    const { s, feb } = await heldOpen(server, store, "1000");
    // Feb 1: 1,000 seat + 1,000 × 2 × 1 = 2,000 − the lowering's 4,000 = −1,000: 1,000 granted, the invoice open with 0 due.
    t.deepEqual([shown(feb), await ledger(s)], [["open", "-1000", "0"], [["invoice_credit", "1000"]]]);
    await holdNegativeOpen(server, store, false);
    t.like(await s.call("POST", `/invoices/${feb.id}/void`, {}), { status: "void" });
    // The grant is voided and its 1,000 leaves the balance (the old code kept it: balance 1,000).
    t.deepEqual(await ledger(s), [
      ["invoice_credit", "1000"],
      ["void", "-1000"],
    ]);
    t.deepEqual(
      (await grants(s)).map((g) => [g.status, g.remaining_amount.value]),
      [["voided", "0"]],
    );
    t.deepEqual(await creditState(s), ["0", "0"]);
    // Mar 1: the seat's 1,000 is due in full (the old code paid it from the kept credit: 0 due).
    await s.advance("2026-03-01T00:00:00Z");
    t.deepEqual(shown((await s.invoices()).at(-1) as Json), ["paid", "1000", "1000"]);
  });

  test.serial(`${store}: an open invoice of −3,000 whose grant paid 1,000 of a later invoice cannot be voided`, async (t) => {
    const { s, feb } = await heldOpen(server, store, "0");
    // Feb 1: 1,000 seat + 0 usage − 4,000 = −3,000: 3,000 granted; Mar 1's seat (1,000) is paid from it, 2,000 left.
    await s.advance("2026-03-01T00:00:00Z");
    await holdNegativeOpen(server, store, false);
    t.deepEqual(await ledger(s), [
      ["invoice_credit", "3000"],
      ["application", "-1000"],
    ]);
    const r = await s.raw("POST", `/invoices/${feb.id}/void`, {});
    // Refused: voiding it would take back 3,000 of which 1,000 is spent (the old code voided it and kept the 2,000 on the balance).
    t.deepEqual([r.status, reasonOf(r.body)], [400, "INVOICE_CREDIT_SPENT"]);
    t.deepEqual(shown((await s.invoices()).find((i) => i.id === feb.id) as Json), ["open", "-3000", "0"]);
    t.deepEqual(await creditState(s), ["2000", "2000"]);
    // As the refusal says: the grant voided (its 2,000 off the balance), the invoice can be voided, with nothing left to take back.
    await s.call("POST", `/credit-grants/${(await grants(s))[0]?.id}/void`, {});
    t.like(await s.call("POST", `/invoices/${feb.id}/void`, {}), { status: "void" });
    t.deepEqual(
      [await ledger(s), await creditState(s)],
      [
        [
          ["invoice_credit", "3000"],
          ["application", "-1000"],
          ["void", "-2000"],
        ],
        ["0", "0"],
      ],
    );
  });
}
