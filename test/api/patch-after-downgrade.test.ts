/**
 * A seat change (PATCH /subscriptions/{id}) after a change of rate card that charged nothing (a
 * downgrade, the period still paid on the card it was charged on) is priced from what was paid,
 * on that card, as a change of rate card is (changes.ts switchPlan): new terms costing no more per
 * period than was paid charge nothing and the period stays paid there; more charge the difference
 * for the rest of the period. Through the public API on test clocks, on MariaDB and SQLite.
 * Amounts in cents (USD); monthly from January 15, a 31-day period; Pro 10,000 a seat, Basic
 * 2,000 a seat. A bill is [status, total, lines (each [description, amount]), amount due], oldest
 * first, invoices without lines left out.
 */
import test from "ava";
import { seats } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

async function bills(s: Scenario): Promise<unknown[]> {
  return (await s.invoices()).filter((i) => i.line_items.length > 0).map((i) => [i.status, i.total_amount.value, i.line_items.map((l: Json) => [l.description, l.amount.value]), i.amount_due.value]);
}

/** Pro, 1 seat from Jan 15 (paid), changed to Basic on Jan 16 (charging nothing), then PATCHed to `quantity` Basic seats the same day. */
async function downgradedThenPatched(server: ReturnType<typeof useServer>, quantity: number) {
  const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
  const pro = await s.card({ name: "Pro", fixed_rates: [seats(10000, "pro", "Pro")] });
  const basic = await s.card({ name: "Basic", fixed_rates: [seats(2000, "basic", "Basic")] });
  const id = (await s.subscribe({ rate_card_id: pro, fixed_rate_quantities: { pro: 1 } })).subscription.id;
  await s.advance("2026-01-16T00:00:00Z");
  await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: basic });
  const patched = await s.call("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { basic: quantity } });
  return { s, id, patched };
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: Pro paid, → Basic, Basic 1 → 3 the same day: nothing charged, a pause credits from the Pro paid`, async (t) => {
    const { s, id, patched } = await downgradedThenPatched(server, 3);
    // Basic × 3 is 6,000 a period, below the 10,000 paid for Pro: nothing charged (the old code took the
    // period as paid at Basic × 1: (6,000 − 2,000) × 30/31 = 3,871 charged), and the period stays paid at Pro.
    t.is(patched.proration_invoice, null);
    await s.call("POST", `/subscriptions/${id}/pause`, {});
    await s.advance("2026-01-20T00:00:00Z");
    await s.call("POST", `/subscriptions/${id}/resume`, {});
    await s.advance("2026-02-20T00:00:00Z");
    t.deepEqual(await bills(s), [
      ["paid", "10000", [["Pro", "10000"]], "10000"],
      // Paused on Jan 16: the Pro paid for the 30 days left, 10,000 × 30/31 = 9,677, credited (the old code
      // credited "Basic × 3" for the 3,871 it charged: 13,871 paid and 3,871 back for one day of Pro);
      // 6,000 of it on the resume's Basic × 3 ...
      [
        "paid",
        "0",
        [
          ["Basic", "6000"],
          ["Pro × 1: unused time of the cycle paused at 2026-01-16T00:00:00Z (remaining 30 of 31 days) (USD 60.00 of USD 96.77; the rest on the next invoice)", "-6000"],
        ],
        "0",
      ],
      // ... and the 3,677 left, from the balance, on the next: 6,000 − 3,677 = 2,323 due.
      ["paid", "6000", [["Basic", "6000"]], "2323"],
    ]);
  });

  test(`${store}: Pro paid, → Basic, Basic 1 → 6 the same day: the 2,000 past the Pro paid charged for the rest of the period`, async (t) => {
    const { s } = await downgradedThenPatched(server, 6);
    await s.advance("2026-02-15T00:00:00Z");
    t.deepEqual(await bills(s), [
      ["paid", "10000", [["Pro", "10000"]], "10000"],
      // Basic × 6 is 12,000 a period, 2,000 more than the Pro paid: (12,000 − 10,000) × 30/31 = 1,935.48, 1,935,
      // as a change of rate card to it would charge (the old code: (12,000 − 2,000) × 30/31 = 9,677).
      [
        "paid",
        "1935",
        [
          ["Unused time on Pro (prorated: 96.77% of the period left)", "-9677"],
          ["Remaining time on Basic (prorated: 96.77% of the period left)", "11612"],
        ],
        "1935",
      ],
      ["paid", "12000", [["Basic", "12000"]], "12000"],
    ]);
  });

  test(`${store}: Pro paid, → Basic, Basic 1 → 6, then 6 → 2 the same day: the decrease credits the period paid at Basic × 6`, async (t) => {
    const { s, id } = await downgradedThenPatched(server, 6);
    await s.call("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { basic: 2 } });
    const ledger = (await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`)).entries.map((e: Json) => [e.entry_type, e.amount.value]);
    // The period is paid at Basic × 6 (Pro's 9,677 and the 1,935 charged): 4 seats less, (12,000 − 4,000) × 30/31 =
    // 7,741.94, 7,742 (before 9fb3522 the cap was the change invoice's 1,935 alone, Pro's credit on it taking the rest).
    t.deepEqual(ledger, [["proration", "7742"]]);
  });
}
