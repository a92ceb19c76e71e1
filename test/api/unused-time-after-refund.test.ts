/**
 * What a credit note gave back of a period's invoice is not credited again as unused time (DESIGN
 * §13, §15): a resume's credit for the cycle a pause cut short and a change of rate card's credit
 * for the old card are valued at what the period's invoices took less what notes credited of them
 * (unused-credit.ts fixedTaken, amount_credited), as a seat decrease's is
 * (seat-decrease-credit-notes.test.ts). Through the real server (REST) on a test clock, on MariaDB
 * and SQLite. Amounts in cents (USD). An invoice (those with lines) is [status, total, lines as
 * [description, amount]], oldest first.
 */
import test from "ava";
import { seats } from "../helpers/catalog-bodies.js";
import { ledger } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

async function bills(s: Scenario): Promise<unknown[]> {
  return (await s.invoices()).filter((i) => i.line_items.length > 0).map((i) => [i.status, i.total_amount.value, i.line_items.map((l: Json) => [l.description, l.amount.value])]);
}

/** 1 seat at 1,000 a month from January 15 (31 days), paused on January 18 (28 days left): its subscription and first invoice. */
async function pausedOnThe18th(s: Scenario): Promise<{ id: string; invoice: string }> {
  const card = await s.card({ fixed_rates: [seats()] });
  const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription.id;
  await s.advance("2026-01-18T00:00:00Z");
  await s.call("POST", `/subscriptions/${id}/pause`, {});
  const [first] = await s.invoices();
  return { id, invoice: String(first?.id) };
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a resume after a refund of the whole cycle's invoice credits nothing for the paused cycle`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const { id, invoice } = await pausedOnThe18th(s);
    const note = await s.call("POST", "/credit-notes", { invoice_id: invoice, reason: "other", outcome: "refund" });
    t.is(note.total.value, "1000");
    await s.advance("2026-01-20T00:00:00Z");
    await s.call("POST", `/subscriptions/${id}/resume`, {});
    // Without the note: 1,000 × 28/31 = 903 off the resume's invoice. All 1,000 went back by the note: nothing is left to credit.
    t.deepEqual(await bills(s), [
      ["paid", "1000", [["Seats", "1000"]]],
      ["paid", "1000", [["Seats", "1000"]]],
    ]);
    t.deepEqual(await ledger(s), []);
  });

  test(`${store}: a resume after a refund of 500 of the cycle's 1,000 credits at most the 500 left, not 903`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const { id, invoice } = await pausedOnThe18th(s);
    await s.call("POST", "/credit-notes", { invoice_id: invoice, reason: "other", outcome: "refund", amount: "500" });
    await s.advance("2026-01-20T00:00:00Z");
    await s.call("POST", `/subscriptions/${id}/resume`, {});
    // 1,000 × 28/31 = 903 unused, held to what the cycle's invoice kept: 1,000 − 500 = 500; 1,000 − 500 = 500 due.
    const [, resumed] = await bills(s);
    t.deepEqual((resumed as unknown[]).slice(0, 2), ["paid", "500"]);
    t.deepEqual(await ledger(s), []);
  });

  test(`${store}: an upgrade after a refund of the whole old card's invoice credits nothing for the old card`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const pro = await s.card({ name: "Pro", fixed_rates: [seats(10000, "pro", "Pro")] });
    const ent = await s.card({ name: "Ent", fixed_rates: [seats(20000, "ent", "Ent")] });
    const id = (await s.subscribe({ rate_card_id: pro, fixed_rate_quantities: { pro: 1 } })).subscription.id;
    await s.advance("2026-01-17T00:00:00Z");
    const [first] = await s.invoices();
    const note = await s.call("POST", "/credit-notes", { invoice_id: first?.id, reason: "other", outcome: "refund" });
    t.is(note.total.value, "10000");
    await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: ent });
    // Without the note: Pro's unused 10,000 × 29/31 = −9,355 and Ent's +18,710 (9,355 in all). Pro's 10,000 all went back by
    // the note: no credit for it, Ent's 20,000 × 29/31 = 18,710 charged whole (the difference 9,355 + the list credit 9,355).
    t.deepEqual(await bills(s), [
      ["paid", "10000", [["Pro", "10000"]]],
      ["paid", "18710", [["Remaining time on Ent (prorated: 93.55% of the period left)", "18710"]]],
    ]);
    t.deepEqual(await ledger(s), []);
  });
}
